package app_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/pkg/provider"
)

// TestRefusedResultKeepsConcludesTurn: a result toolsd refuses for its size or its
// encoding still asks to end the turn when the tool did (the ToolResult contract: a
// tool's request survives its result being replaced by INVALID_RESULT or
// RESULT_TOO_LARGE), whether the provider sent it over the limit, sent content that is
// not UTF-8, or (the Go SDK) kept an oversized result back and sent its size.
func TestRefusedResultKeepsConcludesTurn(t *testing.T) {
	e := start(t, "limits: {max_result_bytes: 64KiB}\n")
	p := connectHand(t, e, "raw")
	p.serve(func(ex *toolsdv1.ExecuteRequest) []*toolsdv1.ProviderServiceConnectRequest {
		r := &toolsdv1.ExecuteResult{RequestId: ex.GetRequestId(), ConcludesTurn: true}
		switch ex.GetCallId() {
		case "too-large":
			r.Content = []byte(strings.Repeat("x", 100<<10))
		case "not-utf8":
			r.Content = []byte("\xff")
		case "error-not-utf8":
			r.IsError, r.ErrorMessage = true, []byte("\xff")
		case "oversized":
			r.OversizedBytes = 100 << 10
		}
		return []*toolsdv1.ProviderServiceConnectRequest{result(r)}
	})
	runProvider(t, e.app.Addr(), provider.NewTool("big", "returns too much",
		func(context.Context, provider.Call, struct{}) (provider.Result, error) {
			return provider.Result{Content: strings.Repeat("y", 100<<10), ConcludesTurn: true}, nil
		}))
	calls := []*toolsdv1.ToolCall{
		call("too-large", "raw", `{}`), call("not-utf8", "raw", `{}`), call("error-not-utf8", "raw", `{}`),
		call("oversized", "raw", `{}`), call("sdk-oversized", "big", `{}`),
	}
	for _, c := range calls {
		t.Run(c.GetCallId(), func(t *testing.T) {
			session := "s-concludes-" + c.GetCallId()
			out := e.mustExecute(t, &toolsdv1.Batch{SessionId: session, Calls: []*toolsdv1.ToolCall{c}}, batchOptions{})
			r := out.results[0]
			if code := r.GetError().GetCode(); code != "RESULT_TOO_LARGE" && code != "INVALID_RESULT" {
				t.Fatalf("result code = %q, want RESULT_TOO_LARGE or INVALID_RESULT", code)
			}
			var logged []bool
			for _, ev := range e.readSession(t, session) {
				if tr := ev.GetToolResult(); tr != nil {
					logged = append(logged, tr.GetConcludesTurn())
				}
			}
			got := []bool{r.GetConcludesTurn(), out.settled.GetConcludesTurn()}
			if diff := cmp.Diff([]bool{true, true, true}, append(got, logged...)); diff != "" {
				t.Errorf("concludes_turn of the result, settled and the logged result (-want +got):\n%s", diff)
			}
		})
	}
}
