package app_test

import (
	"context"
	"testing"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
)

// fetchDef is the definition both providers of TestIdempotentRetryGoesToTheLiveProvider
// register: the same content hash, so a retry may go to either.
func fetchDef() *toolsdv1.ToolDefinition {
	return &toolsdv1.ToolDefinition{Name: "fetch", Description: "raw tool", ParametersJson: `{"type":"object"}`}
}

// mustRegisterHand registers fetchDef in scope on p's stream.
func mustRegisterHand(t *testing.T, p *handProvider, scope string) {
	t.Helper()
	if st := registerHand(t, p, scope, fetchDef()); st.GetErrorCode() != "" {
		t.Fatalf("registering fetch in %q: %s %s", scope, st.GetErrorCode(), st.GetErrorMessage())
	}
}

// TestIdempotentRetryGoesToTheLiveProvider: an idempotent tool served by two providers
// (one in the agent's scope, shadowing the same definition in the global scope) whose
// nearer provider drops mid-call is retried on the other at once: the drop removes the
// dropped provider's tools before its call is told PROVIDER_GONE, so the retry's resolve
// cannot find the provider that is going away. With one retry allowed and the shortest
// backoff, the retry found it, was PROVIDER_UNAVAILABLE, and the call failed (in about
// one round in fifty here: the drop failed the call first and removed the tools just
// after, so each round runs the race once).
func TestIdempotentRetryGoesToTheLiveProvider(t *testing.T) {
	e := start(t, `
retry: {max_attempts: 2, budget: 10s, base_delay: 1ns, max_delay: 1ns}
policy:
  tools:
    fetch: {idempotent: true}
`)
	live := helloHand(t, e.conn, "live")
	mustRegisterHand(t, live, "")
	live.serve(func(ex *toolsdv1.ExecuteRequest) []*toolsdv1.ProviderServiceConnectRequest {
		return []*toolsdv1.ProviderServiceConnectRequest{result(&toolsdv1.ExecuteResult{
			RequestId: ex.GetRequestId(), Content: []byte("from the live provider"),
		})}
	})
	for round := range 200 {
		ctx, drop := context.WithCancel(t.Context())
		stream, err := toolsdv1.NewProviderServiceClient(e.conn).Connect(ctx)
		if err != nil {
			t.Fatal(err)
		}
		dropping := &handProvider{stream: stream}
		dropping.send(t, &toolsdv1.ProviderServiceConnectRequest{Msg: &toolsdv1.ProviderServiceConnectRequest_Hello{Hello: &toolsdv1.ProviderHello{Name: "dropping"}}})
		if dropping.recv(t).GetWelcome() == nil {
			t.Fatal("the dropping provider got no welcome")
		}
		mustRegisterHand(t, dropping, "agent/a")
		go func() { // drops its stream once the call reaches it
			defer drop()
			for {
				m, err := stream.Recv()
				if err != nil || m.GetExecute() != nil {
					return
				}
			}
		}()
		out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-drop", Scope: "agent/a", Turn: uint64(round + 1),
			Calls: []*toolsdv1.ToolCall{call("c", "fetch", `{}`)}}, batchOptions{})
		if len(out.results) != 1 || out.results[0].GetIsError() || out.results[0].GetContent() != "from the live provider" {
			t.Fatalf("round %d: results = %v, want the retry's answer from the live provider", round, out.results)
		}
		drop()
	}
}
