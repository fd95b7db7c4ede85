package app_test

import (
	"context"
	"fmt"
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
	text := "listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\n" +
		"session: {store: memory, retention: {max_sessions: 1, interval: 5ms}}\n" + tenantAuth(t)
	cfg, err := config.Parse([]byte(text), "test.yaml")
	if err != nil {
		t.Fatalf("config.Parse() = %v", err)
	}
	e := startConfig(t, cfg)
	client := func(token string) *env {
		conn := dialWith(t, e.app.Addr(), grpc.WithPerRPCCredentials(bearer(token)))
		return &env{app: e.app, conn: conn, tools: toolsdv1.NewToolServiceClient(conn)}
	}
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
	waitFor(t, "retention to delete the session", func() bool { return len(operator.readSession(t, "shared")) == 0 })

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
