package app_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

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
