package hook_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/hook"
	"github.com/toolsd/toolsd/internal/pipeline"
	"github.com/toolsd/toolsd/internal/tool"
)

func TestPreExecuteVerdicts(t *testing.T) {
	tests := map[string]struct {
		decision *toolsdv1.HookDecision
		want     pipeline.Verdict
		failures int
	}{
		"allow": {
			decision: verdict(toolsdv1.HookVerdict_HOOK_VERDICT_ALLOW, ""),
			want:     pipeline.Verdict{Decision: pipeline.Allow},
		},
		"unspecified abstains": {
			decision: verdict(toolsdv1.HookVerdict_HOOK_VERDICT_UNSPECIFIED, "ignored"),
			want:     pipeline.Verdict{},
		},
		"deny": {
			decision: verdict(toolsdv1.HookVerdict_HOOK_VERDICT_DENY, "no deleting"),
			want:     pipeline.Verdict{Decision: pipeline.Deny, Reason: "no deleting", UserReason: `hook "policy-x": no deleting`},
		},
		"deny without reason": {
			decision: verdict(toolsdv1.HookVerdict_HOOK_VERDICT_DENY, ""),
			want:     pipeline.Verdict{Decision: pipeline.Deny, UserReason: `hook "policy-x" denied the call`},
		},
		"private deny": {
			decision: &toolsdv1.HookDecision{Verdict: toolsdv1.HookVerdict_HOOK_VERDICT_DENY, Reason: "user 42 is banned", Private: true},
			want: pipeline.Verdict{Decision: pipeline.Deny, Reason: "user 42 is banned", Private: true,
				UserReason: `hook "policy-x": user 42 is banned`},
		},
		"ask": {
			decision: verdict(toolsdv1.HookVerdict_HOOK_VERDICT_ASK, "really?"),
			want:     pipeline.Verdict{Decision: pipeline.Ask, Reason: "really?", UserReason: `hook "policy-x": really?`},
		},
		"post-execute verdict is a protocol error": {
			decision: verdict(toolsdv1.HookVerdict_HOOK_VERDICT_REPLACE, ""),
			want: pipeline.Verdict{Decision: pipeline.Deny, Reason: "call denied: a policy hook is unavailable",
				UserReason: `hook "policy-x": protocol error: verdict HOOK_VERDICT_REPLACE is not valid before execution`,
				Code:       tool.CodePolicyUnavailable},
			failures: 1,
		},
		"unknown verdict is a protocol error": {
			decision: verdict(toolsdv1.HookVerdict(42), ""),
			want: pipeline.Verdict{Decision: pipeline.Deny, Reason: "call denied: a policy hook is unavailable",
				UserReason: `hook "policy-x": protocol error: verdict 42 is not valid before execution`,
				Code:       tool.CodePolicyUnavailable},
			failures: 1,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			e.connect(t, helloFor("policy-x", sub(pre, "", "", 0)), always(tc.decision))
			got := e.hub.PreExecute().PreExecute(t.Context(), newExec("echo", `{}`), newTool("echo"))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("PreExecute() (-want +got):\n%s", diff)
			}
			if n := e.obs.get("failure:policy-x:pre_execute:false"); n != tc.failures {
				t.Errorf("failures = %d, want %d", n, tc.failures)
			}
		})
	}
}

// TestPreExecuteResults checks what the model and the user see, through a pipeline.
func TestPreExecuteResults(t *testing.T) {
	approve := approverFunc(func(context.Context, tool.ApprovalRequest) (tool.ApprovalDecision, error) {
		return tool.ApprovalDecision{Approved: true}, nil
	})
	tests := map[string]struct {
		decision   *toolsdv1.HookDecision
		approver   tool.Approver
		wantResult tool.Result
		dispatched int
	}{
		"deny shows the reason to the model": {
			decision:   verdict(toolsdv1.HookVerdict_HOOK_VERDICT_DENY, "no deleting"),
			wantResult: failure(tool.CodeDenied, "no deleting", `hook "policy-x": no deleting`),
		},
		"a long reason is cut": {
			decision: verdict(toolsdv1.HookVerdict_HOOK_VERDICT_DENY, strings.Repeat("é", 5000)),
			wantResult: failure(tool.CodeDenied, strings.Repeat("é", (hook.MaxReasonBytes-len("…"))/2)+"…",
				`hook "policy-x": `+strings.Repeat("é", (hook.MaxReasonBytes-len("…"))/2)+"…"),
		},
		"private deny shows a generic message": {
			decision:   &toolsdv1.HookDecision{Verdict: toolsdv1.HookVerdict_HOOK_VERDICT_DENY, Reason: "user 42 is banned", Private: true},
			wantResult: failure(tool.CodeDenied, "call denied by policy", `hook "policy-x": user 42 is banned`),
		},
		"allow runs the call": {
			decision:   verdict(toolsdv1.HookVerdict_HOOK_VERDICT_ALLOW, ""),
			wantResult: tool.Result{Content: "ok"},
			dispatched: 1,
		},
		"ask without approver": {
			decision:   verdict(toolsdv1.HookVerdict_HOOK_VERDICT_ASK, "really?"),
			wantResult: failure(tool.CodeApprovalUnavailable, "call requires approval but no approver is available", ""),
		},
		"ask approved runs the call": {
			decision:   verdict(toolsdv1.HookVerdict_HOOK_VERDICT_ASK, "really?"),
			approver:   approve,
			wantResult: tool.Result{Content: "ok"},
			dispatched: 1,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			e.connect(t, helloFor("policy-x", sub(pre, "", "", 0)), always(tc.decision))
			disp := &dispatcher{}
			x := newExec("echo", `{}`)
			x.Approver = tc.approver
			got := e.newPipeline(disp).Run(t.Context(), x)
			if diff := cmp.Diff(tc.wantResult, got); diff != "" {
				t.Errorf("Run() (-want +got):\n%s", diff)
			}
			if n := disp.count(); n != tc.dispatched {
				t.Errorf("dispatched %d times, want %d", n, tc.dispatched)
			}
		})
	}
}

func failure(code tool.Code, msg, reason string) tool.Result {
	r := tool.FailureWithReason(code, msg, reason)
	r.Err.Tool = "echo"
	return r
}

func TestPreExecuteAskQuestion(t *testing.T) {
	e := newEnv(t)
	e.connect(t, helloFor("policy-x", sub(pre, "", "", 0)), always(verdict(toolsdv1.HookVerdict_HOOK_VERDICT_ASK, "delete 3 files?")))
	asked := make(chan string, 1)
	x := newExec("echo", `{}`)
	x.Approver = approverFunc(func(_ context.Context, req tool.ApprovalRequest) (tool.ApprovalDecision, error) {
		asked <- req.Reason
		return tool.ApprovalDecision{}, nil
	})
	r := e.newPipeline(&dispatcher{}).Run(t.Context(), x)
	if r.Code() != tool.CodeApprovalDenied {
		t.Errorf("Run() code = %q, want %q", r.Code(), tool.CodeApprovalDenied)
	}
	if q := <-asked; q != "delete 3 files?" {
		t.Errorf("approval question = %q, want the hook's reason", q)
	}
}

// TestPreExecutePriority checks that verdicts combine in priority order, whichever hook
// answers first.
func TestPreExecutePriority(t *testing.T) {
	tests := map[string]struct {
		prioA, prioB int32
		vA, vB       toolsdv1.HookVerdict
		want         pipeline.Verdict
	}{
		"lower priority's deny is reported": {
			prioA: 10, prioB: 1,
			vA: toolsdv1.HookVerdict_HOOK_VERDICT_DENY, vB: toolsdv1.HookVerdict_HOOK_VERDICT_DENY,
			want: pipeline.Verdict{Decision: pipeline.Deny, Reason: "from b", UserReason: `hook "b": from b`},
		},
		"priority order, not connection order": {
			prioA: -5, prioB: 1,
			vA: toolsdv1.HookVerdict_HOOK_VERDICT_ASK, vB: toolsdv1.HookVerdict_HOOK_VERDICT_ASK,
			want: pipeline.Verdict{Decision: pipeline.Ask, Reason: "from a", UserReason: `hook "a": from a`},
		},
		"deny beats an earlier allow": {
			prioA: 1, prioB: 2,
			vA: toolsdv1.HookVerdict_HOOK_VERDICT_ALLOW, vB: toolsdv1.HookVerdict_HOOK_VERDICT_DENY,
			want: pipeline.Verdict{Decision: pipeline.Deny, Reason: "from b", UserReason: `hook "b": from b`},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			// a answers at once; b only after a has answered, so a's verdict is
			// always the first to arrive.
			aDone := make(chan struct{}, 16)
			e.connect(t, helloFor("a", sub(pre, "", "", tc.prioA)), func(*toolsdv1.HookRequest) *toolsdv1.HookDecision {
				defer func() { aDone <- struct{}{} }()
				return verdict(tc.vA, "from a")
			})
			e.connect(t, helloFor("b", sub(pre, "", "", tc.prioB)), func(*toolsdv1.HookRequest) *toolsdv1.HookDecision {
				<-aDone
				return verdict(tc.vB, "from b")
			})
			got := e.hub.PreExecute().PreExecute(t.Context(), newExec("echo", `{}`), newTool("echo"))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("PreExecute() (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPreExecuteFilters checks tool and scope globs: a call outside a hook's filters
// is not decided by it (the hook denies everything it sees) and is never sent to it.
func TestPreExecuteFilters(t *testing.T) {
	tests := map[string]struct {
		toolGlob, scopeGlob string
		call                *tool.Exec
		want                bool
	}{
		"all tools":              {call: newExec("ls", `{}`), want: true},
		"star is all tools":      {toolGlob: "*", call: newExec("ls", `{}`), want: true},
		"tool glob matches":      {toolGlob: "ec*", call: newExec("echo", `{}`), want: true},
		"tool glob misses":       {toolGlob: "ec*", call: newExec("ls", `{}`)},
		"exact tool":             {toolGlob: "echo", call: newExec("echo", `{}`), want: true},
		"scope glob matches":     {scopeGlob: "tenant-a/*", call: newExec("ls", `{}`), want: true},
		"scope glob misses":      {scopeGlob: "tenant-b/*", call: newExec("ls", `{}`)},
		"double star covers all": {scopeGlob: "tenant-a/**", call: withScope(newExec("ls", `{}`), "tenant-a/x/y"), want: true},
		"double star covers its root": {
			scopeGlob: "tenant-a/**", call: withScope(newExec("ls", `{}`), "tenant-a"), want: true,
		},
		"double star stays in its tenant": {scopeGlob: "tenant-a/**", call: withScope(newExec("ls", `{}`), "tenant-ab")},
		"global scope with empty glob":    {call: withScope(newExec("ls", `{}`), ""), want: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			h := e.connect(t, helloFor("f", sub(pre, tc.toolGlob, tc.scopeGlob, 0)),
				always(verdict(toolsdv1.HookVerdict_HOOK_VERDICT_DENY, "filtered in")))
			got := e.hub.PreExecute().PreExecute(t.Context(), tc.call, newTool(tc.call.Name))
			if reached := got.Decision == pipeline.Deny; reached != tc.want {
				t.Errorf("PreExecute(%s in %q) = %+v, hook reached = %t, want %t", tc.call.Name, tc.call.Scope, got, reached, tc.want)
			}
			if tc.want {
				return
			}
			if got != (pipeline.Verdict{}) {
				t.Errorf("PreExecute() = %+v, want abstain when no hook subscribes", got)
			}
			select {
			case r := <-h.reqs:
				t.Errorf("filtered hook received %v", r)
			default:
			}
		})
	}
}

func TestPreExecuteNoHooks(t *testing.T) {
	e := newEnv(t)
	e.connect(t, helloFor("post-only", sub(post, "", "", 0)), nil)
	if got := e.hub.PreExecute().PreExecute(t.Context(), newExec("echo", `{}`), newTool("echo")); got != (pipeline.Verdict{}) {
		t.Errorf("PreExecute() = %+v, want abstain", got)
	}
}

// TestPreExecuteRequest checks that the whole batch context reaches the hook.
func TestPreExecuteRequest(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	e := newEnv(t, hook.WithClock(func() time.Time { return now }), hook.WithTimeout(3*time.Second))
	h := e.connect(t, helloFor("ctx", sub(pre, "", "", 0)), always(verdict(toolsdv1.HookVerdict_HOOK_VERDICT_ALLOW, "")))
	x := newExec("echo", `{"text":"hi"}`)
	x.Index, x.Siblings = 2, []string{"ls", "cat", "echo"}
	_ = e.hub.PreExecute().PreExecute(t.Context(), x, newTool("echo"))
	got := h.next()
	want := &toolsdv1.HookRequest{
		RequestId: got.GetRequestId(),
		Stage:     pre,
		Call: &toolsdv1.HookCall{SessionId: "s1", Scope: "tenant-a/agent", BatchId: "b1", Turn: 2, Step: 3, Index: 2,
			CallId: "c1", Tool: "echo", ArgumentsJson: `{"text":"hi"}`, SiblingTools: []string{"ls", "cat", "echo"}},
		Deadline: timestamppb.New(now.Add(3 * time.Second)),
	}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("request (-want +got):\n%s", diff)
	}
	if got.GetRequestId() == 0 {
		t.Error("request id is 0")
	}
}

// TestPreExecuteInvalidUTF8 checks that arguments that are not valid UTF-8 still reach
// the hook (a proto string that is not would break the stream).
func TestPreExecuteInvalidUTF8(t *testing.T) {
	e := newEnv(t)
	h := e.connect(t, helloFor("utf8", sub(pre, "", "", 0)), always(verdict(toolsdv1.HookVerdict_HOOK_VERDICT_ALLOW, "")))
	got := e.hub.PreExecute().PreExecute(t.Context(), newExec("echo", "{\"t\":\"\xff\"}"), newTool("echo"))
	if got.Decision != pipeline.Allow {
		t.Errorf("PreExecute() = %+v, want allow", got)
	}
	if args := h.next().GetCall().GetArgumentsJson(); !strings.Contains(args, "\uFFFD") {
		t.Errorf("arguments_json = %q, want the invalid byte replaced", args)
	}
}
