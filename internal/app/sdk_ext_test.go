package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/pkg/provider"
)

// countArgs has a map with integer keys: encoding/json reads its keys as integers.
type countArgs struct {
	Counts map[int]string `json:"counts"`
}

// TestIntegerKeyedMapArguments: a key the SDK's handler could never decode is refused
// by toolsd's validation (INVALID_ARGUMENTS, the model is told what the schema wants),
// rather than passing it and failing in the provider as a tool error.
func TestIntegerKeyedMapArguments(t *testing.T) {
	e := start(t, "")
	runProvider(t, e.app.Addr(), provider.NewTool("count", "counts",
		func(_ context.Context, _ provider.Call, a countArgs) (string, error) {
			return fmt.Sprint(len(a.Counts)), nil
		}))
	out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-int-keys", Calls: []*toolsdv1.ToolCall{
		call("c1", "count", `{"counts":{"1":"a","-2":"b"}}`),
		call("c2", "count", `{"counts":{"one":"a"}}`),
	}}, batchOptions{})
	if got, want := resultCodes(out.results), []string{"", "INVALID_ARGUMENTS"}; !slices.Equal(got, want) {
		t.Fatalf("codes = %v, want %v (results %v)", got, want, out.results)
	}
	if got := out.results[0].GetContent(); got != "2" {
		t.Errorf("count content = %q, want 2", got)
	}
}

// whenArgs has a time: the SDK's schema asks for a string (of format date-time), which
// encoding/json decodes only when it is RFC 3339.
type whenArgs struct {
	At time.Time `json:"at"`
}

// TestSDKArgumentsThatDoNotDecode: arguments that pass toolsd's validation but do not
// decode into the SDK handler's argument type are the model's mistake, as a schema
// violation is: INVALID_ARGUMENTS with the decoder's message, delivered and logged so,
// counted under that code, and not retried though the tool is idempotent. The
// handler's own failure stays TOOL_ERROR.
func TestSDKArgumentsThatDoNotDecode(t *testing.T) {
	e := start(t, `
retry: {max_attempts: 5, budget: 20s, base_delay: 1ms, max_delay: 2ms}
policy:
  tools:
    when: {idempotent: true}
`)
	var ran atomic.Int32
	runProvider(t, e.app.Addr(), provider.NewTool("when", "fails at the time",
		func(_ context.Context, _ provider.Call, a whenArgs) (string, error) {
			ran.Add(1)
			return "", errors.New("no calendar at " + a.At.Format(time.RFC3339))
		}))
	const notRFC3339 = `{"at":"2026-01-02 03:04:05Z"}`
	out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-no-decode", Calls: []*toolsdv1.ToolCall{
		call("c1", "when", notRFC3339),
		call("c2", "when", `{"at":"2026-01-02T03:04:05Z"}`),
	}}, batchOptions{})
	var a whenArgs
	decodeErr := json.Unmarshal([]byte(notRFC3339), &a)
	if decodeErr == nil {
		t.Fatalf("json.Unmarshal(%s) = nil, want an error", notRFC3339)
	}
	want := []*toolsdv1.ToolResult{
		{CallId: "c1", Content: "Error: invalid arguments: " + decodeErr.Error(), IsError: true,
			Error: &toolsdv1.ToolError{Code: "INVALID_ARGUMENTS", Message: "invalid arguments: " + decodeErr.Error(), Tool: "when"}},
		{CallId: "c2", Content: "Error: no calendar at 2026-01-02T03:04:05Z", IsError: true,
			Error: &toolsdv1.ToolError{Code: "TOOL_ERROR", Message: "no calendar at 2026-01-02T03:04:05Z", Tool: "when"}},
	}
	if diff := cmp.Diff(want, out.results, protocmp.Transform(), protocmp.IgnoreFields(&toolsdv1.ToolResult{}, "index", "seq", "call_seq")); diff != "" {
		t.Errorf("results mismatch (-want +got):\n%s", diff)
	}
	var logged []*toolsdv1.ToolResult
	for _, ev := range e.readSession(t, "s-no-decode") {
		if tr := ev.GetToolResult(); tr != nil {
			m := tr.GetMessage()
			logged = append(logged, &toolsdv1.ToolResult{CallId: m.GetCallId(), Content: m.GetContent(), IsError: m.GetIsError(), Error: tr.GetError()})
		}
	}
	if diff := cmp.Diff(want, logged, protocmp.Transform()); diff != "" {
		t.Errorf("logged results mismatch (-want +got):\n%s", diff)
	}
	if got := ran.Load(); got != 1 {
		t.Errorf("handler ran %d times, want 1 (the call that decoded)", got)
	}
	for _, code := range []string{"INVALID_ARGUMENTS", "TOOL_ERROR"} {
		if got := metricValue(t, e.app, "toolsd_pipeline_calls_total", "tool", "when", "code", code); got != 1 {
			t.Errorf("calls_total{tool=when,code=%s} = %v, want 1", code, got)
		}
	}
	if got := metricValue(t, e.app, "toolsd_pipeline_retries_total", "tool", "when"); got != 0 {
		t.Errorf("retries_total{tool=when} = %v, want 0", got)
	}
}
