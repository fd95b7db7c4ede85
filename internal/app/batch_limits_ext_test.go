package app_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/pkg/provider"
)

// parked is a batch of one call waiting for its approval: it holds its place among the
// batches in flight until its stream ends.
type parked struct {
	stream toolsdv1.ToolService_ExecuteBatchClient
	reset  context.CancelFunc
}

// park sends a batch of one call that the policy asks about and waits for the approval
// request: the batch was accepted. It returns the RPC's error if the batch was refused.
func park(t *testing.T, e *env, sessionID, scope, tool string) (*parked, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	stream, err := e.tools.ExecuteBatch(ctx)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	b := &toolsdv1.Batch{SessionId: sessionID, Scope: scope, Calls: []*toolsdv1.ToolCall{call("c", tool, `{"text":"x"}`)}}
	if err := stream.Send(batchReq(b)); err != nil && !errors.Is(err, io.EOF) {
		cancel()
		t.Fatal(err)
	}
	for {
		m, err := stream.Recv()
		if err != nil {
			cancel()
			return nil, err
		}
		if m.GetApprovalRequest() != nil {
			return &parked{stream: stream, reset: cancel}, nil
		}
		if m.GetResult() != nil {
			cancel()
			t.Fatalf("ExecuteBatch(%s) got a result %v before an approval request", sessionID, m.GetResult())
		}
	}
}

// mustPark is park that fails the test on a refusal.
func mustPark(t *testing.T, e *env, sessionID, scope, tool string) *parked {
	t.Helper()
	p, err := park(t, e, sessionID, scope, tool)
	if err != nil {
		t.Fatalf("ExecuteBatch(%s) = %v, want it accepted", sessionID, err)
	}
	return p
}

// parkOnceFree parks a batch once a place has come back: a stream's end reaches the
// handler, which gives its place back, after the client sees it (or, for a reset,
// without the client seeing anything).
func parkOnceFree(t *testing.T, e *env, sessionID, scope, tool string) *parked {
	t.Helper()
	var p *parked
	waitFor(t, "a place for "+sessionID, func() bool {
		var err error
		p, err = park(t, e, sessionID, scope, tool)
		if err != nil && status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("ExecuteBatch(%s) = %v, want it accepted or refused for the limit", sessionID, err)
		}
		return err == nil
	})
	return p
}

// refusedFor checks that err refuses a batch for limit (max_batches or
// max_batches_per_identity): RESOURCE_EXHAUSTED, LIMIT_EXCEEDED, naming the limit.
func refusedFor(t *testing.T, what string, err error, limit string) {
	t.Helper()
	if status.Code(err) != codes.ResourceExhausted || reason(err) != "LIMIT_EXCEEDED" || !strings.Contains(status.Convert(err).Message(), "(limits."+limit+")") {
		t.Errorf("%s = %v, want ResourceExhausted, LIMIT_EXCEEDED, naming limits.%s", what, err, limit)
	}
}

// end reads a batch stream to its end, which must be OK.
func (p *parked) end(t *testing.T) {
	t.Helper()
	for {
		_, err := p.stream.Recv()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatalf("ExecuteBatch().Recv() = %v, want the batch to settle", err)
		}
	}
}

func (p *parked) send(t *testing.T, m *toolsdv1.ExecuteBatchRequest) {
	t.Helper()
	if err := p.stream.Send(m); err != nil {
		t.Fatal(err)
	}
}

// TestBatchesPerIdentity: one confined identity's batches in flight are capped by
// limits.max_batches_per_identity, parked in asks that hold no provider slot or not;
// another tenant's and the operator's batches are accepted meanwhile. The refused batch
// logged and claimed nothing. A batch's place comes back once, when it settles, when
// its client cancels it and when its client resets the stream.
func TestBatchesPerIdentity(t *testing.T) {
	e := start(t, `
limits: {max_batches: 10, max_batches_per_identity: 2, approval_timeout: 1h}
policy:
  rules:
    - {tool: tool_a, decision: ask}
    - {tool: tool_b, decision: ask}
`+tenantAuth(t))
	var inA, inB inbox
	runProviderWith(t, e.app.Addr(), []provider.Option{provider.WithScope("tenant-a"),
		provider.WithDialOptions(grpc.WithPerRPCCredentials(bearer(tokenProviderA)))}, inA.tool("tool_a"))
	runProviderWith(t, e.app.Addr(), []provider.Option{provider.WithScope("tenant-b"),
		provider.WithDialOptions(grpc.WithPerRPCCredentials(bearer(tokenProviderB)))}, inB.tool("tool_b"))
	agentA, agentB, operator := e.as(t, tokenAgentA), e.as(t, tokenAgentB), e.as(t, tokenOperator)

	a1 := mustPark(t, agentA, "a1", "tenant-a", "tool_a")
	a2 := mustPark(t, agentA, "a2", "tenant-a", "tool_a")
	_, err := park(t, agentA, "a3", "tenant-a", "tool_a")
	refusedFor(t, "agent-a's third batch", err, "max_batches_per_identity")
	if got := metricValue(t, e.app, "toolsd_server_batches_refused_total", "limit", "max_batches_per_identity"); got != 1 {
		t.Errorf("toolsd_server_batches_refused_total{limit=max_batches_per_identity} = %v, want 1", got)
	}
	if events, err := readAll(operator, "a3"); err != nil && status.Code(err) != codes.NotFound || len(events) != 0 {
		t.Errorf("ReadSession(a3) = %d events, %v, want none: the refused batch logged nothing", len(events), err)
	}
	// Nor did it claim the session: agent-b may take it.
	mustPark(t, agentB, "a3", "tenant-b", "tool_b")
	// The operator is bound by max_batches alone.
	for i := range 3 {
		mustPark(t, operator, fmt.Sprint("op", i), "tenant-a", "tool_a")
	}

	approve := &toolsdv1.ExecuteBatchRequest{Msg: &toolsdv1.ExecuteBatchRequest_Approval{Approval: &toolsdv1.ApprovalDecision{CallId: "c", Approved: true}}}
	cancel := &toolsdv1.ExecuteBatchRequest{Msg: &toolsdv1.ExecuteBatchRequest_Cancel{Cancel: &toolsdv1.CancelBatch{Reason: "stop"}}}
	for _, way := range []struct {
		name string
		end  func(*parked)
	}{
		{"settled", func(p *parked) { p.send(t, approve); p.end(t) }},
		{"cancelled", func(p *parked) { p.send(t, cancel); p.end(t) }},
		{"reset", func(p *parked) { p.reset() }},
	} {
		way.end(a1)
		a1, a2 = a2, parkOnceFree(t, agentA, "after-"+way.name, "tenant-a", "tool_a")
		// Given back once: agent-a is at its limit again.
		_, err := park(t, agentA, "over-after-"+way.name, "tenant-a", "tool_a")
		refusedFor(t, "agent-a's batch over its limit after one "+way.name, err, "max_batches_per_identity")
	}
	if !inA.contains("x") {
		t.Error("the approved call did not run")
	}
}

// TestMaxBatches: the batches in flight of all callers together are capped by
// limits.max_batches; a stream that has not sent its batch holds no place, and a
// batch's place comes back when toolsd cuts its client off for not reading.
func TestMaxBatches(t *testing.T) {
	e := start(t, `
limits: {max_batches: 2, outbox_size: 2, write_timeout: 100ms, approval_timeout: 1h}
policy:
  rules:
    - {tool: echo, decision: ask}
`)
	runProvider(t, e.app.Addr(), sizedTool("sized"), echoTool())
	// Opened first, and never sends its batch.
	if _, err := e.tools.ExecuteBatch(t.Context()); err != nil {
		t.Fatal(err)
	}
	mustPark(t, e, "s1", "", "echo")
	s2 := mustPark(t, e, "s2", "", "echo")
	_, err := park(t, e, "s3", "", "echo")
	refusedFor(t, "a third batch", err, "max_batches")
	if got := metricValue(t, e.app, "toolsd_server_batches_refused_total", "limit", "max_batches"); got != 1 {
		t.Errorf("toolsd_server_batches_refused_total{limit=max_batches} = %v, want 1", got)
	}
	s2.send(t, &toolsdv1.ExecuteBatchRequest{Msg: &toolsdv1.ExecuteBatchRequest_Approval{Approval: &toolsdv1.ApprovalDecision{CallId: "c", Approved: true}}})
	s2.end(t)
	// A client that reads nothing while its batch waits for an approval it cannot see
	// takes s2's place.
	slow := openFixedWindow(t, e.app.Addr())
	if err := slow.Send(batchReq(&toolsdv1.Batch{SessionId: "s-slow", Calls: twoLargeThen(call("ask", "echo", `{"text":"may I?"}`))})); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the slow batch's plan", func() bool { return len(e.readSession(t, "s-slow")) >= 3 })
	// Read only once toolsd has cut it off (after s3's refusal), or reading would make room.
	waitFor(t, "the slow batch to be cut off", func() bool {
		return rpcCount(t, e.app, "grpc_server_handled_total", "grpc_method", "ExecuteBatch", "grpc_code", "ResourceExhausted") == 2
	})
	readUntilCutOff(t, slow)
	parkOnceFree(t, e, "after-cut", "", "echo")
	_, err = park(t, e, "over-after-cut", "", "echo")
	refusedFor(t, "a batch over the limit after a cut-off", err, "max_batches")
}
