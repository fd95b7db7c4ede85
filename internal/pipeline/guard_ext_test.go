package pipeline_test

import (
	"context"
	"testing"

	"github.com/toolsd/toolsd/internal/pipeline"
	"github.com/toolsd/toolsd/internal/tool"
)

// verdictGuard is a Guard that answers v, counting its calls.
type verdictGuard struct {
	name  string
	v     pipeline.Verdict
	calls int
}

func (g *verdictGuard) Name() string { return g.name }
func (g *verdictGuard) Guard(context.Context, *tool.Exec, pipeline.Tool) pipeline.Verdict {
	g.calls++
	return g.v
}

// guardPolicy is a Policy that allows every call and supplies guards.
type guardPolicy struct {
	fakePolicy
	guards []pipeline.Guard
}

func (g *guardPolicy) Guards() []pipeline.Guard { return g.guards }

func TestGuardDenialReasons(t *testing.T) {
	tests := map[string]struct {
		v                pipeline.Verdict
		wantMsg, wantWhy string
	}{
		"reason": {
			v:       pipeline.Verdict{Decision: pipeline.Deny, Reason: "no rm -rf", UserReason: "matched rm -rf"},
			wantMsg: "no rm -rf", wantWhy: "matched rm -rf",
		},
		"no reason": {
			v:       pipeline.Verdict{Decision: pipeline.Deny},
			wantMsg: `call denied by guard "owner"`,
		},
		"private": {
			v:       pipeline.Verdict{Decision: pipeline.Deny, Reason: "secret list hit", Private: true},
			wantMsg: "call denied by guard", wantWhy: "secret list hit",
		},
		"private with user reason": {
			v:       pipeline.Verdict{Decision: pipeline.Deny, Reason: "secret list hit", UserReason: "blocked", Private: true},
			wantMsg: "call denied by guard", wantWhy: "blocked",
		},
		"out of range": {
			v:       pipeline.Verdict{Decision: pipeline.Deny + 1, Reason: "confused"},
			wantMsg: "confused",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			disp := returning(tool.Result{Content: "ok"})
			p := pipeline.New(staticResolver(newTool("rm")), disp,
				pipeline.WithGuards(&verdictGuard{name: "owner", v: tc.v}))
			e := newExec("rm", `{}`)
			r := p.Run(t.Context(), e)
			checkShape(t, e, r)
			if r.Code() != tool.CodeGuardDenied || r.Err.Message != tc.wantMsg || r.Err.Reason != tc.wantWhy || disp.count() != 0 {
				t.Fatalf("Run() = %+v, dispatched %d; want GUARD_DENIED %q reason %q, no dispatch", r.Err, disp.count(), tc.wantMsg, tc.wantWhy)
			}
			if r.Content != tool.ErrorContentPrefix+tc.wantMsg {
				t.Errorf("Run() content = %q, want only the model-facing message", r.Content)
			}
		})
	}
}

// A guard cannot grant or ask: any decision but Deny abstains, and the call goes on.
func TestGuardCannotAllowOrAsk(t *testing.T) {
	for _, d := range []pipeline.Decision{pipeline.Abstain, pipeline.Allow, pipeline.Ask} {
		disp := returning(tool.Result{Content: "ok"})
		later := &verdictGuard{name: "later"}
		p := pipeline.New(staticResolver(newTool("echo")), disp, pipeline.WithGuards(
			&verdictGuard{name: "g", v: pipeline.Verdict{Decision: d, Reason: "x"}}, later))
		if r := p.Run(t.Context(), newExec("echo", `{}`)); r.IsError || later.calls != 1 {
			t.Errorf("Run() with a guard answering %s = %+v, later guard ran %d times; want success, 1", d, r.Err, later.calls)
		}
	}
}

// A policy's guards run after those of WithGuards, and SetPolicy swaps them with the
// policy for the next call.
func TestPolicyGuardsSwapWithThePolicy(t *testing.T) {
	allow := fakePolicy{v: pipeline.Verdict{Decision: pipeline.Allow}}
	own := &verdictGuard{name: "own"}
	first := &verdictGuard{name: "first", v: pipeline.Verdict{Decision: pipeline.Deny, Reason: "first says no"}}
	disp := returning(tool.Result{Content: "ok"})
	p := pipeline.New(staticResolver(newTool("echo")), disp, pipeline.WithGuards(own),
		pipeline.WithPolicy(&guardPolicy{fakePolicy: allow, guards: []pipeline.Guard{first}}))
	if r := p.Run(t.Context(), newExec("echo", `{}`)); r.Code() != tool.CodeGuardDenied || r.Err.Message != "first says no" {
		t.Fatalf("Run() = %+v, want GUARD_DENIED by the policy's guard", r.Err)
	}
	if own.calls != 1 {
		t.Errorf("WithGuards' guard ran %d times before the policy's, want 1", own.calls)
	}

	second := &verdictGuard{name: "second", v: pipeline.Verdict{Decision: pipeline.Deny, Reason: "second says no"}}
	p.SetPolicy(&guardPolicy{fakePolicy: allow, guards: []pipeline.Guard{second}})
	if r := p.Run(t.Context(), newExec("echo", `{}`)); r.Code() != tool.CodeGuardDenied || r.Err.Message != "second says no" {
		t.Errorf("Run() after SetPolicy = %+v, want GUARD_DENIED by the new policy's guard", r.Err)
	}
	if first.calls != 1 {
		t.Errorf("the replaced policy's guard ran %d times, want 1", first.calls)
	}

	p.SetPolicy(&allow)
	if r := p.Run(t.Context(), newExec("echo", `{}`)); r.IsError || own.calls != 3 {
		t.Errorf("Run() under a policy without guards = %+v, own guard ran %d times; want success, 3", r.Err, own.calls)
	}
	p.SetConfig(pipeline.Config{})
	p.SetPolicy(&guardPolicy{fakePolicy: allow, guards: []pipeline.Guard{second}})
	p.SetConfig(pipeline.Config{})
	if r := p.Run(t.Context(), newExec("echo", `{}`)); r.Code() != tool.CodeGuardDenied {
		t.Errorf("Run() after SetConfig = %+v, want the policy's guards kept", r.Err)
	}
}

// A call asked about and approved is still denied by a guard.
func TestGuardDeniesAfterApproval(t *testing.T) {
	disp := returning(tool.Result{Content: "ok"})
	asked := 0
	p := pipeline.New(staticResolver(newTool("rm")), disp,
		pipeline.WithPolicy(&guardPolicy{
			fakePolicy: fakePolicy{v: pipeline.Verdict{Decision: pipeline.Ask, Reason: "ok to rm?"}},
			guards:     []pipeline.Guard{&verdictGuard{name: "owner", v: pipeline.Verdict{Decision: pipeline.Deny, Reason: "never rm"}}},
		}))
	e := newExec("rm", `{}`)
	e.Approver = approverFunc(func(context.Context, tool.ApprovalRequest) (tool.ApprovalDecision, error) {
		asked++
		return tool.ApprovalDecision{Approved: true}, nil
	})
	if r := p.Run(t.Context(), e); r.Code() != tool.CodeGuardDenied || r.Err.Message != "never rm" || asked != 1 || disp.count() != 0 {
		t.Errorf("Run() = %+v, asked %d, dispatched %d; want GUARD_DENIED after one approval, no dispatch", r.Err, asked, disp.count())
	}
}
