package app_test

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
)

// watch opens a watch of session id, which holds events, and waits for its first
// event: the watch was accepted and holds its place until stop. It returns the RPC's
// error if the watch was refused.
func watch(t *testing.T, e *env, id string) (stop context.CancelFunc, err error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	w, err := e.tools.WatchSession(ctx, &toolsdv1.WatchSessionRequest{SessionId: id})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if _, err := w.Recv(); err != nil {
		cancel()
		return nil, err
	}
	return cancel, nil
}

// mustWatch is watch that fails the test on a refusal.
func mustWatch(t *testing.T, e *env, id string) context.CancelFunc {
	t.Helper()
	stop, err := watch(t, e, id)
	if err != nil {
		t.Fatalf("WatchSession(%s) = %v, want it accepted", id, err)
	}
	t.Cleanup(stop)
	return stop
}

// oneCall is a batch of one call of a tool that does not exist: a session with events.
func oneCall(id, scope string) *toolsdv1.Batch {
	return &toolsdv1.Batch{SessionId: id, Scope: scope, Calls: []*toolsdv1.ToolCall{call("c0", "nope", `{}`)}}
}

// TestWatchesPerIdentity: one confined identity's open watches are capped by
// limits.max_watches_per_identity, refused (RESOURCE_EXHAUSTED, LIMIT_EXCEEDED) and
// counted past it; another tenant's and the operator's watches are accepted meanwhile.
// A watch's place comes back once when its client cancels it.
func TestWatchesPerIdentity(t *testing.T) {
	e := start(t, "limits: {max_watches: 10, max_watches_per_identity: 2}\n"+tenantAuth(t))
	agentA, agentB, operator := e.as(t, tokenAgentA), e.as(t, tokenAgentB), e.as(t, tokenOperator)
	agentA.mustExecute(t, oneCall("wa", "tenant-a"), batchOptions{})
	agentB.mustExecute(t, oneCall("wb", "tenant-b"), batchOptions{})

	a1 := mustWatch(t, agentA, "wa")
	mustWatch(t, agentA, "wa")
	_, err := watch(t, agentA, "wa")
	refusedFor(t, "agent-a's third watch", err, "max_watches_per_identity")
	if got := metricValue(t, e.app, "toolsd_server_watches_refused_total", "limit", "max_watches_per_identity"); got != 1 {
		t.Errorf("toolsd_server_watches_refused_total{limit=max_watches_per_identity} = %v, want 1", got)
	}
	mustWatch(t, agentB, "wb")
	// The operator is bound by max_watches alone.
	for range 3 {
		mustWatch(t, operator, "wa")
	}

	a1()
	waitFor(t, "agent-a's place to come back", func() bool {
		stop, err := watch(t, agentA, "wa")
		if err != nil && status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("WatchSession(wa) = %v, want it accepted or refused for the limit", err)
		}
		if stop != nil {
			t.Cleanup(stop)
		}
		return err == nil
	})
	// Given back once: agent-a is at its limit again.
	_, err = watch(t, agentA, "wa")
	refusedFor(t, "agent-a's watch over its limit after a cancel", err, "max_watches_per_identity")
}

// TestMaxWatches: the open watches of all callers together are capped by
// limits.max_watches; a watch past it is refused and counted.
func TestMaxWatches(t *testing.T) {
	e := start(t, "limits: {max_watches: 2}\n")
	e.mustExecute(t, oneCall("s", ""), batchOptions{})
	mustWatch(t, e, "s")
	mustWatch(t, e, "s")
	_, err := watch(t, e, "s")
	refusedFor(t, "a third watch", err, "max_watches")
	if got := metricValue(t, e.app, "toolsd_server_watches_refused_total", "limit", "max_watches"); got != 1 {
		t.Errorf("toolsd_server_watches_refused_total{limit=max_watches} = %v, want 1", got)
	}
}

// TestMaxHealthWatches: the health service needs no credentials, so the open health
// Watch streams of all callers together are capped by limits.max_health_watches; a
// Watch past it is refused and counted, also with auth on and no token, while Check
// still answers.
func TestMaxHealthWatches(t *testing.T) {
	e := start(t, "limits: {max_health_watches: 2}\n"+tenantAuth(t))
	health := healthpb.NewHealthClient(e.conn)
	for range 2 {
		w, err := health.Watch(t.Context(), &healthpb.HealthCheckRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Recv(); err != nil {
			t.Fatalf("health Watch().Recv() = %v, want it accepted", err)
		}
	}
	w, err := health.Watch(t.Context(), &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = w.Recv()
	refusedFor(t, "a third health Watch", err, "max_health_watches")
	if got := metricValue(t, e.app, "toolsd_server_watches_refused_total", "limit", "max_health_watches"); got != 1 {
		t.Errorf("toolsd_server_watches_refused_total{limit=max_health_watches} = %v, want 1", got)
	}
	if _, err := health.Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("health Check() at the limit = %v, want it answered", err)
	}
}

// TestWatchesOfAnAgentOfEveryScope: an identity granted "**" is bound by
// limits.max_watches alone, its WatchSession as its WatchSchemas and its batches: its
// session watches were counted against max_watches_per_identity, as a tenant's, since
// no agent grant names the session read itself (an agent reads what it executed).
func TestWatchesOfAnAgentOfEveryScope(t *testing.T) {
	const token = "agent-all-token-0c5e8a3d7b1f9264"
	e := start(t, "limits: {max_watches: 10, max_watches_per_identity: 1}\n"+
		tenantAuthWith(t, token+" agent-all\n", `    - {identity: agent-all, role: agent, scopes: ["**"]}`+"\n"))
	all := e.as(t, token)
	all.mustExecute(t, oneCall("wall", "tenant-a"), batchOptions{})
	for i := range 3 {
		stop, err := watch(t, all, "wall")
		if err != nil {
			t.Fatalf("agent-all's WatchSession %d = %v, want it accepted (bound by max_watches alone)", i+1, err)
		}
		t.Cleanup(stop)
	}
}
