package server_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/auth"
	"github.com/toolsd/toolsd/internal/registry"
	"github.com/toolsd/toolsd/internal/server"
	"github.com/toolsd/toolsd/internal/session"
	"github.com/toolsd/toolsd/internal/tool"
)

// schemaWatchEnv is a ToolService over a registry of its own, served over bufconn.
type schemaWatchEnv struct {
	reg   *registry.Registry
	srv   *server.Server
	tools toolsdv1.ToolServiceClient
	ends  watchRPCEnds
	now   atomic.Int64 // the registry's clock, UnixNano

	mu      sync.Mutex
	refused []string
}

// newSchemaWatchEnv serves a ToolService built from deps (its Registry, Sessions and
// WatchRefused are the env's).
func newSchemaWatchEnv(t *testing.T, deps server.Deps) *schemaWatchEnv {
	t.Helper()
	e := &schemaWatchEnv{}
	e.now.Store(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	e.reg = registry.New(registry.WithLogger(zaptest.NewLogger(t)), registry.WithToolSetIdle(time.Minute),
		registry.WithClock(func() time.Time { return time.Unix(0, e.now.Load()) }))
	mem := session.NewMemory()
	t.Cleanup(func() { _ = mem.Close() })
	deps.Registry, deps.Sessions = e.reg, mem
	deps.WatchRefused = func(limit string) {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.refused = append(e.refused, limit)
	}
	e.srv = server.New(deps)
	e.ends = make(watchRPCEnds, 64) // more than a test opens watches
	g, _ := server.NewGRPCServer(server.GRPCConfig{StatsHandler: e.ends, MaxRecvMsgSize: 1 << 20})
	toolsdv1.RegisterToolServiceServer(g, e.srv)
	e.tools = toolsdv1.NewToolServiceClient(serveBufconn(t, g, grpc.WithTransportCredentials(insecure.NewCredentials())))
	return e
}

// watchRPCEnds receives once each watch RPC (WatchSchemas, WatchSession) has ended, its
// handler returned; the ends of other RPCs are not reported.
type watchRPCEnds chan struct{}

type methodKey struct{}

func (watchRPCEnds) TagRPC(ctx context.Context, info *stats.RPCTagInfo) context.Context {
	return context.WithValue(ctx, methodKey{}, info.FullMethodName)
}
func (watchRPCEnds) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (watchRPCEnds) HandleConn(context.Context, stats.ConnStats)                       {}
func (e watchRPCEnds) HandleRPC(ctx context.Context, s stats.RPCStats) {
	method, _ := ctx.Value(methodKey{}).(string)
	if _, ok := s.(*stats.End); ok && strings.Contains(method, "/Watch") {
		e <- struct{}{}
	}
}

// register registers a tool named name in scope, described by desc.
func (e *schemaWatchEnv) register(t *testing.T, scope, name, desc string) {
	t.Helper()
	d := tool.Definition{Name: name, Description: desc, Parameters: []byte(`{"type":"object"}`)}
	if _, err := e.reg.Register(scope, d, "p1"); err != nil {
		t.Fatalf("Register(%q, %q) = %v", scope, name, err)
	}
}

// schemas is what Schemas answers for scope (and tool set id).
func (e *schemaWatchEnv) schemas(t *testing.T, scope, id string) *toolsdv1.SchemasResponse {
	t.Helper()
	resp, err := e.tools.Schemas(t.Context(), &toolsdv1.SchemasRequest{Scope: scope, ToolSetId: id})
	if err != nil {
		t.Fatalf("Schemas(%q, %q) = %v", scope, id, err)
	}
	return resp
}

// watch opens a WatchSchemas stream, cancelled at the test's end.
func (e *schemaWatchEnv) watch(t *testing.T, scope, id string) (toolsdv1.ToolService_WatchSchemasClient, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	w, err := e.tools.WatchSchemas(ctx, &toolsdv1.WatchSchemasRequest{Scope: scope, ToolSetId: id})
	if err != nil {
		t.Fatal(err)
	}
	return w, cancel
}

// next reads w's next message, which must be what Schemas answers now for scope (and
// tool set id).
func (e *schemaWatchEnv) next(t *testing.T, w toolsdv1.ToolService_WatchSchemasClient, scope, id, after string) {
	t.Helper()
	m, err := w.Recv()
	if err != nil {
		t.Fatalf("WatchSchemas(%q).Recv() after %s = %v", scope, after, err)
	}
	want := e.schemas(t, scope, id)
	if m.GetFingerprint() != want.GetFingerprint() || int(m.GetToolCount()) != len(want.GetTools()) {
		t.Fatalf("WatchSchemas(%q).Recv() after %s = %s (%d tools), want Schemas' %s (%d tools)",
			scope, after, m.GetFingerprint(), m.GetToolCount(), want.GetFingerprint(), len(want.GetTools()))
	}
}

// endsWithStatus reads w to its end, which must have code and reason, and returns the
// status's message.
func endsWithStatus(t *testing.T, w toolsdv1.ToolService_WatchSchemasClient, what string, code codes.Code, why string) string {
	t.Helper()
	for {
		m, err := w.Recv()
		if err == nil {
			t.Errorf("WatchSchemas %s: Recv() = %s, want the stream to end", what, m.GetFingerprint())
			continue
		}
		if status.Code(err) != code || reason(err) != why {
			t.Errorf("WatchSchemas %s ended with %v, want %v (%s)", what, err, code, why)
		}
		return status.Convert(err).Message()
	}
}

// TestWatchSchemasFollowsTheVisibleSet: a watch sends Schemas' fingerprint first, then
// Schemas' new one after each change of the visible set, whether a registration in the
// scope or an ancestor, an unregistration or a restriction; changes that leave the set
// as it was (elsewhere: a sibling, a descendant, another tenant; or an ancestor's tool
// the scope shadows) send nothing, so the next message is the next visible change's.
func TestWatchSchemasFollowsTheVisibleSet(t *testing.T) {
	e := newSchemaWatchEnv(t, server.Deps{})
	const scope = "team/agent"
	e.register(t, "team", "a", "the a tool")
	e.register(t, scope, "s", "the agent's own s")
	w, _ := e.watch(t, scope, "")
	e.next(t, w, scope, "", "opening")

	e.register(t, "", "b", "a global tool")
	e.next(t, w, scope, "", "a global registration")

	e.register(t, "team/other", "x", "a sibling's tool")
	e.register(t, scope+"/sub", "y", "a descendant's tool")
	e.register(t, "acme", "z", "another tenant's tool")
	e.register(t, "team", "s", "shadowed by the agent's own s")
	if err := e.reg.Unregister("team", "a", "p1"); err != nil {
		t.Fatal(err)
	}
	e.next(t, w, scope, "", "changes elsewhere, then an unregistration in an ancestor")

	if _, err := e.reg.Restrict(scope, nil, []string{"b"}); err != nil {
		t.Fatal(err)
	}
	e.next(t, w, scope, "", "a restriction")

	if _, err := e.reg.Restrict("acme", nil, []string{"z"}); err != nil {
		t.Fatal(err)
	}
	e.register(t, scope, "c", "the agent's own c")
	e.next(t, w, scope, "", "a restriction elsewhere, then an own registration")
}

// TestWatchSchemasReaderThatFallsBehindGetsTheLatest: while a watch is held after a
// send (as by a Send waiting on a slow reader), registrations do not wait for it, and
// once it goes on it sends only the latest fingerprint, not one per change it missed.
func TestWatchSchemasReaderThatFallsBehindGetsTheLatest(t *testing.T) {
	var sent atomic.Int32
	held, release := make(chan struct{}), make(chan struct{})
	e := newSchemaWatchEnv(t, server.Deps{SchemasSent: func() {
		if sent.Add(1) == 2 {
			close(held)
			<-release
		}
	}})
	const scope = "team"
	w, _ := e.watch(t, scope, "")
	e.next(t, w, scope, "", "opening")
	e.register(t, scope, "a", "the a tool")
	<-held // a's fingerprint is sent, and the watch held
	for i := range 5 {
		e.register(t, scope, fmt.Sprintf("t%d", i), "one of many")
	}
	close(release)
	m, err := w.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if m.GetToolCount() != 1 {
		t.Fatalf("WatchSchemas(%q).Recv() after a = %d tools, want 1", scope, m.GetToolCount())
	}
	e.next(t, w, scope, "", "five registrations while the watch was held")
	e.register(t, scope, "last", "the last tool")
	e.next(t, w, scope, "", "one more registration")
}

// TestWatchSchemasOfAToolSet: a tool set's fingerprint is fixed, so its watch sends it
// once, then ends with NotFound (TOOL_SET_GONE) saying why once the set is released,
// invalidated by a change, or swept after it expired; a set of another scope is a bad
// request, as for Schemas.
func TestWatchSchemasOfAToolSet(t *testing.T) {
	e := newSchemaWatchEnv(t, server.Deps{})
	const scope = "team"
	e.register(t, scope, "a", "the a tool")
	for name, c := range map[string]struct {
		end  func(id string)
		why  string
		code codes.Code
	}{
		"released": {end: func(id string) {
			if _, err := e.tools.ReleaseToolSet(t.Context(), &toolsdv1.ReleaseToolSetRequest{ToolSetId: id}); err != nil {
				t.Fatal(err)
			}
		}, why: "was released"},
		"invalidated": {end: func(string) {
			if err := e.reg.Unregister(scope, "a", "p1"); err != nil {
				t.Fatal(err)
			}
			e.register(t, scope, "a", "the a tool, changed")
		}, why: "was invalidated"},
		"expired": {end: func(string) {
			e.now.Add(int64(time.Hour))
			e.reg.SweepToolSets(time.Unix(0, e.now.Load()))
		}, why: "expired"},
	} {
		t.Run(name, func(t *testing.T) {
			set, err := e.tools.ResolveToolSet(t.Context(), &toolsdv1.ResolveToolSetRequest{Scope: scope})
			if err != nil {
				t.Fatal(err)
			}
			id := set.GetToolSetId()
			w, _ := e.watch(t, scope, id)
			e.next(t, w, scope, id, "opening")
			c.end(id)
			msg := endsWithStatus(t, w, name, codes.NotFound, "TOOL_SET_GONE")
			if !strings.Contains(msg, c.why) {
				t.Errorf("WatchSchemas of a set %s ended with %q, want it to say it %s", name, msg, c.why)
			}
		})
	}
	set, err := e.tools.ResolveToolSet(t.Context(), &toolsdv1.ResolveToolSetRequest{Scope: scope})
	if err != nil {
		t.Fatal(err)
	}
	w, _ := e.watch(t, "team/agent", set.GetToolSetId())
	endsWithStatus(t, w, "of another scope's set", codes.InvalidArgument, "BAD_REQUEST")
}

// denyScope authorizes everything but ReadTools in scopes within denied.
type denyScope struct{ denied string }

func (d denyScope) Authorize(_ context.Context, action server.Action, scope, _ string) error {
	if action == server.ActionReadTools && registry.Within(scope, d.denied) {
		return fmt.Errorf("%w: may not read the tools of %q", auth.ErrPermissionDenied, scope)
	}
	return nil
}

func (denyScope) ScopeFilter(context.Context, server.Action) (func(string) bool, error) {
	return func(string) bool { return true }, nil
}

func (denyScope) Unconfined(context.Context, server.Action) bool { return true }

func (denyScope) ForgetSession(string) {}

// TestWatchSchemasIsAuthorizedAsSchemas: a watch of a scope the caller may not read is
// refused with PermissionDenied, and one of a malformed scope with INVALID_SCOPE.
func TestWatchSchemasIsAuthorizedAsSchemas(t *testing.T) {
	e := newSchemaWatchEnv(t, server.Deps{Authorizer: denyScope{denied: "acme"}})
	w, _ := e.watch(t, "acme/agent", "")
	endsWithStatus(t, w, "of a scope the caller may not read", codes.PermissionDenied, "PERMISSION_DENIED")
	w, _ = e.watch(t, "team//agent", "")
	endsWithStatus(t, w, "of a malformed scope", codes.InvalidArgument, "INVALID_SCOPE")
	w, _ = e.watch(t, "team", "")
	e.next(t, w, "team", "", "opening a scope the caller may read")
}

// TestWatchSchemasHoldsAWatchPlace: a schema watch holds a place among
// limits.max_watches, shared with WatchSession: over it, either is refused with
// ResourceExhausted (LIMIT_EXCEEDED) and counted; the place comes back once the watch
// is cancelled, and a watch stopped by shutdown ends with Unavailable (SHUTTING_DOWN).
func TestWatchSchemasHoldsAWatchPlace(t *testing.T) {
	e := newSchemaWatchEnv(t, server.Deps{Limits: server.Limits{MaxWatches: 1}})
	w, cancel := e.watch(t, "team", "")
	e.next(t, w, "team", "", "opening")
	over, _ := e.watch(t, "acme", "")
	if msg := endsWithStatus(t, over, "over the limit", codes.ResourceExhausted, "LIMIT_EXCEEDED"); !strings.Contains(msg, "(limits.max_watches)") {
		t.Errorf("WatchSchemas over the limit = %q, want it to name limits.max_watches", msg)
	}
	<-e.ends
	ws, err := e.tools.WatchSession(t.Context(), &toolsdv1.WatchSessionRequest{SessionId: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ws.Recv(); status.Code(err) != codes.ResourceExhausted || reason(err) != "LIMIT_EXCEEDED" {
		t.Errorf("WatchSession while a schema watch holds the place = %v, want ResourceExhausted (LIMIT_EXCEEDED)", err)
	}
	<-e.ends
	cancel()
	<-e.ends
	w, _ = e.watch(t, "acme", "")
	e.next(t, w, "acme", "", "opening once the place came back")
	e.srv.StopWatches()
	endsWithStatus(t, w, "stopped by shutdown", codes.Unavailable, "SHUTTING_DOWN")
	<-e.ends
	w, _ = e.watch(t, "acme", "")
	endsWithStatus(t, w, "after shutdown", codes.Unavailable, "SHUTTING_DOWN")
	e.mu.Lock()
	defer e.mu.Unlock()
	if want := []string{server.LimitMaxWatches, server.LimitMaxWatches}; !slices.Equal(e.refused, want) {
		t.Errorf("watches refused = %q, want %q", e.refused, want)
	}
}

// TestWatchSchemasJoiningSendsTheCurrentFingerprint: a watch opened on a scope that is
// already watched sends first what Schemas answers now, even while the registry is
// still delivering a change that Schemas already shows (a change reaches subscribers
// after it is applied); the scope's earlier watch gets the change as it is delivered.
func TestWatchSchemasJoiningSendsTheCurrentFingerprint(t *testing.T) {
	e := newSchemaWatchEnv(t, server.Deps{})
	const scope = "team"
	e.register(t, scope, "a", "the a tool")
	// Subscribed before the watches, so it is called first: it holds the delivery of
	// b's registration, after it was applied, until released.
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	releaseOnce := func() { once.Do(func() { close(release) }) }
	defer releaseOnce()
	defer e.reg.Subscribe(func(c registry.Change) {
		if c.Name == "b" {
			close(held)
			<-release
		}
	})()
	first, _ := e.watch(t, scope, "")
	e.next(t, first, scope, "", "opening")
	registered := make(chan error, 1)
	go func() {
		d := tool.Definition{Name: "b", Description: "the b tool", Parameters: []byte(`{"type":"object"}`)}
		_, err := e.reg.Register(scope, d, "p1")
		registered <- err
	}()
	<-held
	second, _ := e.watch(t, scope, "")
	e.next(t, second, scope, "", "opening while b's registration is delivered")
	releaseOnce()
	if err := <-registered; err != nil {
		t.Fatalf("Register(%q, b) = %v", scope, err)
	}
	e.next(t, first, scope, "", "b's registration")
}

// TestWatchesAtShutdownWithTheLimitFull: once StopWatches has run, a new WatchSchemas or
// WatchSession is refused Unavailable (SHUTTING_DOWN), as a health Watch is, even while
// a watch that is ending still holds the last place among limits.max_watches; it was
// refused ResourceExhausted (LIMIT_EXCEEDED), telling the client to back off rather than
// to go to another instance, and counted as a refusal at the limit.
func TestWatchesAtShutdownWithTheLimitFull(t *testing.T) {
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	releaseOnce := func() { once.Do(func() { close(release) }) }
	defer releaseOnce()
	var sent atomic.Int32
	e := newSchemaWatchEnv(t, server.Deps{Limits: server.Limits{MaxWatches: 1}, SchemasSent: func() {
		if sent.Add(1) == 1 {
			close(held)
			<-release
		}
	}})
	w, _ := e.watch(t, "team", "")
	e.next(t, w, "team", "", "opening")
	<-held // the watch holds the one place, its handler after its first send
	e.srv.StopWatches()
	over, _ := e.watch(t, "acme", "")
	endsWithStatus(t, over, "after shutdown, the limit full", codes.Unavailable, "SHUTTING_DOWN")
	<-e.ends
	ws, err := e.tools.WatchSession(t.Context(), &toolsdv1.WatchSessionRequest{SessionId: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ws.Recv(); status.Code(err) != codes.Unavailable || reason(err) != "SHUTTING_DOWN" {
		t.Errorf("WatchSession after shutdown, the limit full = %v, want Unavailable (SHUTTING_DOWN)", err)
	}
	<-e.ends
	releaseOnce()
	endsWithStatus(t, w, "stopped by shutdown", codes.Unavailable, "SHUTTING_DOWN")
	<-e.ends
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.refused) != 0 {
		t.Errorf("watches refused at a limit = %q, want none", e.refused)
	}
}
