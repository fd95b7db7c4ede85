package app_test

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/app"
	"github.com/toolsd/toolsd/pkg/provider"
)

type noArgs struct{}

func constTool(name, answer string, opts ...provider.ToolOption) provider.Tool {
	return provider.NewTool(name, "Answers "+answer+".", func(context.Context, provider.Call, noArgs) (string, error) {
		return answer, nil
	}, opts...)
}

// gateTool reports its start and returns once release is closed.
func gateTool(name string, started chan<- struct{}, release <-chan struct{}) provider.Tool {
	return provider.NewTool(name, "Waits for the test.", func(ctx context.Context, _ provider.Call, _ noArgs) (string, error) {
		started <- struct{}{}
		select {
		case <-release:
			return "released", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	})
}

func (e *env) resolve(t *testing.T, session string, step uint64, model *toolsdv1.ModelSelection) *toolsdv1.ResolveToolSetResponse {
	t.Helper()
	resp, err := e.tools.ResolveToolSet(t.Context(), &toolsdv1.ResolveToolSetRequest{SessionId: session, Turn: 1, Step: step, Model: model})
	if err != nil {
		t.Fatalf("ResolveToolSet() = %v", err)
	}
	return resp
}

func names(tools []*toolsdv1.ToolSchema) []string {
	out := make([]string, len(tools))
	for i, t := range tools {
		out[i] = t.GetName()
	}
	return out
}

func TestConditionalToolsFollowTheSession(t *testing.T) {
	e := start(t, "")
	runProvider(t, e.app.Addr(),
		constTool("get_db_schema", "tables: users"),
		constTool("query_db", "1 row", provider.WithCondition(`session.succeeded("get_db_schema")`)),
		constTool("web_search", "results", provider.WithCondition(`model.provider == "openai"`)),
		constTool("big_model_only", "ok", provider.WithCondition(`model.reasoning_effort == "high" && step >= 2`)),
	)
	openai := &toolsdv1.ModelSelection{Provider: "openai", Model: "gpt", ReasoningEffort: "low"}

	// Simple loops never see conditional tools.
	if got := e.schemaNames(t, ""); !slices.Equal(got, []string{"get_db_schema"}) {
		t.Errorf("Schemas() = %v, want only the unconditional tool", got)
	}

	set := e.resolve(t, "s-cond", 1, openai)
	if diff := cmp.Diff([]string{"get_db_schema", "web_search"}, names(set.GetTools())); diff != "" {
		t.Errorf("step 1 tool set (-want +got):\n%s", diff)
	}
	out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-cond", Turn: 1, Step: 1, ToolSetId: set.GetToolSetId(), Calls: []*toolsdv1.ToolCall{
		call("c1", "web_search", `{}`),
		call("c2", "query_db", `{}`),
		call("c3", "get_db_schema", `{}`),
	}}, batchOptions{})
	if diff := cmp.Diff([]string{"", "UNKNOWN_TOOL", ""}, resultCodes(out.results)); diff != "" {
		t.Errorf("step 1 codes (-want +got):\n%s", diff)
	}
	if _, err := e.tools.ReleaseToolSet(t.Context(), &toolsdv1.ReleaseToolSetRequest{ToolSetId: set.GetToolSetId()}); err != nil {
		t.Fatalf("ReleaseToolSet() = %v", err)
	}

	// get_db_schema succeeded in this session, so the next step offers query_db.
	set2 := e.resolve(t, "s-cond", 2, &toolsdv1.ModelSelection{Provider: "anthropic", ReasoningEffort: "high"})
	if diff := cmp.Diff([]string{"big_model_only", "get_db_schema", "query_db"}, names(set2.GetTools())); diff != "" {
		t.Errorf("step 2 tool set (-want +got):\n%s", diff)
	}
	if set2.GetFingerprint() == set.GetFingerprint() {
		t.Error("fingerprints of different tool sets are equal")
	}
	schemas, err := e.tools.Schemas(t.Context(), &toolsdv1.SchemasRequest{ToolSetId: set2.GetToolSetId()})
	if err != nil || !slices.Equal(names(schemas.GetTools()), names(set2.GetTools())) || schemas.GetFingerprint() != set2.GetFingerprint() {
		t.Errorf("Schemas(tool set) = %v, %v; want the set's own schemas and fingerprint", schemas, err)
	}
	out = e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-cond", Turn: 1, Step: 2, ToolSetId: set2.GetToolSetId(), Calls: []*toolsdv1.ToolCall{
		call("c4", "query_db", `{}`), call("c5", "web_search", `{}`),
	}}, batchOptions{})
	if diff := cmp.Diff([]string{"", "UNKNOWN_TOOL"}, resultCodes(out.results)); diff != "" {
		t.Errorf("step 2 codes (-want +got):\n%s", diff)
	}
	// Another session has no such history.
	if got := names(e.resolve(t, "s-other", 1, openai).GetTools()); slices.Contains(got, "query_db") {
		t.Errorf("a fresh session's tool set = %v, want no query_db", got)
	}
}

func TestReleasingAToolSetStopsOnlyUnstartedCalls(t *testing.T) {
	e := start(t, "")
	started, release := make(chan struct{}, 1), make(chan struct{})
	runProvider(t, e.app.Addr(), gateTool("gate", started, release), constTool("later", "ran"))
	set := e.resolve(t, "s-release", 1, nil)
	out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-release", Turn: 1, Step: 1, ToolSetId: set.GetToolSetId(), MaxParallel: 1, Calls: []*toolsdv1.ToolCall{
		call("c1", "gate", `{}`), call("c2", "later", `{}`),
	}}, batchOptions{onAccepted: func(toolsdv1.ToolService_ExecuteBatchClient) {
		<-started
		if _, err := e.tools.ReleaseToolSet(context.Background(), &toolsdv1.ReleaseToolSetRequest{ToolSetId: set.GetToolSetId()}); err != nil {
			t.Errorf("ReleaseToolSet() = %v", err)
		}
		close(release)
	}})
	if diff := cmp.Diff([]string{"", "ABORTED_BEFORE_DISPATCH"}, resultCodes(out.results)); diff != "" {
		t.Errorf("codes (-want +got):\n%s", diff)
	}
	if got := out.results[0].GetContent(); got != "released" {
		t.Errorf("started call content = %q, want it to finish normally", got)
	}
}

func TestConditionErrorsFailActivation(t *testing.T) {
	e := start(t, "")
	runProvider(t, e.app.Addr(), constTool("picky", "ok", provider.WithCondition(`int(model.model) > 3`)))
	_, err := e.tools.ResolveToolSet(t.Context(), &toolsdv1.ResolveToolSetRequest{SessionId: "s", Model: &toolsdv1.ModelSelection{Model: "not-a-number"}})
	if status.Code(err) != codes.FailedPrecondition || reason(err) != "TOOL_ACTIVATION_FAILED" {
		t.Fatalf("ResolveToolSet() = %v, want FailedPrecondition with reason TOOL_ACTIVATION_FAILED", err)
	}
	if _, err := e.tools.ResolveToolSet(t.Context(), &toolsdv1.ResolveToolSetRequest{SessionId: "s", Model: &toolsdv1.ModelSelection{Model: "7"}}); err != nil {
		t.Errorf("ResolveToolSet(model 7) = %v, want success", err)
	}
}

func TestBadConditionIsRejectedAtRegistration(t *testing.T) {
	e := start(t, "")
	p, _ := runProvider(t, e.app.Addr(), constTool("fine", "ok"))
	_, err := e.tools.RegisterTool(t.Context(), &toolsdv1.RegisterToolRequest{ProviderId: p.ProviderID(), Tool: &toolsdv1.ToolDefinition{
		Name: "broken", ParametersJson: `{"type":"object"}`, Condition: `session.called("x") &&`,
	}})
	if status.Code(err) != codes.InvalidArgument || reason(err) != "INVALID_CONDITION" {
		t.Fatalf("RegisterTool(bad condition) = %v, want InvalidArgument INVALID_CONDITION", err)
	}
}

// TestToolSetEndingDuringApprovalStopsTheCall: a call waiting for its approval has not
// started; when its tool set ends meanwhile (a restriction on the scope, a release), the
// approved call must not reach the tool.
func TestToolSetEndingDuringApprovalStopsTheCall(t *testing.T) {
	for name, end := range map[string]func(t *testing.T, e *env, setID string){
		"restricted": func(t *testing.T, e *env, _ string) {
			if _, err := e.tools.Restrict(context.Background(), &toolsdv1.RestrictRequest{Scope: "agent", Deny: []string{"guarded"}}); err != nil {
				t.Errorf("Restrict() = %v", err)
			}
		},
		"released": func(t *testing.T, e *env, setID string) {
			if _, err := e.tools.ReleaseToolSet(context.Background(), &toolsdv1.ReleaseToolSetRequest{ToolSetId: setID}); err != nil {
				t.Errorf("ReleaseToolSet() = %v", err)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			e, ran := startGuarded(t)
			set, err := e.tools.ResolveToolSet(t.Context(), &toolsdv1.ResolveToolSetRequest{Scope: "agent", SessionId: "s-ask", Turn: 1, Step: 1})
			if err != nil {
				t.Fatalf("ResolveToolSet() = %v", err)
			}
			out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-ask", Scope: "agent", Turn: 1, Step: 1, ToolSetId: set.GetToolSetId(), Calls: []*toolsdv1.ToolCall{
				call("c1", "guarded", `{}`),
			}}, batchOptions{approve: func(r *toolsdv1.ApprovalRequest) *toolsdv1.ApprovalDecision {
				end(t, e, set.GetToolSetId())
				return &toolsdv1.ApprovalDecision{CallId: r.GetCallId(), Approved: true}
			}})
			if diff := cmp.Diff([]string{"ABORTED_BEFORE_DISPATCH"}, resultCodes(out.results)); diff != "" {
				t.Errorf("codes (-want +got):\n%s", diff)
			}
			if n := ran.Load(); n != 0 {
				t.Errorf("the tool ran %d times after its tool set ended, want 0", n)
			}
		})
	}
}

// startGuarded starts toolsd with a policy asking before every call of "guarded", a tool
// whose runs it counts.
func startGuarded(t *testing.T) (*env, *atomic.Int32) {
	t.Helper()
	e := start(t, `
policy:
  rules:
    - {tool: guarded, decision: ask}
`)
	ran := new(atomic.Int32)
	runProvider(t, e.app.Addr(), provider.NewTool("guarded", "Counts its runs.", func(context.Context, provider.Call, noArgs) (string, error) {
		ran.Add(1)
		return "ran", nil
	}))
	return e, ran
}

// TestRestrictionDuringApprovalStopsTheCall: without a tool set too, a tool restricted
// away while its call waited for a person's approval does not run: the restriction, an
// operator's later word, wins over the approval.
func TestRestrictionDuringApprovalStopsTheCall(t *testing.T) {
	e, ran := startGuarded(t)
	approve := func(r *toolsdv1.ApprovalRequest) *toolsdv1.ApprovalDecision {
		return &toolsdv1.ApprovalDecision{CallId: r.GetCallId(), Approved: true}
	}
	// Approved with nothing changed, it runs.
	out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-ask", Scope: "agent", Calls: []*toolsdv1.ToolCall{call("c0", "guarded", `{}`)}},
		batchOptions{approve: approve})
	if diff := cmp.Diff([]string{""}, resultCodes(out.results)); diff != "" {
		t.Fatalf("codes of the approved call (-want +got):\n%s", diff)
	}
	out = e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-ask", Scope: "agent", Step: 1, Calls: []*toolsdv1.ToolCall{call("c1", "guarded", `{}`)}},
		batchOptions{approve: func(r *toolsdv1.ApprovalRequest) *toolsdv1.ApprovalDecision {
			if _, err := e.tools.Restrict(context.Background(), &toolsdv1.RestrictRequest{Scope: "agent", Deny: []string{"guarded"}}); err != nil {
				t.Errorf("Restrict() = %v", err)
			}
			return approve(r)
		}})
	if diff := cmp.Diff([]string{"ABORTED_BEFORE_DISPATCH"}, resultCodes(out.results)); diff != "" {
		t.Errorf("codes (-want +got):\n%s", diff)
	}
	if n := ran.Load(); n != 1 {
		t.Errorf("the tool ran %d times, want once (not after its restriction)", n)
	}
}

// TestToolSetInUseDoesNotExpire: a tool set governs its batch until the batch ends; a
// call that runs longer than registry.tool_set_idle must not make the set expire under
// the batch's later calls. The registry's clock stands still but for the first call's
// run (on the real clock, a loaded machine that took longer than the idle time between
// ResolveToolSet and the batch saw the set expire before the batch began).
func TestToolSetInUseDoesNotExpire(t *testing.T) {
	var ran atomic.Int64 // how far the registry's clock has moved
	base := time.Now()
	e := start(t, `
registry: {tool_set_idle: 100ms}
`, app.WithRegistryClock(func() time.Time { return base.Add(time.Duration(ran.Load())) }))
	started, release := make(chan struct{}, 1), make(chan struct{})
	runProvider(t, e.app.Addr(), gateTool("long", started, release), constTool("after", "ran"))
	set := e.resolve(t, "s-idle", 1, nil)
	out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-idle", Turn: 1, Step: 1, ToolSetId: set.GetToolSetId(), MaxParallel: 1, Calls: []*toolsdv1.ToolCall{
		call("c1", "long", `{}`), call("c2", "after", `{}`),
	}}, batchOptions{onAccepted: func(toolsdv1.ToolService_ExecuteBatchClient) {
		<-started
		ran.Add(int64(time.Minute)) // the first call outlasts the idle time
		close(release)
	}})
	if diff := cmp.Diff([]string{"", ""}, resultCodes(out.results)); diff != "" {
		t.Errorf("codes (-want +got):\n%s", diff)
	}
}

// TestOversizedModelSelectionIsRefused: conditions run regular expressions over the
// model selection, and CEL charges a match's cost only after it ran, so a megabyte of
// model name would keep a condition like `model.model.matches(".{0,1000}x")` matching
// for minutes. ResolveToolSet refuses such a selection before any condition runs.
func TestOversizedModelSelectionIsRefused(t *testing.T) {
	e := start(t, "")
	runProvider(t, e.app.Addr(), constTool("picky", "ok", provider.WithCondition(`model.model.matches(".{0,1000}x")`)))
	long := strings.Repeat("a", 100_000)
	for field, m := range map[string]*toolsdv1.ModelSelection{
		"model.provider":         {Provider: long},
		"model.model":            {Model: long},
		"model.reasoning_effort": {ReasoningEffort: long},
	} {
		_, err := e.tools.ResolveToolSet(t.Context(), &toolsdv1.ResolveToolSetRequest{SessionId: "s", Model: m})
		if status.Code(err) != codes.InvalidArgument || reason(err) != "BAD_REQUEST" || !strings.Contains(status.Convert(err).Message(), field) {
			t.Errorf("ResolveToolSet(%s of 100000 bytes) = %v, want InvalidArgument BAD_REQUEST naming the field", field, err)
		}
	}
	if _, err := e.tools.ResolveToolSet(t.Context(), &toolsdv1.ResolveToolSetRequest{SessionId: "s", Model: &toolsdv1.ModelSelection{
		Provider: "openrouter", Model: "meta-llama/llama-3.1-405b-instruct:free", ReasoningEffort: "high",
	}}); err != nil {
		t.Errorf("ResolveToolSet(ordinary model) = %v, want success", err)
	}
}

// TestApprovedCallGoesToTheReconnectedProvider: a provider that reconnects while a call
// waits for approval, with the same definition, serves the approved call; it is not sent
// to the connection that went away (PROVIDER_GONE).
func TestApprovedCallGoesToTheReconnectedProvider(t *testing.T) {
	e := start(t, `
policy:
  rules:
    - {tool: guarded, decision: ask}
`)
	served := func(by string) provider.Tool {
		return provider.NewTool("guarded", "Counts its runs.", func(context.Context, provider.Call, noArgs) (string, error) {
			return "ran by " + by, nil
		})
	}
	_, stopFirst := runProvider(t, e.app.Addr(), served("first"))
	out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-reconnect", Calls: []*toolsdv1.ToolCall{call("c1", "guarded", `{}`)}},
		batchOptions{approve: func(r *toolsdv1.ApprovalRequest) *toolsdv1.ApprovalDecision {
			stopFirst()
			waitFor(t, "the first provider's tool to go", func() bool { return !slices.Contains(e.schemaNames(t, ""), "guarded") })
			runProvider(t, e.app.Addr(), served("second"))
			return &toolsdv1.ApprovalDecision{CallId: r.GetCallId(), Approved: true}
		}})
	if len(out.results) != 1 || out.results[0].GetIsError() || out.results[0].GetContent() != "ran by second" {
		t.Errorf("results = %v, want one success from the second provider", out.results)
	}
}

// TestApprovedCallOfAGoneProviderIsUnavailable: a provider that disconnects while a call
// waits for approval, and does not come back, leaves the approved call with
// PROVIDER_UNAVAILABLE, as a call that resolved its tool just before the disconnect gets:
// its tool was not restricted away nor changed (ABORTED_BEFORE_DISPATCH), its provider
// is not connected.
func TestApprovedCallOfAGoneProviderIsUnavailable(t *testing.T) {
	e := start(t, `
policy:
  rules:
    - {tool: guarded, decision: ask}
`)
	_, stop := runProvider(t, e.app.Addr(), constTool("guarded", "ran"))
	out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-gone", Calls: []*toolsdv1.ToolCall{call("c1", "guarded", `{}`)}},
		batchOptions{approve: func(r *toolsdv1.ApprovalRequest) *toolsdv1.ApprovalDecision {
			stop()
			waitFor(t, "the provider's tool to go", func() bool { return !slices.Contains(e.schemaNames(t, ""), "guarded") })
			return &toolsdv1.ApprovalDecision{CallId: r.GetCallId(), Approved: true}
		}})
	if diff := cmp.Diff([]string{"PROVIDER_UNAVAILABLE"}, resultCodes(out.results)); diff != "" {
		t.Errorf("codes (-want +got):\n%s", diff)
	}
}

// TestReleaseToolSetOfAnEndedSet: ReleaseToolSet of a set that has ended (released
// already, or invalidated by a restriction of its scope) or that never existed is
// NOT_FOUND, reason TOOL_SET_GONE, as the proto says.
func TestReleaseToolSetOfAnEndedSet(t *testing.T) {
	e := start(t, "")
	release := func(id string) error {
		_, err := e.tools.ReleaseToolSet(t.Context(), &toolsdv1.ReleaseToolSetRequest{ToolSetId: id})
		return err
	}
	resolve := func() string {
		set, err := e.tools.ResolveToolSet(t.Context(), &toolsdv1.ResolveToolSetRequest{Scope: "team", Turn: 1, Step: 1})
		if err != nil {
			t.Fatalf("ResolveToolSet() = %v", err)
		}
		return set.GetToolSetId()
	}
	released := resolve()
	if err := release(released); err != nil {
		t.Fatalf("ReleaseToolSet() = %v", err)
	}
	invalidated := resolve()
	if _, err := e.tools.Restrict(t.Context(), &toolsdv1.RestrictRequest{Scope: "team", Deny: []string{"anything"}}); err != nil {
		t.Fatalf("Restrict() = %v", err)
	}
	for what, id := range map[string]string{"released": released, "invalidated": invalidated, "unknown": "ts-never-resolved"} {
		if err := release(id); status.Code(err) != codes.NotFound || reason(err) != "TOOL_SET_GONE" {
			t.Errorf("ReleaseToolSet(a %s set) = %v, want NotFound with reason TOOL_SET_GONE", what, err)
		}
	}
}
