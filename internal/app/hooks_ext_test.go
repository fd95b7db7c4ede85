package app_test

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/toolsd/toolsd/examples/hook/examplehook"
	"github.com/toolsd/toolsd/examples/provider/exampletools"
	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/app"
)

// hooksConnected reads the hooks gauge from /metrics.
func hooksConnected(t *testing.T, e *env) string {
	t.Helper()
	_, body := scrape(t, e.app.AdminAddr(), "/metrics")
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "toolsd_hook_hooks_connected ") {
			return strings.TrimPrefix(line, "toolsd_hook_hooks_connected ")
		}
	}
	return ""
}

// TestRemoteHookInAnotherProcess runs examples/hook as its own process: it denies a call
// (privately), rewrites an echo result and adds context; other calls run untouched.
func TestRemoteHookInAnotherProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the example hook binary")
	}
	bin := filepath.Join(t.TempDir(), "hook")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/toolsd/toolsd/examples/hook").CombinedOutput(); err != nil {
		t.Fatalf("building examples/hook: %v\n%s", err, out)
	}
	e := start(t, "")
	runProvider(t, e.app.Addr(), exampletools.Tools(filepath.Join(t.TempDir(), "notes.txt"))...)
	hookProc := exec.Command(bin, "-addr", e.app.Addr())
	hookProc.Stdout, hookProc.Stderr = os.Stderr, os.Stderr
	if err := hookProc.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hookProc.Process.Kill(); _ = hookProc.Wait() })
	waitFor(t, "the hook to connect", func() bool { return hooksConnected(t, e) == "1" })

	out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-hook", Calls: []*toolsdv1.ToolCall{
		call("c1", "echo", `{"text":"rm -rf /"}`),
		call("c2", "echo", `{"text":"shout: hello"}`),
		call("c3", "add", `{"a":1,"b":2}`),
	}}, batchOptions{})
	if diff := cmp.Diff([]string{"DENIED", "", ""}, resultCodes(out.results)); diff != "" {
		t.Fatalf("codes (-want +got):\n%s", diff)
	}
	denied := out.results[0]
	if denied.GetContent() != "Error: call denied by policy" || !strings.Contains(denied.GetError().GetReason(), examplehook.DenyReason) {
		t.Errorf("denied result = %v, want generic model content and the private reason for users", denied)
	}
	if got := out.results[1].GetContent(); got != "SHOUT: HELLO" {
		t.Errorf("echo content = %q, want the hook's replacement", got)
	}
	if got := out.results[2].GetContent(); got != "3" {
		t.Errorf("add content = %q, want 3 (untouched)", got)
	}
	// The denied echo never ran, so only the second one reached post-execute.
	if want := []string{examplehook.EchoContext}; !slices.Equal(out.settled.GetAdditionalContexts(), want) {
		t.Errorf("additional contexts = %q, want %q", out.settled.GetAdditionalContexts(), want)
	}
	events := e.readSession(t, "s-hook")
	if n := len(events); n != 7 || events[6].GetType() != "user/message" || events[6].GetSourceEventSeqs()[0] != events[4].GetSeq() {
		t.Errorf("session log = %v, want 3 calls, 3 results, then the context citing echo's result", events)
	}
}

// TestKilledHookFailsClosed: a hook that dies while a call waits for its answer denies
// that call with POLICY_UNAVAILABLE.
func TestKilledHookFailsClosed(t *testing.T) {
	e := start(t, "limits: {hook_timeout: 1m}\n")
	runProvider(t, e.app.Addr(), exampletools.Tools(filepath.Join(t.TempDir(), "notes.txt"))...)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hookConn := dial(t, e.app.Addr())
	stream, err := toolsdv1.NewHookServiceClient(hookConn).Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&toolsdv1.HookServiceConnectRequest{Msg: &toolsdv1.HookServiceConnectRequest_Hello{Hello: &toolsdv1.HookHello{
		Name:          "silent",
		Subscriptions: []*toolsdv1.HookSubscription{{Stage: toolsdv1.HookStage_HOOK_STAGE_PRE_EXECUTE}},
	}}}); err != nil {
		t.Fatal(err)
	}
	if m, err := stream.Recv(); err != nil || m.GetWelcome() == nil {
		t.Fatalf("hook hello answered %v, %v; want a welcome", m, err)
	}
	go func() {
		// The hook receives the request and dies instead of answering.
		if m, err := stream.Recv(); err == nil && m.GetRequest() != nil {
			cancel()
		}
	}()
	out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-hook-dead", Calls: []*toolsdv1.ToolCall{call("c1", "echo", `{"text":"hi"}`)}}, batchOptions{})
	if got := resultCodes(out.results); !slices.Equal(got, []string{"POLICY_UNAVAILABLE"}) {
		t.Fatalf("codes = %v, want [POLICY_UNAVAILABLE]", got)
	}
	waitFor(t, "the dead hook to be dropped", func() bool { return hooksConnected(t, e) == "0" })
	out = e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-hook-dead", Calls: []*toolsdv1.ToolCall{call("c2", "echo", `{"text":"hi"}`)}}, batchOptions{})
	if got := resultCodes(out.results); !slices.Equal(got, []string{""}) {
		t.Errorf("codes after the hook is gone = %v, want the call to run", got)
	}
}

const tokenHookB = "hook-b-token-6d2f8a1c3e5b7094"

// connectHookAs opens a hook stream as the identity of token and says hello; it
// returns nil once welcomed (the stream stays open until the test ends) or the
// stream's error.
func connectHookAs(t *testing.T, addr, token, name string) error {
	t.Helper()
	conn := dialWith(t, addr, grpc.WithPerRPCCredentials(bearer(token)))
	stream, err := toolsdv1.NewHookServiceClient(conn).Connect(t.Context())
	if err != nil {
		return err
	}
	if err := stream.Send(&toolsdv1.HookServiceConnectRequest{Msg: &toolsdv1.HookServiceConnectRequest_Hello{Hello: &toolsdv1.HookHello{
		Name:          name,
		Subscriptions: []*toolsdv1.HookSubscription{{Stage: toolsdv1.HookStage_HOOK_STAGE_PRE_EXECUTE}},
	}}}); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	m, err := stream.Recv()
	if err != nil {
		return err
	}
	if m.GetWelcome() == nil {
		t.Fatalf("hook hello answered %v, want a welcome", m)
	}
	return nil
}

// TestTenantHooksHaveTheirOwnLimit: the hooks of an identity confined to a tenant
// count against limits.max_scoped_hooks only, so a tenant that fills its places does
// not keep the operator's hook out.
func TestTenantHooksHaveTheirOwnLimit(t *testing.T) {
	auth := tenantAuthWith(t, tokenHookB+" hook-b\n", "    - {identity: hook-b, role: hook, scopes: [\"tenant-b/**\"]}\n")
	e := start(t, auth+"limits: {max_hooks: 1, max_scoped_hooks: 1}\n")
	if err := connectHookAs(t, e.app.Addr(), tokenHookB, "tenant-b-1"); err != nil {
		t.Fatalf("first tenant-b hook: %v", err)
	}
	if err := connectHookAs(t, e.app.Addr(), tokenHookB, "tenant-b-2"); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("second tenant-b hook: %v, want ResourceExhausted", err)
	}
	if err := connectHookAs(t, e.app.Addr(), tokenOperator, "operator-policy"); err != nil {
		t.Errorf("operator's hook with the tenant's places full: %v, want a welcome", err)
	}
}

// TestRequiredHookFromConfig: hooks.required fails closed the calls of a required hook
// that is not connected, and lets them run once it is.
func TestRequiredHookFromConfig(t *testing.T) {
	e := start(t, "hooks:\n  required:\n    - {name: policy, stage: pre_execute, tool: echo}\n")
	runProvider(t, e.app.Addr(), exampletools.Tools(filepath.Join(t.TempDir(), "notes.txt"))...)
	out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-required", Calls: []*toolsdv1.ToolCall{
		call("c1", "echo", `{"text":"hi"}`),
		call("c2", "add", `{"a":1,"b":2}`),
	}}, batchOptions{})
	if got := resultCodes(out.results); !slices.Equal(got, []string{"POLICY_UNAVAILABLE", ""}) {
		t.Fatalf("codes without the required hook = %v, want [POLICY_UNAVAILABLE ]", got)
	}

	connectPolicyHook(t, e.app.Addr(), false, toolsdv1.HookVerdict_HOOK_VERDICT_ALLOW)
	out = e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-required", Calls: []*toolsdv1.ToolCall{call("c3", "echo", `{"text":"hi"}`)}}, batchOptions{})
	if got := resultCodes(out.results); !slices.Equal(got, []string{""}) {
		t.Errorf("codes with the required hook connected = %v, want the call to run", got)
	}
}

// TestRequiredHookFailOpenFailsClosed: a required hook that connects with fail_open
// fails closed for the calls hooks.required covers (here with a verdict that does not
// belong to pre-execute), and open for the others.
func TestRequiredHookFailOpenFailsClosed(t *testing.T) {
	e := start(t, "hooks:\n  required:\n    - {name: policy, stage: pre_execute, tool: echo}\n")
	runProvider(t, e.app.Addr(), exampletools.Tools(filepath.Join(t.TempDir(), "notes.txt"))...)
	connectPolicyHook(t, e.app.Addr(), true, toolsdv1.HookVerdict_HOOK_VERDICT_BLOCK)
	out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-required-open", Calls: []*toolsdv1.ToolCall{
		call("c1", "echo", `{"text":"hi"}`),
		call("c2", "add", `{"a":1,"b":2}`),
	}}, batchOptions{})
	if got := resultCodes(out.results); !slices.Equal(got, []string{"POLICY_UNAVAILABLE", ""}) {
		t.Errorf("codes = %v, want [POLICY_UNAVAILABLE ]", got)
	}
}

// connectPolicyHook connects a hook named "policy", subscribed to every call before
// execution, that answers every request with v; it returns once welcomed.
func connectPolicyHook(t *testing.T, addr string, failOpen bool, v toolsdv1.HookVerdict) {
	t.Helper()
	answerHook(t, dial(t, addr), &toolsdv1.HookHello{
		Name:          "policy",
		Subscriptions: []*toolsdv1.HookSubscription{{Stage: toolsdv1.HookStage_HOOK_STAGE_PRE_EXECUTE}},
		FailOpen:      failOpen,
	}, func(req *toolsdv1.HookRequest) *toolsdv1.HookDecision {
		return &toolsdv1.HookDecision{RequestId: req.GetRequestId(), Verdict: v}
	})
}

// TestHookSeriesOutliveTheirHook: a hook that failed closed and then left keeps its
// series, with those failures, for the keep time (WithToolSeriesKeep), bounded like
// retired tools' (WithRetiredToolSeries): they were deleted as it left, so failures not
// yet scraped were lost and ToolsdHookFailingClosed could miss a hook failing closed
// just before it was killed.
func TestHookSeriesOutliveTheirHook(t *testing.T) {
	e := start(t, "", app.WithToolSeriesKeep(time.Hour), app.WithRetiredToolSeries(1))
	runProvider(t, e.app.Addr(), echoTool())
	closed := []string{"hook", "failing", "stage", "pre_execute", "outcome", "fail_closed"}
	conn := dial(t, e.app.Addr())
	answerHook(t, conn, &toolsdv1.HookHello{
		Name: "failing", Subscriptions: []*toolsdv1.HookSubscription{{Stage: toolsdv1.HookStage_HOOK_STAGE_PRE_EXECUTE}},
	}, func(req *toolsdv1.HookRequest) *toolsdv1.HookDecision {
		// Not a verdict before execution: the hook cannot be used, and fails closed.
		return &toolsdv1.HookDecision{RequestId: req.GetRequestId(), Verdict: toolsdv1.HookVerdict_HOOK_VERDICT_BLOCK}
	})
	out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-hook-series", Calls: []*toolsdv1.ToolCall{call("c1", "echo", `{"text":"hi"}`)}}, batchOptions{})
	if got := resultCodes(out.results); !slices.Equal(got, []string{"POLICY_UNAVAILABLE"}) {
		t.Fatalf("codes = %v, want [POLICY_UNAVAILABLE]", got)
	}
	_ = conn.Close()
	waitFor(t, "the failing hook to leave", func() bool { return metricValue(t, e.app, "toolsd_hook_hooks_connected") == 0 })
	if got := metricValue(t, e.app, "toolsd_hook_failures_total", closed...); got != 1 {
		t.Errorf("toolsd_hook_failures_total{hook=failing,fail_closed} after the hook left = %v, want 1", got)
	}
	// Another hook leaving takes the one place: the first name's series go.
	other := dial(t, e.app.Addr())
	answerHook(t, other, &toolsdv1.HookHello{
		Name: "other", Subscriptions: []*toolsdv1.HookSubscription{{Stage: toolsdv1.HookStage_HOOK_STAGE_PRE_EXECUTE}},
	}, func(req *toolsdv1.HookRequest) *toolsdv1.HookDecision {
		return &toolsdv1.HookDecision{RequestId: req.GetRequestId(), Verdict: toolsdv1.HookVerdict_HOOK_VERDICT_ALLOW}
	})
	_ = other.Close()
	waitFor(t, "the failing hook's series to go", func() bool {
		return !hasSeries(t, e.app, "toolsd_hook_failures_total", "hook", "failing")
	})
	if !hasSeries(t, e.app, "toolsd_hook_failures_total", "hook", "other") {
		t.Error("the series of the hook that left last were dropped; want them kept for the keep time")
	}
}
