package app_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/config"
)

// TestWatchEndsWhenRetentionDeletesTheSession: a watch was authorized for one session
// of its owner. Once retention deletes that session its id is free again, and another
// tenant's agent may claim it; the old watch must not go on to stream the new owner's
// events.
func TestWatchEndsWhenRetentionDeletesTheSession(t *testing.T) {
	client := startKeepingOneSession(t)
	agentA, agentB, operator := client(tokenAgentA), client(tokenAgentB), client(tokenOperator)
	batch := func(session, scope, text string) *toolsdv1.Batch {
		return &toolsdv1.Batch{SessionId: session, Scope: scope, Calls: []*toolsdv1.ToolCall{
			call("c0", "nope", fmt.Sprintf(`{"text":%q}`, text)),
			call("c1", "nope", fmt.Sprintf(`{"text":%q}`, text)),
		}}
	}

	agentA.mustExecute(t, batch("shared", "tenant-a", "a's"), batchOptions{})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	watch, err := agentA.tools.WatchSession(ctx, &toolsdv1.WatchSessionRequest{SessionId: "shared"})
	if err != nil {
		t.Fatalf("WatchSession(shared) as agent-a = %v", err)
	}
	for range 4 {
		if _, err := watch.Recv(); err != nil {
			t.Fatalf("WatchSession(shared) as agent-a: Recv() = %v", err)
		}
	}
	// A newer session pushes "shared" past retention's max_sessions.
	agentA.mustExecute(t, batch("newer", "tenant-a", "a's"), batchOptions{})
	waitFor(t, "retention to delete the session", func() bool { return isEmpty(t, operator, "shared") })

	// The id is free again: agent-b claims it and runs a longer batch in it.
	agentB.mustExecute(t, batch("shared", "tenant-b", "b's secret"), batchOptions{})
	agentB.mustExecute(t, &toolsdv1.Batch{SessionId: "shared", Scope: "tenant-b", Step: 1, Calls: []*toolsdv1.ToolCall{
		call("c2", "nope", `{"text":"b's secret"}`),
	}}, batchOptions{})

	ev, err := watch.Recv()
	if err == nil {
		t.Fatalf("agent-a's watch of its deleted session delivered agent-b's event %v", ev.GetEvent())
	}
	if status.Code(err) != codes.NotFound {
		t.Errorf("WatchSession(shared) after retention deleted it = %v, want NotFound", err)
	}
}

// TestReadSessionStopsWhenTheSessionChangesOwner: ReadSession pages through a session.
// If retention deletes it between two pages (its reader may be slow) and another
// tenant's agent claims the freed id, the next page must not come from the new owner's
// session.
func TestReadSessionStopsWhenTheSessionChangesOwner(t *testing.T) {
	client := startKeepingOneSession(t)
	agentB, operator := client(tokenAgentB), client(tokenOperator)
	// agent-a's reader takes little at a time: fixed 64 KiB windows.
	agentA := client(tokenAgentA, grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	full := func(session, scope, text string, step uint64) *toolsdv1.Batch {
		b := &toolsdv1.Batch{SessionId: session, Scope: scope, Step: step}
		for i := range 128 {
			b.Calls = append(b.Calls, call(fmt.Sprint("c", i), "nope", fmt.Sprintf(`{"text":%q}`, text)))
		}
		return b
	}
	padding := strings.Repeat("a", 1024)
	// Three batches: 768 events, more than ReadSession's first two pages (4, then 512
	// of events this small), so it reads a third.
	for step := range uint64(3) {
		agentA.mustExecute(t, full("shared", "tenant-a", padding, step), batchOptions{})
	}

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	stream, err := agentA.tools.ReadSession(ctx, &toolsdv1.ReadSessionRequest{SessionId: "shared"})
	if err != nil {
		t.Fatalf("ReadSession(shared) as agent-a = %v", err)
	}
	// Five events: the fifth is of the second page, so the server read that page
	// before retention deletes the session, and it reads the third only once this
	// reader has taken the second (far more than the window holds), after agent-b's
	// claim. A second page read between the delete and the claim would find the
	// session empty and end the stream with EOF, and show nothing.
	for range 5 {
		if _, err := stream.Recv(); err != nil {
			t.Fatalf("ReadSession(shared) as agent-a: Recv() = %v", err)
		}
	}
	// While the reader waits, retention deletes "shared" and agent-b claims the id.
	agentA.mustExecute(t, &toolsdv1.Batch{SessionId: "newer", Scope: "tenant-a", Calls: []*toolsdv1.ToolCall{call("c0", "nope", `{}`)}}, batchOptions{})
	waitFor(t, "retention to delete the session", func() bool { return isEmpty(t, operator, "shared") })
	for step := range uint64(3) {
		agentB.mustExecute(t, full("shared", "tenant-b", "b's secret", step), batchOptions{})
	}

	for {
		m, err := stream.Recv()
		if err != nil {
			if status.Code(err) != codes.PermissionDenied {
				t.Errorf("ReadSession(shared) as agent-a ended with %v, want PermissionDenied", err)
			}
			return
		}
		if strings.Contains(m.GetEvent().GetToolCall().GetArgumentsJson(), "b's secret") {
			t.Fatalf("agent-a's ReadSession delivered agent-b's event %v", m.GetEvent())
		}
	}
}

// startKeepingOneSession starts toolsd with the tenants' auth and a retention that keeps
// one session (swept every 5 ms), and returns a dialer of clients by token.
func startKeepingOneSession(t *testing.T) func(token string, opts ...grpc.DialOption) *env {
	t.Helper()
	text := "listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\n" +
		"session: {store: memory, retention: {max_sessions: 1}}\n" + tenantAuth(t)
	cfg := keepingOneSession(t, text)
	e := startConfig(t, cfg)
	return func(token string, opts ...grpc.DialOption) *env {
		conn := dialWith(t, e.app.Addr(), append(opts, grpc.WithPerRPCCredentials(bearer(token)))...)
		return &env{app: e.app, conn: conn, tools: toolsdv1.NewToolServiceClient(conn)}
	}
}

// keepingOneSession parses text, a config whose retention keeps one session, and sets
// its sweep to every 5 ms, so that the tests need not wait a second for it: a config
// file is refused an interval under 1s (a sweep is a write of the log, which a
// memory store makes cheap).
func keepingOneSession(t *testing.T, text string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(text), "test.yaml")
	if err != nil {
		t.Fatalf("config.Parse() = %v", err)
	}
	cfg.Session.Retention.Interval = config.Duration(5 * time.Millisecond)
	return cfg
}

// TestWatchOfADeletedSessionDoesNotFollowTheNextOwner: once retention has deleted a
// session, a watch its former owner opens on the freed id must not stream the events
// of the identity that claims the id next.
func TestWatchOfADeletedSessionDoesNotFollowTheNextOwner(t *testing.T) {
	client := startKeepingOneSession(t)
	agentA, agentB, operator := client(tokenAgentA), client(tokenAgentB), client(tokenOperator)
	one := func(session, scope, text string) *toolsdv1.Batch {
		return &toolsdv1.Batch{SessionId: session, Scope: scope, Calls: []*toolsdv1.ToolCall{
			call("c0", "nope", fmt.Sprintf(`{"text":%q}`, text)),
		}}
	}
	agentA.mustExecute(t, one("shared", "tenant-a", "a's"), batchOptions{})
	// A newer session pushes "shared" past retention's max_sessions.
	agentA.mustExecute(t, one("newer", "tenant-a", "a's"), batchOptions{})
	waitFor(t, "retention to delete the session", func() bool { return isEmpty(t, operator, "shared") })

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	watch, err := agentA.tools.WatchSession(ctx, &toolsdv1.WatchSessionRequest{SessionId: "shared"})
	if err != nil {
		t.Fatalf("WatchSession(shared) as agent-a = %v", err)
	}
	waitFor(t, "the watch to start", func() bool { return startedRPCs(t, agentA.app, "WatchSession") == 1 })
	agentB.mustExecute(t, one("shared", "tenant-b", "b's secret"), batchOptions{})

	ev, err := watch.Recv()
	if err == nil {
		t.Fatalf("agent-a's watch of its deleted session delivered agent-b's event %v", ev.GetEvent())
	}
	if c := status.Code(err); c != codes.PermissionDenied && c != codes.NotFound {
		t.Errorf("WatchSession(shared) of a deleted session = %v, want PermissionDenied or NotFound", err)
	}
}

// TestReadSessionDoesNotSpliceTwoLivesOfASession: without auth there is no owner to
// check. If retention deletes a session between two pages of a slow ReadSession and a
// batch recreates the id (its seqs start at 1 again), the read must not go on with the
// new session's events from the seq it had reached: it ends with NOT_FOUND.
func TestReadSessionDoesNotSpliceTwoLivesOfASession(t *testing.T) {
	text := "listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\n" +
		"session: {store: memory, retention: {max_sessions: 1}}\n"
	e := startConfig(t, keepingOneSession(t, text))
	conn := dialWith(t, e.app.Addr(), grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	slow := &env{app: e.app, conn: conn, tools: toolsdv1.NewToolServiceClient(conn)}
	full := func(text string, step uint64) *toolsdv1.Batch {
		b := &toolsdv1.Batch{SessionId: "shared", Step: step}
		for i := range 128 {
			b.Calls = append(b.Calls, call(fmt.Sprint("c", i), "nope", fmt.Sprintf(`{"text":%q}`, text)))
		}
		return b
	}
	padding := strings.Repeat("a", 1024)
	for step := range uint64(3) {
		e.mustExecute(t, full(padding, step), batchOptions{})
	}

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	stream, err := slow.tools.ReadSession(ctx, &toolsdv1.ReadSessionRequest{SessionId: "shared"})
	if err != nil {
		t.Fatalf("ReadSession(shared) = %v", err)
	}
	// The fifth event is of the second page: the third is read once this reader has
	// taken the second, far more than its window holds.
	for range 5 {
		if _, err := stream.Recv(); err != nil {
			t.Fatalf("ReadSession(shared): Recv() = %v", err)
		}
	}
	e.mustExecute(t, &toolsdv1.Batch{SessionId: "newer", Calls: []*toolsdv1.ToolCall{call("c0", "nope", `{}`)}}, batchOptions{})
	waitFor(t, "retention to delete the session", func() bool { return isEmpty(t, e, "shared") })
	for step := range uint64(3) {
		e.mustExecute(t, full("second life", step), batchOptions{})
	}

	for {
		m, err := stream.Recv()
		if err != nil {
			if status.Code(err) != codes.NotFound {
				t.Errorf("ReadSession(shared) ended with %v, want NotFound", err)
			}
			return
		}
		if strings.Contains(m.GetEvent().GetToolCall().GetArgumentsJson(), "second life") {
			t.Fatalf("ReadSession(shared) went on into the recreated session: %v", m.GetEvent())
		}
	}
}

// isEmpty reports whether a session has no events. It reads one page (one event), so
// that retention deleting the session meanwhile cannot end the read with NOT_FOUND.
func isEmpty(t *testing.T, e *env, id string) bool {
	t.Helper()
	stream, err := e.tools.ReadSession(t.Context(), &toolsdv1.ReadSessionRequest{SessionId: id, Limit: 1})
	if err != nil {
		t.Fatalf("ReadSession(%s) = %v", id, err)
	}
	_, err = stream.Recv()
	if err != nil && !errors.Is(err, io.EOF) {
		t.Fatalf("ReadSession(%s) = %v", id, err)
	}
	return errors.Is(err, io.EOF)
}
