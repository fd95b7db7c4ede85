package policy_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/toolsd/toolsd/internal/pipeline"
	"github.com/toolsd/toolsd/internal/pipeline/policy"
	"github.com/toolsd/toolsd/internal/tool"
)

const guardPolicy = `
rules:
  - tool: "*"
    decision: allow
  - tool: rm
    decision: ask
    reason: "rm deletes files"
guards:
  - scope: "**"
    tool: shell
    when: 'args.command.contains("rm -rf")'
    reason: "shell may not rm -rf"
    user_reason: "recursive delete"
  - tool: rm
    when: 'args.path.startsWith("/etc")'
    reason: "matched the secrets list, entry 7"
    user_reason: "rm of a protected path"
    private: true
  - scope: "global/agents/intern"
    tool: "*"
`

func TestParseGuards(t *testing.T) {
	s := mustParse(t, guardPolicy)
	gs := s.Guards()
	if len(gs) != 3 || s.Rules() != 2 {
		t.Fatalf("Parse() = %d rules, %d guards; want 2, 3", s.Rules(), len(gs))
	}
	for i, want := range []string{"guards[0]", "guards[1]", "guards[2]"} {
		if gs[i].Name() != want {
			t.Errorf("Guards()[%d].Name() = %q, want %q", i, gs[i].Name(), want)
		}
	}
	deny := func(reason, user string, private bool) pipeline.Verdict {
		return pipeline.Verdict{Decision: pipeline.Deny, Reason: reason, UserReason: user, Private: private}
	}
	tests := map[string]struct {
		guard             int
		scope, name, args string
		want              pipeline.Verdict
	}{
		"condition true":       {guard: 0, scope: "global/a", name: "shell", args: `{"command":"rm -rf /"}`, want: deny("shell may not rm -rf", "recursive delete", false)},
		"condition false":      {guard: 0, scope: "global/a", name: "shell", args: `{"command":"ls"}`},
		"other tool":           {guard: 0, scope: "global/a", name: "bash", args: `{"command":"rm -rf /"}`},
		"private":              {guard: 1, scope: "global", name: "rm", args: `{"path":"/etc/passwd"}`, want: deny("matched the secrets list, entry 7", "rm of a protected path", true)},
		"no condition":         {guard: 2, scope: "global/agents/intern", name: "echo", args: `{}`, want: deny("", "", false)},
		"no condition, scoped": {guard: 2, scope: "global/agents/other", name: "echo", args: `{}`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := gs[tc.guard].Guard(t.Context(), exec(tc.scope, tc.name, tc.args), nil); got != tc.want {
				t.Errorf("Guards()[%d].Guard(%s, %s, %s) = %+v, want %+v", tc.guard, tc.scope, tc.name, tc.args, got, tc.want)
			}
		})
	}
	var nilSet *policy.Set
	if gs := nilSet.Guards(); gs != nil {
		t.Errorf("nil Set Guards() = %v, want none", gs)
	}
	if gs := mustParse(t, "rules: []\n").Guards(); gs != nil {
		t.Errorf("Guards() of a set without guards = %v, want none", gs)
	}
}

func TestParseGuardErrors(t *testing.T) {
	tests := map[string]parseErrorCase{
		"decision": {
			src:  "guards:\n  - tool: echo\n    decision: deny\n",
			want: "config.yaml:3:15: policy.guards[0].decision: a guard only denies and takes no decision (allow and ask are for rules)",
		},
		"bad tool glob": {
			src:  "guards:\n  - tool: \"[bad\"\n",
			want: `config.yaml:2:11: policy.guards[0].tool: bad glob "[bad": syntax error in pattern`,
		},
		"scope that never matches": {
			src:  "guards:\n  - scope: \"/support/**\"\n",
			want: `config.yaml:2:12: policy.guards[0].scope: bad glob "/support/**": can never match: no scope has an empty segment (a leading, trailing or doubled "/"; the global scope is "")`,
		},
		"CEL not bool": {
			src:  "guards:\n  - tool: echo\n  - when: 'args.text + \"x\"'\n",
			want: "config.yaml:3:11: policy.guards[1].when: expression has type string, want bool",
		},
		"CEL syntax": {
			src:  "guards:\n  - when: 'args.text +'\n",
			want: "config.yaml:2:11: policy.guards[0].when: ERROR: <input>:1:12: Syntax error…",
		},
		"unknown field": {
			src:  "guards:\n  - tool: echo\n    verdict: deny\n",
			want: "config.yaml:3:5: policy.guards[0].verdict: unknown field",
		},
		"private not bool": {
			src:  "guards:\n  - private: sure\n",
			want: "config.yaml:2:14: policy.guards[0].private: must be true or false",
		},
		"not a list": {
			src:  "guards: {tool: echo}\n",
			want: "config.yaml:1:9: policy.guards: must be a list of guards",
		},
		"item not a mapping": {
			src:  "guards:\n  - echo\n",
			want: "config.yaml:2:5: policy.guards[0]: must be a mapping",
		},
	}
	checkParseErrors(t, tests)
}

func TestGuardsInPipeline(t *testing.T) {
	s := mustParse(t, guardPolicy+`
  - tool: echo
    when: 'args.text.contains("forbidden")'
`)
	res := resolverFunc(func(_ context.Context, c *tool.Call) (pipeline.Tool, error) {
		return &stubTool{def: tool.Definition{Name: c.Name}}, nil
	})
	dispatched := 0
	disp := dispatcherFunc(func(context.Context, pipeline.Tool, *tool.Exec) tool.Result {
		dispatched++
		return tool.Result{Content: "ok"}
	})
	p := pipeline.New(res, disp, pipeline.WithPolicy(s))
	approve := approverFunc(func(context.Context, tool.ApprovalRequest) (tool.ApprovalDecision, error) {
		return tool.ApprovalDecision{Approved: true}, nil
	})
	tests := map[string]struct {
		scope, name, args string
		wantCode          tool.Code
		wantMsg           string
		wantReason        string
	}{
		"allowed": {name: "shell", args: `{"command":"ls"}`},
		"allowed, then guarded": {name: "shell", args: `{"command":"rm -rf /"}`,
			wantCode: tool.CodeGuardDenied, wantMsg: "shell may not rm -rf", wantReason: "recursive delete"},
		"approved": {name: "rm", args: `{"path":"/tmp/x"}`},
		"approved, then guarded privately": {name: "rm", args: `{"path":"/etc/passwd"}`,
			wantCode: tool.CodeGuardDenied, wantMsg: "call denied by guard", wantReason: "rm of a protected path"},
		"no reason": {scope: "global/agents/intern", name: "cat", args: `{}`,
			wantCode: tool.CodeGuardDenied, wantMsg: `call denied by guard "guards[2]"`},
		"condition fails closed": {name: "echo", args: `{"other":1}`,
			wantCode: tool.CodeGuardDenied, wantMsg: "call denied by policy (guard evaluation failed)",
			wantReason: "config.yaml:23:11: policy.guards[3].when: no such key: text"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if tc.scope == "" {
				tc.scope = "global"
			}
			e := exec(tc.scope, tc.name, tc.args)
			e.Approver = approve
			before := dispatched
			r := p.Run(t.Context(), e)
			if r.Code() != tc.wantCode {
				t.Fatalf("Run(%s %s) = %+v, want code %q", tc.name, tc.args, r, tc.wantCode)
			}
			if r.Err == nil {
				return
			}
			if r.Err.Message != tc.wantMsg || r.Err.Reason != tc.wantReason || r.Content != tool.ErrorContentPrefix+tc.wantMsg {
				t.Errorf("Run(%s %s) = %+v content %q, want message %q reason %q", tc.name, tc.args, r.Err, r.Content, tc.wantMsg, tc.wantReason)
			}
			if dispatched != before {
				t.Errorf("Run(%s %s) dispatched a call its guard denied", tc.name, tc.args)
			}
		})
	}

	// A reload swaps the guards with the rules, for the next call.
	p.SetPolicy(mustParse(t, "guards:\n  - tool: cat\n    reason: no cat\n"))
	if r := p.Run(t.Context(), exec("global", "shell", `{"command":"rm -rf /"}`)); r.IsError {
		t.Errorf("Run() after a reload dropping the guard = %+v, want success", r.Err)
	}
	if r := p.Run(t.Context(), exec("global", "cat", `{}`)); r.Code() != tool.CodeGuardDenied || r.Err.Message != "no cat" {
		t.Errorf("Run() after a reload adding a guard = %+v, want GUARD_DENIED", r.Err)
	}
}

type approverFunc func(ctx context.Context, req tool.ApprovalRequest) (tool.ApprovalDecision, error)

func (f approverFunc) Approve(ctx context.Context, req tool.ApprovalRequest) (tool.ApprovalDecision, error) {
	return f(ctx, req)
}

// TestConditionInterruptedByCancellation: a condition whose evaluation the call's
// cancellation interrupts did not fail: the call was cancelled before dispatch, and
// gets ABORTED_BEFORE_DISPATCH as every unstarted call does, not a policy's or guard's
// fail-closed denial (DENIED, GUARD_DENIED) detailing "operation interrupted".
func TestConditionInterruptedByCancellation(t *testing.T) {
	items := strings.TrimSuffix(strings.Repeat("1,", 500), ",")
	tests := map[string]string{
		"rule": `
rules:
  - tool: loop
    when: 'args.items.all(x, x > 0)'
    decision: allow
`,
		"guard": `
guards:
  - tool: loop
    when: 'args.items.exists(x, x < 0)'
    reason: "no negative items"
`,
	}
	for name, src := range tests {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			// The batch is cancelled once the call has resolved its tool: its
			// conditions then run on an ended context.
			res := resolverFunc(func(_ context.Context, c *tool.Call) (pipeline.Tool, error) {
				cancel()
				return &stubTool{def: tool.Definition{Name: c.Name}}, nil
			})
			disp := dispatcherFunc(func(context.Context, pipeline.Tool, *tool.Exec) tool.Result { return tool.Result{Content: "ok"} })
			p := pipeline.New(res, disp, pipeline.WithPolicy(mustParse(t, src)))
			r := p.Run(ctx, exec("global", "loop", fmt.Sprintf(`{"items":[%s]}`, items)))
			if r.Code() != tool.CodeAbortedBeforeDispatch {
				t.Errorf("Run() cancelled during its %s's condition = %s %+v, want ABORTED_BEFORE_DISPATCH", name, r.Code(), r.Err)
			}
		})
	}
}

// TestDenialOutranksAnInterruptedCondition: a rule that denies the call stands when the
// call's cancellation interrupts another rule's condition, in whichever order the two
// are written: a denial is more specific than the cancellation, and the outcome of the
// rules does not depend on their order. The interrupted rule coming first used to end
// the rules with ABORTED_BEFORE_DISPATCH before the denying rule was read.
func TestDenialOutranksAnInterruptedCondition(t *testing.T) {
	const slow = `
  - tool: loop
    when: 'args.items.all(x, x > 0)'
    decision: allow
`
	const deny = `
  - tool: loop
    decision: deny
    reason: loop is forbidden
`
	items := strings.TrimSuffix(strings.Repeat("1,", 500), ",")
	for name, src := range map[string]string{
		"interrupted rule first": "rules:" + slow + deny,
		"denying rule first":     "rules:" + deny + slow,
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			res := resolverFunc(func(_ context.Context, c *tool.Call) (pipeline.Tool, error) {
				cancel()
				return &stubTool{def: tool.Definition{Name: c.Name}}, nil
			})
			disp := dispatcherFunc(func(context.Context, pipeline.Tool, *tool.Exec) tool.Result { return tool.Result{Content: "ok"} })
			p := pipeline.New(res, disp, pipeline.WithPolicy(mustParse(t, src)))
			r := p.Run(ctx, exec("global", "loop", fmt.Sprintf(`{"items":[%s]}`, items)))
			if r.Code() != tool.CodeDenied || r.Err.Message != "loop is forbidden" {
				t.Errorf("Run() cancelled during a rule's condition, another rule denying = %s %+v, want DENIED (loop is forbidden)", r.Code(), r.Err)
			}
		})
	}
}
