package hook_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/hook"
	"github.com/toolsd/toolsd/internal/logtest"
	"github.com/toolsd/toolsd/internal/pipeline"
	"github.com/toolsd/toolsd/internal/tool"
)

// openRaw opens a hook stream and sends msgs, without waiting for anything.
func (e *env) openRaw(t *testing.T, msgs ...*toolsdv1.HookServiceConnectRequest) toolsdv1.HookService_ConnectClient {
	t.Helper()
	stream, err := toolsdv1.NewHookServiceClient(e.dial(t)).Connect(t.Context())
	if err != nil {
		t.Fatalf("Connect() = %v", err)
	}
	for _, m := range msgs {
		if err := stream.Send(m); errors.Is(err, io.EOF) {
			break // the server ended the stream; Recv tells why
		} else if err != nil {
			t.Fatalf("Send() = %v", err)
		}
	}
	return stream
}

// recvUntilError reads until the stream fails and returns the failure.
func recvUntilError(stream toolsdv1.HookService_ConnectClient) error {
	for {
		if _, err := stream.Recv(); err != nil {
			return err
		}
	}
}

func helloMsg(h *toolsdv1.HookHello) *toolsdv1.HookServiceConnectRequest {
	return &toolsdv1.HookServiceConnectRequest{Msg: &toolsdv1.HookServiceConnectRequest_Hello{Hello: h}}
}

func decisionMsg(d *toolsdv1.HookDecision) *toolsdv1.HookServiceConnectRequest {
	return &toolsdv1.HookServiceConnectRequest{Msg: &toolsdv1.HookServiceConnectRequest_Decision{Decision: d}}
}

func TestConnectRejects(t *testing.T) {
	ok := sub(pre, "", "", 0)
	tests := map[string]struct {
		msgs    []*toolsdv1.HookServiceConnectRequest
		code    codes.Code
		message string
	}{
		"decision before hello": {
			msgs:    []*toolsdv1.HookServiceConnectRequest{decisionMsg(&toolsdv1.HookDecision{RequestId: 1})},
			code:    codes.InvalidArgument,
			message: "first message must be hello",
		},
		"empty message before hello": {
			msgs:    []*toolsdv1.HookServiceConnectRequest{{}},
			code:    codes.InvalidArgument,
			message: "first message must be hello",
		},
		"hello twice": {
			msgs:    []*toolsdv1.HookServiceConnectRequest{helloMsg(helloFor("a", ok)), helloMsg(helloFor("a", ok))},
			code:    codes.InvalidArgument,
			message: "hello sent twice",
		},
		"no name":          {msgs: []*toolsdv1.HookServiceConnectRequest{helloMsg(helloFor("", ok))}, code: codes.InvalidArgument, message: "name is empty"},
		"long name":        {msgs: []*toolsdv1.HookServiceConnectRequest{helloMsg(helloFor(strings.Repeat("n", 129), ok))}, code: codes.InvalidArgument, message: "at most 128 bytes"},
		"no subscriptions": {msgs: []*toolsdv1.HookServiceConnectRequest{helloMsg(helloFor("a"))}, code: codes.InvalidArgument, message: "subscriptions is empty"},
		"unspecified stage": {
			msgs: []*toolsdv1.HookServiceConnectRequest{helloMsg(helloFor("a", sub(toolsdv1.HookStage_HOOK_STAGE_UNSPECIFIED, "", "", 0)))},
			code: codes.InvalidArgument, message: "invalid stage",
		},
		"bad tool glob": {
			msgs: []*toolsdv1.HookServiceConnectRequest{helloMsg(helloFor("a", sub(pre, "[", "", 0)))},
			code: codes.InvalidArgument, message: `tool glob "["`,
		},
		"bad scope glob": {
			msgs: []*toolsdv1.HookServiceConnectRequest{helloMsg(helloFor("a", sub(pre, "", "a/[", 0)))},
			code: codes.InvalidArgument, message: `scope glob "a/["`,
		},
		"unknown stage": {
			msgs: []*toolsdv1.HookServiceConnectRequest{helloMsg(helloFor("a", ok, sub(toolsdv1.HookStage(99), "", "", 0)))},
			code: codes.InvalidArgument, message: "hello.subscriptions[1]: invalid stage 99",
		},
		"too many subscriptions": {
			msgs: []*toolsdv1.HookServiceConnectRequest{helloMsg(helloFor("a", slices.Repeat([]*toolsdv1.HookSubscription{ok}, 65)...))},
			code: codes.InvalidArgument, message: "65 subscriptions, at most 64",
		},
		"long tool glob": {
			msgs: []*toolsdv1.HookServiceConnectRequest{helloMsg(helloFor("a", sub(pre, strings.Repeat("t", 257), "", 0)))},
			code: codes.InvalidArgument, message: "globs are limited to 256 bytes",
		},
		"long scope glob": {
			msgs: []*toolsdv1.HookServiceConnectRequest{helloMsg(helloFor("a", sub(pre, "", strings.Repeat("s", 1<<20), 0)))},
			code: codes.InvalidArgument, message: "globs are limited to 256 bytes",
		},
		"too many double stars": {
			msgs: []*toolsdv1.HookServiceConnectRequest{helloMsg(helloFor("a", sub(pre, "", "**/a/**/b/**/c/**", 0)))},
			code: codes.InvalidArgument, message: `at most 3 "**" segments`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			err := recvUntilError(e.openRaw(t, tc.msgs...))
			st, _ := status.FromError(err)
			if st.Code() != tc.code || !strings.Contains(st.Message(), tc.message) {
				t.Errorf("stream error = %v, want %v containing %q", err, tc.code, tc.message)
			}
			if n := proto.Size(st.Proto()); n > 4<<10 {
				t.Errorf("stream error is %d bytes, want what it echoes of the hello cut short", n)
			}
			if n := len(e.hub.Hooks()); n != 0 {
				t.Errorf("Hooks() = %d, want 0", n)
			}
		})
	}
}

func TestHelloTimeout(t *testing.T) {
	e := newEnv(t, hook.WithHelloTimeout(20*time.Millisecond))
	err := recvUntilError(e.openRaw(t))
	if status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("stream error = %v, want DeadlineExceeded", err)
	}
}

// TestUnknownDecisionIgnored checks that decisions for no pending request, and empty
// messages, leave the stream working.
func TestUnknownDecisionIgnored(t *testing.T) {
	e := newEnv(t)
	h := e.connect(t, helloFor("a", sub(pre, "", "", 0)), always(verdict(toolsdv1.HookVerdict_HOOK_VERDICT_DENY, "still here")))
	h.decide(&toolsdv1.HookDecision{RequestId: 987654, Verdict: toolsdv1.HookVerdict_HOOK_VERDICT_ALLOW})
	h.send(&toolsdv1.HookServiceConnectRequest{})
	got := e.hub.PreExecute().PreExecute(t.Context(), newExec("echo", `{}`), newTool("echo"))
	if got.Decision != pipeline.Deny || got.Reason != "still here" {
		t.Errorf("PreExecute() = %+v, want the hook's deny", got)
	}
}

// TestDecisionForAnotherHook checks that a hook cannot answer another hook's request.
func TestDecisionForAnotherHook(t *testing.T) {
	e := newEnv(t, hook.WithTimeout(time.Minute))
	victim := e.connect(t, helloFor("victim", sub(pre, "echo", "", 0)), nil)
	intruder := e.connect(t, helloFor("intruder", sub(pre, "other", "", 0)), nil)
	done := make(chan pipeline.Verdict, 1)
	go func() {
		done <- e.hub.PreExecute().PreExecute(context.Background(), newExec("echo", `{}`), newTool("echo"))
	}()
	id := victim.next().GetRequestId()
	intruder.decide(&toolsdv1.HookDecision{RequestId: id, Verdict: toolsdv1.HookVerdict_HOOK_VERDICT_ALLOW})
	// Decisions on one stream are handled in order: once the intruder's answer to a
	// later request of its own is in, its forged decision has been handled too.
	own := make(chan pipeline.Verdict, 1)
	go func() {
		own <- e.hub.PreExecute().PreExecute(context.Background(), newExec("other", `{}`), newTool("other"))
	}()
	intruder.decide(&toolsdv1.HookDecision{RequestId: intruder.next().GetRequestId(), Verdict: toolsdv1.HookVerdict_HOOK_VERDICT_ALLOW})
	if got := <-own; got.Decision != pipeline.Allow {
		t.Fatalf("PreExecute(other) = %+v, want allow", got)
	}
	victim.decide(&toolsdv1.HookDecision{RequestId: id, Verdict: toolsdv1.HookVerdict_HOOK_VERDICT_DENY, Reason: "victim says no"})
	if got := <-done; got.Decision != pipeline.Deny || got.Reason != "victim says no" {
		t.Errorf("PreExecute() = %+v, want the victim's deny", got)
	}
}

// TestRequestIDsArePerStream checks that each hook stream numbers the requests and
// result notifications it sends 1, 2, 3, … in the order they go out, however the calls
// the hooks see interleave: ids counted across streams would show each hook how many
// calls the other hooks (other tenants) see.
func TestRequestIDsArePerStream(t *testing.T) {
	e := newEnv(t)
	allow := always(verdict(toolsdv1.HookVerdict_HOOK_VERDICT_ALLOW, ""))
	a := e.connect(t, helloFor("a", sub(pre, "", "", 0), sub(result, "", "", 0)), allow)
	b := e.connect(t, helloFor("b", sub(pre, "", "", 0), sub(result, "", "", 0)), allow)
	p := e.newPipeline(&dispatcher{})
	const calls = 3
	for range calls {
		if got := p.Run(t.Context(), newExec("echo", `{}`)); got.IsError {
			t.Fatalf("Run() = %+v, want success", got)
		}
	}
	for _, h := range []*testHook{a, b} {
		for want := uint64(1); want <= 2*calls; want++ {
			if got := h.next(); got.GetRequestId() != want {
				t.Errorf("hook %s: message %d has request id %d (stage %s), want %d", h.id, want, got.GetRequestId(), got.GetStage(), want)
			}
		}
	}
}

func TestMaxHooks(t *testing.T) {
	e := newEnv(t, hook.WithMaxHooks(1))
	e.connect(t, helloFor("first", sub(pre, "", "", 0)), nil)
	err := recvUntilError(e.openRaw(t, helloMsg(helloFor("second", sub(pre, "", "", 0)))))
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("second hook's stream error = %v, want ResourceExhausted", err)
	}
}

// tenantFilter confines a hook whose stream carries the metadata tenant=b to the scopes
// of tenant-b; every other hook sees every scope, as the operator's does.
func tenantFilter(ctx context.Context) (hook.Scopes, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	if slices.Contains(md.Get("tenant"), "b") {
		return hook.Scopes{Allow: func(scope string) bool { return scope == "tenant-b" || strings.HasPrefix(scope, "tenant-b/") }, Confined: true}, nil
	}
	return hook.Scopes{}, nil
}

// TestScopedHooksCannotLockOutOperators fills every place with a tenant's hooks while
// the operator's fail-closed policy hook is away: it must still get back in, and the
// calls of other tenants must meet its policy again.
func TestScopedHooksCannotLockOutOperators(t *testing.T) {
	e := newEnv(t, hook.WithMaxHooks(2), hook.WithScopeFilter(tenantFilter))
	policy := helloFor("operator-policy", sub(pre, "", "", 0))
	deny := always(verdict(toolsdv1.HookVerdict_HOOK_VERDICT_DENY, "operator policy"))
	op := e.connect(t, policy, deny)
	_ = op.cc.Close()
	<-op.done
	waitUntil(t, "the operator's hook to leave", func() bool { return len(e.hub.Hooks()) == 0 })
	for i := range 2 {
		e.connect(t, helloFor(fmt.Sprintf("tenant-b-%d", i), sub(pre, "", "", 0)), nil, withMetadata("tenant", "b"))
	}
	e.connect(t, policy, deny)
	got := e.hub.PreExecute().PreExecute(t.Context(), withScope(newExec("echo", `{}`), ""), newTool("echo"))
	if got.Decision != pipeline.Deny {
		t.Errorf("PreExecute(global scope) = %+v, want the operator's deny", got)
	}
}

// tenantHookEnd connects a hook named name with metadata tenant=tenant and returns the
// error that ends its stream (a welcomed stream ends at waitTimeout).
func tenantHookEnd(t *testing.T, e *env, tenant, name string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	stream, err := toolsdv1.NewHookServiceClient(e.dial(t)).Connect(metadata.AppendToOutgoingContext(ctx, "tenant", tenant))
	if err != nil {
		t.Fatalf("Connect() = %v", err)
	}
	if err := stream.Send(helloMsg(helloFor(name, sub(pre, "", "", 0)))); err != nil && !errors.Is(err, io.EOF) {
		t.Fatalf("Send() = %v", err)
	}
	return recvUntilError(stream)
}

// TestMaxScopedHooks checks that confined hooks have a limit of their own, which does
// not hold back the other hooks.
func TestMaxScopedHooks(t *testing.T) {
	e := newEnv(t, hook.WithMaxHooks(1), hook.WithMaxScopedHooks(1), hook.WithScopeFilter(tenantFilter))
	e.connect(t, helloFor("tenant-b-0", sub(pre, "", "", 0)), nil, withMetadata("tenant", "b"))
	if err := tenantHookEnd(t, e, "b", "tenant-b-1"); status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "confined to some scopes") {
		t.Errorf("second tenant hook's stream error = %v, want ResourceExhausted naming the scoped limit", err)
	}
	e.connect(t, helloFor("operator-policy", sub(pre, "", "", 0)), nil)
	if n := len(e.hub.Hooks()); n != 2 {
		t.Errorf("Hooks() = %d, want the tenant's and the operator's", n)
	}
}

// tenantsFilter confines a caller with metadata tenant=X to tenant-X/** as identity
// "tenant-X"; others see everything.
func tenantsFilter(ctx context.Context) (hook.Scopes, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	if t := md.Get("tenant"); len(t) == 1 {
		prefix := "tenant-" + t[0]
		return hook.Scopes{Allow: func(scope string) bool { return scope == prefix || strings.HasPrefix(scope, prefix+"/") }, Confined: true, Identity: prefix}, nil
	}
	return hook.Scopes{}, nil
}

// One tenant cannot take every confined place: its identity's hooks are capped on their
// own, and another tenant's hook still gets in.
func TestMaxHooksPerIdentity(t *testing.T) {
	e := newEnv(t, hook.WithMaxScopedHooks(10), hook.WithMaxHooksPerIdentity(1), hook.WithScopeFilter(tenantsFilter))
	e.connect(t, helloFor("b-0", sub(pre, "", "", 0)), nil, withMetadata("tenant", "b"))
	if err := tenantHookEnd(t, e, "b", "b-1"); status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "this identity has 1 hooks") {
		t.Errorf("tenant b's second hook's stream error = %v, want ResourceExhausted naming the identity's limit", err)
	}
	e.connect(t, helloFor("c-0", sub(pre, "", "", 0)), nil, withMetadata("tenant", "c"))
	if n := len(e.hub.Hooks()); n != 2 {
		t.Errorf("Hooks() = %d, want tenant b's and tenant c's", n)
	}
}

func TestHooks(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	e := newEnv(t, hook.WithClock(func() time.Time { return now }))
	a := e.connect(t, &toolsdv1.HookHello{Name: "a", FailOpen: true, Subscriptions: []*toolsdv1.HookSubscription{
		sub(pre, "echo", "tenant-a/**", 3), sub(result, "", "", -1)}}, nil)
	b := e.connect(t, helloFor("b", sub(post, "*", "", 0)), nil)
	want := []hook.Info{
		{ID: a.id, Name: "a", FailOpen: true, ConnectedAt: now, Subscriptions: []hook.Subscription{
			{Stage: hook.StagePreExecute, Tool: "echo", Scope: "tenant-a/**", Priority: 3},
			{Stage: hook.StageResult, Priority: -1},
		}},
		{ID: b.id, Name: "b", ConnectedAt: now, Subscriptions: []hook.Subscription{{Stage: hook.StagePostExecute, Tool: "*"}}},
	}
	if diff := cmp.Diff(want, e.hub.Hooks()); diff != "" {
		t.Errorf("Hooks() (-want +got):\n%s", diff)
	}
	if a.id == b.id {
		t.Errorf("hook ids are equal: %q", a.id)
	}
	e.obs.waitFor(t, "connected", func(n int) bool { return n == 2 })
}

func TestShutdown(t *testing.T) {
	e := newEnv(t, hook.WithTimeout(time.Minute))
	h := e.connect(t, helloFor("a", sub(pre, "", "", 0)), nil)
	done := make(chan pipeline.Verdict, 1)
	go func() {
		done <- e.hub.PreExecute().PreExecute(context.Background(), newExec("echo", `{}`), newTool("echo"))
	}()
	h.next()
	e.hub.Shutdown("maintenance")
	select {
	case reason := <-h.goodbye:
		if reason != "maintenance" {
			t.Errorf("goodbye reason = %q, want %q", reason, "maintenance")
		}
	case <-time.After(waitTimeout):
		t.Fatal("no goodbye")
	}
	<-h.done
	if err := h.endErr; !errors.Is(err, io.EOF) {
		t.Errorf("stream end = %v, want EOF", err)
	}
	if got := <-done; got.Code != "POLICY_UNAVAILABLE" {
		t.Errorf("pending call = %+v, want POLICY_UNAVAILABLE", got)
	}
	err := recvUntilError(e.openRaw(t, helloMsg(helloFor("late", sub(pre, "", "", 0)))))
	if status.Code(err) != codes.Unavailable {
		t.Errorf("Connect() after Shutdown = %v, want Unavailable", err)
	}
	if n := len(e.hub.Hooks()); n != 0 {
		t.Errorf("Hooks() = %d after Shutdown, want 0", n)
	}
}

// TestShutdownFailsPendingAtOnce checks that Shutdown fails the requests pending on a
// hook that stopped reading before it waits to say goodbye: with the hub's writer stuck
// in Send, the goodbye can only time out, and the calls must not wait for that. The
// line that says the goodbye timed out is held here until every call has its answer: a
// hub that failed the calls only after that wait would never answer them.
func TestShutdownFailsPendingAtOnce(t *testing.T) {
	const (
		calls   = 8
		blocked = "hook stream send blocked; closing without goodbye"
	)
	observed, logs := observer.New(zap.InfoLevel)
	answered := make(chan struct{})
	core := logtest.SlowLineCore{Core: observed, Msg: blocked, Until: answered}
	e := newEnv(t, hook.WithTimeout(time.Minute), hook.WithLogger(zap.New(core)))
	results := callStuckHook(t, e, calls)
	waitUntil(t, "every request pending", func() bool {
		hs := e.hub.Hooks()
		return len(hs) == 1 && hs[0].Pending == calls
	})
	shutdownDone := make(chan struct{})
	go func() {
		defer close(shutdownDone)
		e.hub.Shutdown("maintenance")
	}()
	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	for range calls {
		select {
		case got := <-results:
			if got.Code != tool.CodePolicyUnavailable {
				t.Errorf("pending call = %+v, want POLICY_UNAVAILABLE", got)
			}
		case <-timer.C:
			close(answered)
			t.Fatal("the pending calls were not answered before the goodbye's wait ended")
		}
	}
	close(answered)
	<-shutdownDone
	if n := logs.FilterMessage(blocked).Len(); n != 1 {
		t.Fatalf("%d lines saying the goodbye timed out, want 1: the hook's writer was not stuck, so the test proves nothing", n)
	}
}

// callStuckHook connects a pre-execute hook that never reads its stream and starts
// calls that consult it, each request larger than the hook's flow-control window so that
// the hub's writer blocks; their verdicts arrive on the channel. It returns once the
// hook's connection has received part of a request: the writer has then handed one to
// Send, which used up the stream's send quota, so every Send after it waits for the
// hook to read. (That every request is pending says nothing of the writer, which may
// not have taken one yet: a shutdown then has its goodbye sent at once.)
func callStuckHook(t *testing.T, e *env, calls int) <-chan pipeline.Verdict {
	t.Helper()
	var received atomic.Int64
	reached := make(chan struct{})
	var once sync.Once
	counting := grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
		c, err := e.lis.DialContext(ctx)
		if err != nil {
			return nil, err
		}
		return readCounter{Conn: c, read: func(n int) {
			if received.Add(int64(n)) >= requestBytesSeen {
				once.Do(func() { close(reached) })
			}
		}}, nil
	})
	e.connect(t, helloFor("stuck", sub(pre, "", "", 0)), nil, noRead, func(o *hookOpts) { o.dial = append(o.dial, counting) })
	args := `{"blob":"` + strings.Repeat("x", 200<<10) + `"}`
	results := make(chan pipeline.Verdict, calls)
	for range calls {
		go func() {
			results <- e.hub.PreExecute().PreExecute(context.Background(), newExec("echo", args), newTool("echo"))
		}()
	}
	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	select {
	case <-reached:
	case <-timer.C:
		t.Fatal("no request reached the stuck hook")
	}
	return results
}

// requestBytesSeen is what a hook's connection has received once part of a large
// request has come: more than its handshake and welcome, less than its 64 KiB window.
const requestBytesSeen = 32 << 10

// readCounter is a connection that reports the bytes each Read returns.
type readCounter struct {
	net.Conn
	read func(n int)
}

func (c readCounter) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.read(n)
	return n, err
}

// TestStuckHookIsCutOff checks that a hook that stops reading its stream is
// disconnected once a message has waited for it longer than the send timeout: its
// pending requests fail (closed) and nothing stays queued for it.
func TestStuckHookIsCutOff(t *testing.T) {
	const calls = 4
	e := newEnv(t, hook.WithTimeout(time.Minute), hook.WithSendTimeout(100*time.Millisecond))
	results := callStuckHook(t, e, calls)
	for range calls {
		if got := <-results; got.Code != tool.CodePolicyUnavailable {
			t.Errorf("call on a stuck hook = %+v, want POLICY_UNAVAILABLE", got)
		}
	}
	waitUntil(t, "the stuck hook to leave", func() bool { return len(e.hub.Hooks()) == 0 })
}

func TestScopeFilter(t *testing.T) {
	e := newEnv(t, hook.WithScopeFilter(func(context.Context) (hook.Scopes, error) {
		return hook.Scopes{Allow: func(scope string) bool { return strings.HasPrefix(scope, "tenant-a") }, Confined: true}, nil
	}))
	e.connect(t, helloFor("tenant-a-hook", sub(pre, "", "", 0)), always(verdict(toolsdv1.HookVerdict_HOOK_VERDICT_DENY, "seen")))
	tests := map[string]struct {
		scope string
		want  pipeline.Decision
	}{
		"inside":  {scope: "tenant-a/agent", want: pipeline.Deny},
		"outside": {scope: "tenant-b/agent", want: pipeline.Abstain},
		"global":  {scope: "", want: pipeline.Abstain},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := e.hub.PreExecute().PreExecute(t.Context(), withScope(newExec("echo", `{}`), tc.scope), newTool("echo"))
			if got.Decision != tc.want {
				t.Errorf("PreExecute(scope %q) = %v, want %v", tc.scope, got.Decision, tc.want)
			}
		})
	}
}

func TestScopeFilterRefuses(t *testing.T) {
	e := newEnv(t, hook.WithScopeFilter(func(context.Context) (hook.Scopes, error) {
		return hook.Scopes{}, errors.New("auth: no grant allows it in any scope")
	}))
	err := recvUntilError(e.openRaw(t, helloMsg(helloFor("a", sub(pre, "", "", 0)))))
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("stream error = %v, want PermissionDenied", err)
	}
}

// A hook sees its own id: the ids must not tell it how many hooks (other tenants')
// connected before or since.
func TestHookIDsUnrelated(t *testing.T) {
	e := newEnv(t)
	ids := make([]string, 8)
	for i := range ids {
		ids[i] = e.connect(t, helloFor(fmt.Sprintf("h%d", i), sub(pre, "", "", 0)), nil).id
	}
	shape := regexp.MustCompile(`^h-[0-9a-f]{8}-([0-9a-f]{16})$`)
	seen := map[string]bool{}
	var prev uint64
	for i, id := range ids {
		m := shape.FindStringSubmatch(id)
		if m == nil {
			t.Fatalf("hook id %q, want h-<8 hex>-<16 hex>", id)
		}
		if seen[id] {
			t.Fatalf("hook id %q issued twice", id)
		}
		seen[id] = true
		cur, err := strconv.ParseUint(m[1], 16, 64)
		if err != nil {
			t.Fatalf("hook id %q: %v", id, err)
		}
		// Counted ids differ by one; unrelated ones by less than 2^32 with
		// probability 2^-31 for a pair.
		if d := max(cur, prev) - min(cur, prev); i > 0 && d < 1<<32 {
			t.Errorf("hook ids %q and %q of consecutive connections are %d apart, want them unrelated", ids[i-1], id, d)
		}
		prev = cur
	}
}

// TestHelloGlobsThatMatchNothing: a subscription whose tool or scope glob no tool name
// or scope can match would have its hook welcomed and never asked, so the calls it was
// written to guard would run without it, fail-closed or not. The hello is refused
// (INVALID_ARGUMENT) naming the glob, as a policy rule or a hooks.required entry with
// such a pattern is; it was welcomed.
func TestHelloGlobsThatMatchNothing(t *testing.T) {
	tests := map[string]struct {
		sub     *toolsdv1.HookSubscription
		message string
	}{
		"tool name no tool can have":           {sub(pre, "fs read", "", 0), `hello.subscriptions[0]: tool glob "fs read": no tool can have this name`},
		"tool glob of a character no name has": {sub(pre, "fs:*", "", 0), `hello.subscriptions[0]: tool glob "fs:*": can never match`},
		"scope glob with a leading slash":      {sub(pre, "", "/tenant-a/**", 0), `hello.subscriptions[0]: scope glob "/tenant-a/**": can never match`},
		"scope glob with a space":              {sub(post, "", "tenant a/**", 0), `hello.subscriptions[0]: scope glob "tenant a/**": can never match`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			m, err := e.openRaw(t, helloMsg(helloFor("policy", tc.sub))).Recv()
			if err == nil {
				t.Fatalf("Recv() = %v, want the hello refused", m)
			}
			st, _ := status.FromError(err)
			if st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), tc.message) {
				t.Errorf("stream error = %v, want InvalidArgument containing %q", err, tc.message)
			}
			if n := len(e.hub.Hooks()); n != 0 {
				t.Errorf("Hooks() = %d, want 0", n)
			}
		})
	}
	for _, ok := range []*toolsdv1.HookSubscription{sub(pre, "", "", 0), sub(pre, "*", "*", 0), sub(pre, "", "**", 0), sub(pre, "fs_*", "tenant-a/**", 0)} {
		e := newEnv(t)
		h := e.connect(t, helloFor("policy", ok), silent)
		if h.id == "" {
			t.Errorf("hello with %v not welcomed", ok)
		}
	}
}
