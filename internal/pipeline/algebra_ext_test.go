package pipeline_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/toolsd/toolsd/internal/pipeline"
	"github.com/toolsd/toolsd/internal/tool"
)

// sequences returns every sequence over alphabet of length 0..maxLen (with repetition).
func sequences(alphabet []pipeline.Decision, maxLen int) [][]pipeline.Decision {
	out := [][]pipeline.Decision{{}}
	frontier := [][]pipeline.Decision{{}}
	for range maxLen {
		var next [][]pipeline.Decision
		for _, s := range frontier {
			for _, d := range alphabet {
				next = append(next, append(slices.Clone(s), d))
			}
		}
		out = append(out, next...)
		frontier = next
	}
	return out
}

// expectedCode states the algebra independently of the implementation: a deny anywhere
// denies; otherwise an ask anywhere asks; otherwise an allow anywhere allows; otherwise
// the default applies. Ask is then settled by the approver; guards run last.
func expectedCode(seq []pipeline.Decision, def pipeline.Decision, guard, approval string) (code tool.Code, asked bool) {
	eff := def
	switch {
	case slices.Contains(seq, pipeline.Deny):
		eff = pipeline.Deny
	case slices.Contains(seq, pipeline.Ask):
		eff = pipeline.Ask
	case slices.Contains(seq, pipeline.Allow):
		eff = pipeline.Allow
	}
	if eff == pipeline.Deny {
		return tool.CodeDenied, false
	}
	if eff == pipeline.Ask {
		switch approval {
		case "deny":
			return tool.CodeApprovalDenied, true
		case "timeout":
			return tool.CodeApprovalTimeout, true
		case "unavailable":
			return tool.CodeApprovalUnavailable, true
		}
		asked = true
	}
	if guard == "deny" {
		return tool.CodeGuardDenied, asked
	}
	return "", asked
}

func TestDecisionAlgebra(t *testing.T) {
	alphabet := []pipeline.Decision{pipeline.Allow, pipeline.Deny, pipeline.Ask, pipeline.Abstain}
	approvers := map[string]tool.Approver{
		"approve": approverFunc(func(context.Context, tool.ApprovalRequest) (tool.ApprovalDecision, error) {
			return tool.ApprovalDecision{Approved: true}, nil
		}),
		"deny": approverFunc(func(context.Context, tool.ApprovalRequest) (tool.ApprovalDecision, error) {
			return tool.ApprovalDecision{Reason: "no"}, nil
		}),
		"timeout": approverFunc(func(context.Context, tool.ApprovalRequest) (tool.ApprovalDecision, error) {
			return tool.ApprovalDecision{}, tool.ErrApprovalTimeout
		}),
		"unavailable": approverFunc(func(context.Context, tool.ApprovalRequest) (tool.ApprovalDecision, error) {
			return tool.ApprovalDecision{}, tool.ErrApprovalUnavailable
		}),
	}
	guards := map[string][]pipeline.Guard{
		"none": nil,
		"abstain": {pipeline.GuardFunc("abstain", func(context.Context, *tool.Exec, pipeline.Tool) (bool, string) {
			return false, ""
		})},
		"deny": {pipeline.GuardFunc("deny", func(context.Context, *tool.Exec, pipeline.Tool) (bool, string) {
			return true, "guarded"
		})},
	}
	tl := newTool("echo")
	// Every sequence up to length 4 under the default allow; the other defaults only
	// matter when everything abstains, so shorter sequences cover them.
	maxLen := map[pipeline.Decision]int{pipeline.Allow: 4, pipeline.Deny: 2, pipeline.Ask: 2}
	for _, def := range []pipeline.Decision{pipeline.Allow, pipeline.Deny, pipeline.Ask} {
		for _, seq := range sequences(alphabet, maxLen[def]) {
			for gname, gs := range guards {
				for aname, approver := range approvers {
					names := make([]string, len(seq))
					pres := make([]pipeline.PreExecute, len(seq))
					for i, d := range seq {
						names[i] = d.String()
						pres[i] = verdict(d, "because "+d.String())
					}
					name := fmt.Sprintf("default=%s/seq=%s/guard=%s/approval=%s", def, strings.Join(names, ","), gname, aname)
					t.Run(name, func(t *testing.T) {
						var asked atomic.Int32
						counting := approverFunc(func(ctx context.Context, req tool.ApprovalRequest) (tool.ApprovalDecision, error) {
							asked.Add(1)
							return approver.Approve(ctx, req)
						})
						disp := returning(tool.Result{Content: "ok"})
						p := pipeline.New(staticResolver(tl), disp,
							pipeline.WithConfig(pipeline.Config{DefaultDecision: def}),
							pipeline.WithPreExecute(pres...), pipeline.WithGuards(gs...))
						e := newExec("echo", `{}`)
						e.Approver = counting
						r := p.Run(t.Context(), e)
						checkShape(t, e, r)
						wantCode, wantAsked := expectedCode(seq, def, gname, aname)
						if got := r.Code(); got != wantCode {
							t.Errorf("Run() code = %q, want %q (result %+v)", got, wantCode, r)
						}
						if got := asked.Load() == 1; got != wantAsked {
							t.Errorf("approver asked = %v, want %v", got, wantAsked)
						}
						if got, want := disp.count(), 0; wantCode == "" {
							want = 1
							if got != want {
								t.Errorf("dispatches = %d, want %d", got, want)
							}
						} else if got != want {
							t.Errorf("denied call dispatched %d times, want 0", got)
						}
					})
				}
			}
		}
	}
}

func TestLaterParticipantCannotUndoDeny(t *testing.T) {
	var laterCalls atomic.Int32
	later := pipeline.PreExecuteFunc("later", func(context.Context, *tool.Exec, pipeline.Tool) pipeline.Verdict {
		laterCalls.Add(1)
		return pipeline.Verdict{Decision: pipeline.Allow, Reason: "looks fine"}
	})
	disp := returning(tool.Result{Content: "ok"})
	p := pipeline.New(staticResolver(newTool("rm")), disp, pipeline.WithPreExecute(
		verdict(pipeline.Allow, "first allows"), verdict(pipeline.Deny, "rm is forbidden"), later, verdict(pipeline.Allow, "")))
	e := newExec("rm", `{}`)
	r := p.Run(t.Context(), e)
	checkShape(t, e, r)
	if r.Code() != tool.CodeDenied || r.Err.Message != "rm is forbidden" {
		t.Errorf("Run() = %+v, want DENIED with the denying participant's reason", r.Err)
	}
	if laterCalls.Load() != 0 || disp.count() != 0 {
		t.Errorf("after a deny: later participant ran %d times, dispatcher %d times; want 0, 0", laterCalls.Load(), disp.count())
	}
}

func TestLaterGuardCannotUndoDeny(t *testing.T) {
	var laterCalls atomic.Int32
	disp := returning(tool.Result{Content: "ok"})
	p := pipeline.New(staticResolver(newTool("rm")), disp, pipeline.WithGuards(
		pipeline.GuardFunc("owner", func(context.Context, *tool.Exec, pipeline.Tool) (bool, string) { return true, "" }),
		pipeline.GuardFunc("later", func(context.Context, *tool.Exec, pipeline.Tool) (bool, string) {
			laterCalls.Add(1)
			return false, ""
		}),
	))
	e := newExec("rm", `{}`)
	r := p.Run(t.Context(), e)
	checkShape(t, e, r)
	if r.Code() != tool.CodeGuardDenied || r.Err.Message != `call denied by guard "owner"` {
		t.Errorf("Run() = %+v, want GUARD_DENIED by owner", r.Err)
	}
	if laterCalls.Load() != 0 || disp.count() != 0 {
		t.Errorf("after a guard deny: later guard ran %d times, dispatcher %d times; want 0, 0", laterCalls.Load(), disp.count())
	}
}

func TestCombine(t *testing.T) {
	tests := map[string]struct {
		in   []pipeline.Verdict
		want pipeline.Verdict
	}{
		"none abstains": {want: pipeline.Verdict{}},
		"first reason of the strongest decision": {
			in: []pipeline.Verdict{
				{Decision: pipeline.Ask, Reason: "a1"}, {Decision: pipeline.Allow, Reason: "l"},
				{Decision: pipeline.Ask, Reason: "a2"},
			},
			want: pipeline.Verdict{Decision: pipeline.Ask, Reason: "a1"},
		},
		"a verdict without reasons yields to one with them": {
			in: []pipeline.Verdict{
				{Decision: pipeline.Ask}, {Decision: pipeline.Ask, UserReason: "u"},
				{Decision: pipeline.Ask, Reason: "a"},
			},
			want: pipeline.Verdict{Decision: pipeline.Ask, UserReason: "u"},
		},
		"out-of-range decision fails closed": {
			in:   []pipeline.Verdict{{Decision: pipeline.Allow}, {Decision: pipeline.Decision(42), Reason: "bug"}},
			want: pipeline.Verdict{Decision: pipeline.Deny, Reason: "bug"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := pipeline.Combine(tc.in...); got != tc.want {
				t.Errorf("Combine(%v) = %+v, want %+v", tc.in, got, tc.want)
			}
		})
	}
}

// TestAskQuestionIsTheFirstGiven: the approver is asked the first question a
// participant gives. A participant that asks without a reason (a policy rule with no
// reason) hid the question of a hook that asked after it, and the approver saw only the
// default question.
func TestAskQuestionIsTheFirstGiven(t *testing.T) {
	asks := func(reason, userReason string) pipeline.PreExecute {
		return pipeline.PreExecuteFunc("asks", func(context.Context, *tool.Exec, pipeline.Tool) pipeline.Verdict {
			return pipeline.Verdict{Decision: pipeline.Ask, Reason: reason, UserReason: userReason}
		})
	}
	tests := map[string]struct {
		pres []pipeline.PreExecute
		want string
	}{
		"a silent ask, then a question": {
			pres: []pipeline.PreExecute{asks("", ""), verdict(pipeline.Allow, "fine"), asks("touching prod needs a human", "")},
			want: "touching prod needs a human",
		},
		"a silent ask, then a user reason": {
			pres: []pipeline.PreExecute{asks("", ""), asks("", `hook "policy" asks for approval`)},
			want: `hook "policy" asks for approval`,
		},
		"the first question of two": {
			pres: []pipeline.PreExecute{asks("first", ""), asks("second", "")},
			want: "first",
		},
		"a question, then a silent ask": {
			pres: []pipeline.PreExecute{asks("first", ""), asks("", "")},
			want: "first",
		},
		"no question": {
			pres: []pipeline.PreExecute{asks("", ""), asks("", "")},
			want: `tool "echo" requires approval`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var got string
			p := pipeline.New(staticResolver(newTool("echo")), returning(tool.Result{Content: "ok"}), pipeline.WithPreExecute(tc.pres...))
			e := newExec("echo", `{}`)
			e.Approver = approverFunc(func(_ context.Context, req tool.ApprovalRequest) (tool.ApprovalDecision, error) {
				got = req.Reason
				return tool.ApprovalDecision{Approved: true}, nil
			})
			if r := p.Run(t.Context(), e); r.IsError {
				t.Fatalf("Run() = %+v, want the approved call's success", r.Err)
			}
			if got != tc.want {
				t.Errorf("approval question = %q, want %q", got, tc.want)
			}
		})
	}
}
