package app_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/app"
	"github.com/toolsd/toolsd/internal/config"
	"github.com/toolsd/toolsd/internal/session"
	"github.com/toolsd/toolsd/pkg/provider"
)

// storeConfig is a loopback toolsd on the session store named store in dataDir.
func storeConfig(t *testing.T, store, dataDir, extra string) *config.Config {
	t.Helper()
	text := fmt.Sprintf("listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\ndata_dir: %s\nsession: {store: %s, durability: nosync}\n%s", dataDir, store, extra)
	cfg, err := config.Parse([]byte(text), "test.yaml")
	if err != nil {
		t.Fatalf("config.Parse() = %v", err)
	}
	return cfg
}

// deleteSession calls DeleteSession and returns the events it removed.
func (e *env) deleteSession(id string) (uint64, error) {
	resp, err := e.tools.DeleteSession(context.Background(), &toolsdv1.DeleteSessionRequest{SessionId: id})
	return resp.GetEventsRemoved(), err
}

// wantStatus fails unless err is a status of code with reason.
func wantStatus(t *testing.T, what string, err error, code codes.Code, want string) {
	t.Helper()
	if status.Code(err) != code || reason(err) != want {
		t.Errorf("%s = %v (reason %q), want %v, reason %s", what, err, reason(err), code, want)
	}
}

// TestDeleteSession, on each store over gRPC: DeleteSession removes a session's events
// and says how many; its watch ends with NOT_FOUND (SESSION_DELETED); it then reads as
// empty, deleting it again is NOT_FOUND (SESSION_NOT_FOUND), and the id's next batch
// starts at seq 1. One info line says who deleted what. With bbolt and the journal it
// stays deleted after a restart, and the other sessions are all there.
func TestDeleteSession(t *testing.T) {
	for _, store := range []string{"memory", "bolt", "journal"} {
		t.Run(store, func(t *testing.T) {
			dir := t.TempDir()
			core, logs := observer.New(zap.InfoLevel)
			a, stop, runErr := runApp(t, storeConfig(t, store, dir, ""), app.WithLogger(zap.New(core)))
			e := &env{app: a, conn: dial(t, a.Addr())}
			e.tools = toolsdv1.NewToolServiceClient(e.conn)
			batch := func(id string) *toolsdv1.Batch {
				return &toolsdv1.Batch{SessionId: id, Calls: []*toolsdv1.ToolCall{call("c1", "nope", `{}`), call("c2", "nope", `{}`)}}
			}
			e.mustExecute(t, batch("gone"), batchOptions{})
			e.mustExecute(t, batch("kept"), batchOptions{})

			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second) // a bound on a hang
			defer cancel()
			w, err := e.tools.WatchSession(ctx, &toolsdv1.WatchSessionRequest{SessionId: "gone"})
			if err != nil {
				t.Fatal(err)
			}
			for range 4 {
				if _, err := w.Recv(); err != nil {
					t.Fatalf("WatchSession(gone).Recv() = %v", err)
				}
			}
			if n, err := e.deleteSession("gone"); err != nil || n != 4 {
				t.Fatalf("DeleteSession(gone) = %d, %v, want 4 events", n, err)
			}
			_, err = w.Recv()
			wantStatus(t, "WatchSession(gone) deleted", err, codes.NotFound, "SESSION_DELETED")
			if evs := e.readSession(t, "gone"); len(evs) != 0 {
				t.Errorf("ReadSession(gone) after DeleteSession = %d events, want none", len(evs))
			}
			_, err = e.deleteSession("gone")
			wantStatus(t, "DeleteSession(gone) again", err, codes.NotFound, "SESSION_NOT_FOUND")
			_, err = e.deleteSession("")
			wantStatus(t, `DeleteSession("")`, err, codes.InvalidArgument, "BAD_REQUEST")
			if got := loggedField(t, logs, "session deleted", "session_id", "gone", "events"); got != int64(4) {
				t.Errorf("session deleted line: events = %v, want 4", got)
			}

			stop()
			awaitRun(t, runErr)
			if store == "memory" {
				return
			}
			e = startConfig(t, storeConfig(t, store, dir, ""))
			if evs := e.readSession(t, "gone"); len(evs) != 0 {
				t.Errorf("ReadSession(gone) after a restart = %d events, want none", len(evs))
			}
			if evs := e.readSession(t, "kept"); len(evs) != 4 {
				t.Errorf("ReadSession(kept) after a restart = %d events, want 4", len(evs))
			}
			out := e.mustExecute(t, batch("gone"), batchOptions{})
			if seqs := out.accepted.GetCallSeqs(); len(seqs) == 0 || seqs[0] != 1 {
				t.Errorf("ExecuteBatch(gone) after deletion and restart: call seqs %v, want from 1", seqs)
			}
		})
	}
}

// TestDeleteSessionInUse: a session with a batch running in it is not deleted under
// the batch (FAILED_PRECONDITION, SESSION_IN_USE), which settles with every result
// logged; once it has settled, DeleteSession removes it.
func TestDeleteSessionInUse(t *testing.T) {
	for _, store := range []string{"memory", "bolt", "journal"} {
		t.Run(store, func(t *testing.T) {
			e := startConfig(t, storeConfig(t, store, t.TempDir(), ""))
			started, release := make(chan string, 1), make(chan struct{})
			wait := provider.NewTool("wait", "Answers once released.", func(ctx context.Context, _ provider.Call, a blockArgs) (string, error) {
				started <- a.Label
				select {
				case <-release:
					return "done", nil
				case <-ctx.Done():
					return "", ctx.Err()
				}
			})
			runProvider(t, e.app.Addr(), wait)
			done := make(chan *outcome, 1)
			go func() {
				out, err := e.execute(t, &toolsdv1.Batch{SessionId: "busy", Calls: []*toolsdv1.ToolCall{call("c1", "wait", `{"label":"w"}`)}}, batchOptions{})
				if err != nil {
					t.Errorf("ExecuteBatch(busy) = %v", err)
				}
				done <- out
			}()
			<-started
			_, err := e.deleteSession("busy")
			wantStatus(t, "DeleteSession(busy) with a call running", err, codes.FailedPrecondition, "SESSION_IN_USE")
			close(release)
			out := <-done
			if out == nil || out.settled == nil || len(out.results) != 1 || out.results[0].GetIsError() {
				t.Fatalf("ExecuteBatch(busy) = %+v, want one successful result and settled", out)
			}
			if evs := e.readSession(t, "busy"); len(evs) != 2 {
				t.Errorf("ReadSession(busy) = %d events, want the call and its result", len(evs))
			}
			if n, err := e.deleteSession("busy"); err != nil || n != 2 {
				t.Errorf("DeleteSession(busy) settled = %d, %v, want 2 events", n, err)
			}
		})
	}
}

// TestDeleteSessionAuthorization: whoever may read a session may delete it, nobody
// else: another tenant's agent gets PERMISSION_DENIED, whether the session exists or
// not, and it stays; its owner and the operator may.
func TestDeleteSessionAuthorization(t *testing.T) {
	e := start(t, tenantAuth(t))
	agentA, agentB, operator := e.as(t, tokenAgentA), e.as(t, tokenAgentB), e.as(t, tokenOperator)
	for _, id := range []string{"a-own", "a-other"} {
		agentA.mustExecute(t, &toolsdv1.Batch{SessionId: id, Scope: "tenant-a", Calls: []*toolsdv1.ToolCall{call("c1", "nope", `{}`)}}, batchOptions{})
	}
	_, err := agentB.deleteSession("a-own")
	wantStatus(t, "DeleteSession(agent-a's session) as agent-b", err, codes.PermissionDenied, "PERMISSION_DENIED")
	_, err = agentB.deleteSession("nobodys")
	wantStatus(t, "DeleteSession(a session that does not exist) as agent-b", err, codes.PermissionDenied, "PERMISSION_DENIED")
	if evs := agentA.readSession(t, "a-own"); len(evs) != 2 {
		t.Errorf("ReadSession(a-own) after agent-b's refused delete = %d events, want 2", len(evs))
	}
	if n, err := agentA.deleteSession("a-own"); err != nil || n != 2 {
		t.Errorf("DeleteSession(a-own) as its owner = %d, %v, want 2", n, err)
	}
	if n, err := operator.deleteSession("a-other"); err != nil || n != 2 {
		t.Errorf("DeleteSession(agent-a's session) as the operator = %d, %v, want 2", n, err)
	}
	_, err = operator.deleteSession("nobodys")
	wantStatus(t, "DeleteSession(a session that does not exist) as the operator", err, codes.NotFound, "SESSION_NOT_FOUND")
	// The id is free: another tenant may now claim it.
	agentB.mustExecute(t, &toolsdv1.Batch{SessionId: "a-own", Scope: "tenant-b", Calls: []*toolsdv1.ToolCall{call("c1", "nope", `{}`)}}, batchOptions{})
	if _, err := readAll(agentA, "a-own"); status.Code(err) != codes.PermissionDenied {
		t.Errorf("ReadSession(a-own) as agent-a once agent-b claimed it = %v, want PermissionDenied", err)
	}
}

// beforeDelete is a session store whose Delete runs before (once) and then deletes:
// what another RPC may do between DeleteSession's authorization and its deletion.
type beforeDelete struct {
	session.Store
	before func()
}

func (s *beforeDelete) Delete(ctx context.Context, id string, seen *session.Owner, then func()) (int, error) {
	if f := s.before; f != nil {
		s.before = nil
		f()
	}
	return s.Store.Delete(ctx, id, seen, then)
}

// TestDeleteSessionKeepsTheNextOwners: a session deleted (by retention, say) and
// claimed by another tenant's agent, whose batch completes, between DeleteSession's
// authorization of its former owner and the deletion, is not deleted: the caller may
// read the session it was authorized for, not the one the id names now. It is
// FAILED_PRECONDITION (SESSION_OWNER_CHANGED), and the new owner's session is whole.
func TestDeleteSessionKeepsTheNextOwners(t *testing.T) {
	for _, kind := range []string{"memory", "bolt", "journal"} {
		t.Run(kind, func(t *testing.T) {
			store := &beforeDelete{}
			e := startConfig(t, storeConfig(t, kind, t.TempDir(), tenantAuth(t)),
				app.WithSessionStoreWrapper(func(s session.Store) session.Store { store.Store = s; return store }))
			agentA, agentB := e.as(t, tokenAgentA), e.as(t, tokenAgentB)
			agentA.mustExecute(t, &toolsdv1.Batch{SessionId: "s", Scope: "tenant-a", Calls: []*toolsdv1.ToolCall{call("c1", "nope", `{}`)}}, batchOptions{})
			store.before = func() {
				if _, err := store.Store.Delete(context.Background(), "s", &session.Owner{Identity: "agent-a", Scope: "tenant-a", ScopeKnown: true}, nil); err != nil {
					t.Errorf("Delete(s) as retention would = %v", err)
				}
				agentB.mustExecute(t, &toolsdv1.Batch{SessionId: "s", Scope: "tenant-b", Calls: []*toolsdv1.ToolCall{call("c1", "nope", `{}`), call("c2", "nope", `{}`)}}, batchOptions{})
			}
			_, err := agentA.deleteSession("s")
			wantStatus(t, "DeleteSession(s) as agent-a once agent-b claimed it", err, codes.FailedPrecondition, "SESSION_OWNER_CHANGED")
			// agent-a may not read agent-b's session: it learns neither who owns it nor where.
			if msg := status.Convert(err).Message(); strings.Contains(msg, "agent-b") || strings.Contains(msg, "tenant-b") {
				t.Errorf("DeleteSession(s) as agent-a once agent-b claimed it says %q, want neither agent-b nor its scope named", msg)
			}
			if evs := agentB.readSession(t, "s"); len(evs) != 4 {
				t.Errorf("ReadSession(s) as agent-b after agent-a's delete = %d events, want 4", len(evs))
			}
		})
	}
}

// TestDeleteSessionEndsItsToolSets: a tool set resolved against a session's history
// ends when DeleteSession deletes the session (NOT_FOUND, TOOL_SET_GONE, saying so): a
// batch with it in the id's next session would run a tool admitted for what the deleted
// session did (query_db, offered once get_db_schema succeeded, in a session that never
// called get_db_schema). A set whose conditions do not read the history serves on.
func TestDeleteSessionEndsItsToolSets(t *testing.T) {
	e := start(t, "")
	set := e.schemaKnownSet(t, "s")
	if _, err := e.deleteSession("s"); err != nil {
		t.Fatalf("DeleteSession(s) = %v", err)
	}
	e.wantSetOfDeletedSession(t, set, "s was deleted")
}

// afterSummary is a session store whose Summary, once armed, runs after (once) between
// reading the summary and returning it: what another RPC may do while ResolveToolSet
// evaluates conditions against the history it read.
type afterSummary struct {
	session.Store
	after func()
}

func (s *afterSummary) Summary(ctx context.Context, id string) (session.Summary, error) {
	sum, err := s.Store.Summary(ctx, id)
	if f := s.after; f != nil {
		s.after = nil
		f()
	}
	return sum, err
}

// TestDeleteSessionDuringResolution: a DeleteSession that runs while a tool set is
// being resolved against the session's history either waits out the resolution or is
// refused (SESSION_IN_USE); it never leaves a set that judged the deleted history live,
// to run query_db in the id's next session, which never called get_db_schema.
func TestDeleteSessionDuringResolution(t *testing.T) {
	store := &afterSummary{}
	e := start(t, "", app.WithSessionStoreWrapper(func(s session.Store) session.Store { store.Store = s; return store }))
	e.schemaKnown(t, "s")
	var delErr error
	store.after = func() { _, delErr = e.deleteSession("s") }
	set := e.resolve(t, "s", 2, nil)
	out, err := e.execute(t, &toolsdv1.Batch{SessionId: "s", Turn: 1, Step: 2, ToolSetId: set.GetToolSetId(),
		Calls: []*toolsdv1.ToolCall{call("c2", "query_db", `{}`)}}, batchOptions{})
	if delErr == nil {
		wantStatus(t, "ExecuteBatch(s) with a set resolved as s was deleted", err, codes.NotFound, "TOOL_SET_GONE")
		if evs := e.readSession(t, "s"); len(evs) != 0 {
			t.Errorf("ReadSession(s) = %d events (%v), want none: query_db ran in a session that never called get_db_schema", len(evs), out)
		}
		return
	}
	wantStatus(t, "DeleteSession(s) during a resolution", delErr, codes.FailedPrecondition, "SESSION_IN_USE")
	if err != nil {
		t.Errorf("ExecuteBatch(s) with a set resolved against the kept session = %v", err)
	}
}

// afterDelete is a session store whose Delete, once armed, runs after (once) as soon as
// the session is deleted: what a batch may do before DeleteSession has returned.
type afterDelete struct {
	session.Store
	after func()
}

func (s *afterDelete) Delete(ctx context.Context, id string, seen *session.Owner, then func()) (int, error) {
	n, err := s.Store.Delete(ctx, id, seen, then)
	if f := s.after; f != nil && err == nil {
		s.after = nil
		f()
	}
	return n, err
}

// TestDeleteSessionEndsItsToolSetsBeforeTheNextBatch: a batch with a set resolved
// against the session's history that holds the id as soon as the session is deleted,
// before DeleteSession returns, finds the set ended (TOOL_SET_GONE): query_db does not
// run in the id's next session, which never called get_db_schema.
func TestDeleteSessionEndsItsToolSetsBeforeTheNextBatch(t *testing.T) {
	for _, kind := range []string{"memory", "bolt", "journal"} {
		t.Run(kind, func(t *testing.T) {
			store := &afterDelete{}
			e := startConfig(t, storeConfig(t, kind, t.TempDir(), ""),
				app.WithSessionStoreWrapper(func(s session.Store) session.Store { store.Store = s; return store }))
			set := e.schemaKnownSet(t, "s")
			var batchErr error
			store.after = func() {
				_, batchErr = e.execute(t, &toolsdv1.Batch{SessionId: "s", Turn: 1, Step: 2, ToolSetId: set.GetToolSetId(),
					Calls: []*toolsdv1.ToolCall{call("c2", "query_db", `{}`)}}, batchOptions{})
			}
			if _, err := e.deleteSession("s"); err != nil {
				t.Fatalf("DeleteSession(s) = %v", err)
			}
			wantStatus(t, "ExecuteBatch(s) with a set resolved before s was deleted", batchErr, codes.NotFound, "TOOL_SET_GONE")
			if evs := e.readSession(t, "s"); len(evs) != 0 {
				t.Errorf("ReadSession(s) = %d events, want none: query_db ran in a session that never called get_db_schema", len(evs))
			}
		})
	}
}

// TestRetentionEndsItsSessionsToolSets, on each store: a tool set resolved against a
// session's history ends when retention deletes the session, as when DeleteSession
// does (NOT_FOUND, TOOL_SET_GONE): a batch with it in the id's next session would run
// query_db, offered once get_db_schema succeeded, in a session that never called
// get_db_schema. The sweep is the test's own, as of far in the future.
func TestRetentionEndsItsSessionsToolSets(t *testing.T) {
	for _, kind := range []string{"memory", "bolt", "journal"} {
		t.Run(kind, func(t *testing.T) {
			var store session.Store
			e := startWrapped(t, kind, "", func(s session.Store) session.Store { store = s; return s })
			set := e.schemaKnownSet(t, "s")
			sw := store.(interface{ Sweep(time.Time) (int, error) })
			if n, err := sw.Sweep(time.Now().Add(10000 * time.Hour)); err != nil || n != 1 {
				t.Fatalf("Sweep() = %d, %v, want 1 session deleted", n, err)
			}
			e.wantSetOfDeletedSession(t, set, "retention deleted s")
		})
	}
}

// schemaKnown runs a provider of get_db_schema and query_db, which a session is offered
// only once get_db_schema succeeded in it (its condition reads the session's history),
// and runs get_db_schema in session (turn 1, step 1).
func (e *env) schemaKnown(t *testing.T, session string) {
	t.Helper()
	runProvider(t, e.app.Addr(),
		constTool("get_db_schema", "tables: users"),
		constTool("query_db", "1 row", provider.WithCondition(`session.succeeded("get_db_schema")`)),
	)
	e.mustExecute(t, &toolsdv1.Batch{SessionId: session, Turn: 1, Step: 1, Calls: []*toolsdv1.ToolCall{call("c1", "get_db_schema", `{}`)}}, batchOptions{})
}

// schemaKnownSet is [env.schemaKnown] and the tool set of session's next step, which
// offers query_db.
func (e *env) schemaKnownSet(t *testing.T, session string) *toolsdv1.ResolveToolSetResponse {
	t.Helper()
	e.schemaKnown(t, session)
	set := e.resolve(t, session, 2, nil)
	if got := names(set.GetTools()); !slices.Contains(got, "query_db") {
		t.Fatalf("tool set after get_db_schema succeeded = %v, want query_db in it", got)
	}
	return set
}

// wantSetOfDeletedSession checks that a batch of query_db in session "s", naming set
// (resolved before how says s was deleted), is refused NOT_FOUND (TOOL_SET_GONE) saying
// the session was deleted, and that nothing ran in the id's next session.
func (e *env) wantSetOfDeletedSession(t *testing.T, set *toolsdv1.ResolveToolSetResponse, how string) {
	t.Helper()
	what := "ExecuteBatch(s) with a set resolved before " + how
	_, err := e.execute(t, &toolsdv1.Batch{SessionId: "s", Turn: 1, Step: 2, ToolSetId: set.GetToolSetId(),
		Calls: []*toolsdv1.ToolCall{call("c2", "query_db", `{}`)}}, batchOptions{})
	wantStatus(t, what, err, codes.NotFound, "TOOL_SET_GONE")
	if err != nil && !strings.Contains(err.Error(), "session was deleted") {
		t.Errorf("%s = %v, want it to say the session was deleted", what, err)
	}
	if evs := e.readSession(t, "s"); len(evs) != 0 {
		t.Errorf("ReadSession(s) = %d events, want none: query_db ran in a session that never called get_db_schema", len(evs))
	}
}

// TestDeleteSessionForgetsItsOwner, on each store over gRPC: once a session is deleted,
// by its owner or by the operator, its former owner owns the id no more, as after a
// restart: reading, watching or deleting it again is PERMISSION_DENIED, as for any id
// nobody owns, until it claims the id again with a batch; another tenant's agent may
// claim the free id, and the former owner may not read what it runs there.
func TestDeleteSessionForgetsItsOwner(t *testing.T) {
	for _, kind := range []string{"memory", "bolt", "journal"} {
		t.Run(kind, func(t *testing.T) {
			e := startConfig(t, storeConfig(t, kind, t.TempDir(), tenantAuth(t)))
			agentA, agentB, operator := e.as(t, tokenAgentA), e.as(t, tokenAgentB), e.as(t, tokenOperator)
			batch := func(scope string) *toolsdv1.Batch {
				return &toolsdv1.Batch{SessionId: "s", Scope: scope, Calls: []*toolsdv1.ToolCall{call("c1", "nope", `{}`)}}
			}
			for _, deleter := range []struct {
				name string
				env  *env
			}{{"agent-a", agentA}, {"operator", operator}} {
				agentA.mustExecute(t, batch("tenant-a"), batchOptions{})
				if evs := agentA.readSession(t, "s"); len(evs) != 2 {
					t.Fatalf("ReadSession(s) as agent-a = %d events, want 2", len(evs))
				}
				if n, err := deleter.env.deleteSession("s"); err != nil || n != 2 {
					t.Fatalf("DeleteSession(s) as %s = %d, %v, want 2 events", deleter.name, n, err)
				}
				after := " as agent-a after " + deleter.name + " deleted it"
				_, err := readAll(agentA, "s")
				wantStatus(t, "ReadSession(s)"+after, err, codes.PermissionDenied, "PERMISSION_DENIED")
				wantWatchDenied(t, agentA, "s", "WatchSession(s)"+after)
				_, err = agentA.deleteSession("s")
				wantStatus(t, "DeleteSession(s)"+after, err, codes.PermissionDenied, "PERMISSION_DENIED")
			}
			agentB.mustExecute(t, batch("tenant-b"), batchOptions{})
			if evs := agentB.readSession(t, "s"); len(evs) != 2 {
				t.Errorf("ReadSession(s) as agent-b, which claimed the free id = %d events, want 2", len(evs))
			}
			_, err := readAll(agentA, "s")
			wantStatus(t, "ReadSession(s) as agent-a once agent-b claimed it", err, codes.PermissionDenied, "PERMISSION_DENIED")
		})
	}
}

// wantWatchDenied fails unless e's WatchSession of id is PERMISSION_DENIED.
func wantWatchDenied(t *testing.T, e *env, id, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second) // a bound on a hang
	defer cancel()
	w, err := e.tools.WatchSession(ctx, &toolsdv1.WatchSessionRequest{SessionId: id})
	if err == nil {
		_, err = w.Recv()
	}
	wantStatus(t, what, err, codes.PermissionDenied, "PERMISSION_DENIED")
}

// TestRetentionForgetsItsSessionsOwner, on each store over gRPC: once retention deletes
// a session, its former owner owns the id no more, as when DeleteSession deletes it:
// reading, watching or deleting it is PERMISSION_DENIED, as for any id nobody owns. The
// sweep is the test's own, as of far in the future.
func TestRetentionForgetsItsSessionsOwner(t *testing.T) {
	for _, kind := range []string{"memory", "bolt", "journal"} {
		t.Run(kind, func(t *testing.T) {
			var store session.Store
			e := startWrapped(t, kind, tenantAuth(t), func(s session.Store) session.Store { store = s; return s })
			agentA := e.as(t, tokenAgentA)
			agentA.mustExecute(t, &toolsdv1.Batch{SessionId: "s", Scope: "tenant-a", Calls: []*toolsdv1.ToolCall{call("c1", "nope", `{}`)}}, batchOptions{})
			if evs := agentA.readSession(t, "s"); len(evs) != 2 {
				t.Fatalf("ReadSession(s) as agent-a = %d events, want 2", len(evs))
			}
			sw := store.(interface{ Sweep(time.Time) (int, error) })
			if n, err := sw.Sweep(time.Now().Add(10000 * time.Hour)); err != nil || n != 1 {
				t.Fatalf("Sweep() = %d, %v, want 1 session deleted", n, err)
			}
			_, err := readAll(agentA, "s")
			wantStatus(t, "ReadSession(s) as agent-a after retention deleted it", err, codes.PermissionDenied, "PERMISSION_DENIED")
			wantWatchDenied(t, agentA, "s", "WatchSession(s) as agent-a after retention deleted it")
			_, err = agentA.deleteSession("s")
			wantStatus(t, "DeleteSession(s) as agent-a after retention deleted it", err, codes.PermissionDenied, "PERMISSION_DENIED")
		})
	}
}
