package app_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/toolsd/toolsd/pkg/provider"
)

// TestSDKRegistrationsSayWhatToolsdAccepted: a provider's code reads which of its tools
// a real toolsd accepted and why it refused the others (here an invalid schema,
// INVALID_ARGUMENT), in the order they were added; Ready alone closed "whatever toolsd
// accepted", and the refusal was only logged.
func TestSDKRegistrationsSayWhatToolsdAccepted(t *testing.T) {
	e := start(t, "")
	p, stop := runProvider(t, e.app.Addr(),
		provider.NewTool("good", "is registered",
			func(context.Context, provider.Call, struct{}) (string, error) { return "", nil }),
		provider.NewTool("bad_schema", "has a schema toolsd refuses",
			func(context.Context, provider.Call, struct{}) (string, error) { return "", nil },
			provider.WithSchema(`{"type":"object","properties":{"a":{"type":"nope"}}}`)))
	got := p.Registrations()
	want := []provider.Registration{
		{Tool: "good", State: provider.Registered},
		{Tool: "bad_schema", State: provider.Refused, Code: "INVALID_ARGUMENT"},
	}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(provider.Registration{}, "Message")); diff != "" {
		t.Errorf("Registrations() once ready: (-want +got)\n%s", diff)
	}
	if len(got) == 2 && !strings.Contains(got[1].Message, "invalid schema") {
		t.Errorf("Registrations()[1].Message = %q, want toolsd's reason (invalid schema)", got[1].Message)
	}
	if names := e.schemaNames(t, ""); !slices.Contains(names, "good") || slices.Contains(names, "bad_schema") {
		t.Errorf("toolsd's global schemas = %v, want good and not bad_schema", names)
	}
	stop()
	want = []provider.Registration{{Tool: "good", State: provider.Pending}, {Tool: "bad_schema", State: provider.Pending}}
	if diff := cmp.Diff(want, p.Registrations()); diff != "" {
		t.Errorf("Registrations() once Run returned: (-want +got)\n%s", diff)
	}
}
