package hook_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/hook"
	"github.com/toolsd/toolsd/internal/tool"
)

func requirement(tb testing.TB, name, stage, toolGlob, scopeGlob string) hook.Requirement {
	tb.Helper()
	r, err := hook.NewRequirement(name, stage, toolGlob, scopeGlob)
	if err != nil {
		tb.Fatalf("NewRequirement() = %v", err)
	}
	return r
}

// TestRequiredHook: while no hook of a required name is connected, the calls it covers
// fail closed, counted as its failures; once it connects they are asked of it, and
// after it leaves they fail closed again.
func TestRequiredHook(t *testing.T) {
	tests := map[string]struct {
		stage toolsdv1.HookStage
		want  tool.Result
	}{
		"pre-execute": {
			stage: pre,
			want:  failure(tool.CodePolicyUnavailable, "call denied: a policy hook is unavailable", `hook "policy": required hook not connected`),
		},
		"post-execute": {
			stage: post,
			want:  failure(tool.CodePolicyUnavailable, "result withheld: a policy hook is unavailable", `hook "policy": required hook not connected`),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			stage := stageName(tc.stage)
			e := newEnv(t, hook.WithRequired(requirement(t, "policy", stage, "echo", "tenant-a/**")))
			disp := &dispatcher{}
			p := e.newPipeline(disp)
			counter := "failure:policy:" + stage + ":false"

			if got := p.Run(t.Context(), newExec("echo", `{}`)); !cmp.Equal(got, tc.want) {
				t.Errorf("Run() before the hook connected:\n%s", cmp.Diff(tc.want, got))
			}
			if n := e.obs.get(counter); n != 1 {
				t.Errorf("count %q = %d, want 1", counter, n)
			}
			// Calls the requirement does not cover run.
			for _, x := range []*tool.Exec{newExec("cat", `{}`), withScope(newExec("echo", `{}`), "tenant-b")} {
				if got := p.Run(t.Context(), x); got.IsError {
					t.Errorf("Run(%s in %s) = %+v, want success", x.Name, x.Scope, got)
				}
			}

			h := e.connect(t, helloFor("policy", sub(tc.stage, "", "", 0)), always(&toolsdv1.HookDecision{}))
			if got := p.Run(t.Context(), newExec("echo", `{}`)); got.IsError {
				t.Errorf("Run() with the hook connected = %+v, want success", got)
			}
			h.next() // it was asked

			_ = h.cc.Close()
			waitUntil(t, "the hook to leave", func() bool { return len(e.hub.Hooks()) == 0 })
			if got := p.Run(t.Context(), newExec("echo", `{}`)); !cmp.Equal(got, tc.want) {
				t.Errorf("Run() after the hook left:\n%s", cmp.Diff(tc.want, got))
			}
			if n := e.obs.get(counter); n != 2 {
				t.Errorf("count %q = %d, want 2", counter, n)
			}
			want := 3 // the two uncovered calls, and the one the hook allowed
			if tc.stage == post {
				want = 5 // the denied calls ran too: their results were blocked
			}
			if n := disp.count(); n != want {
				t.Errorf("dispatched %d calls, want %d", n, want)
			}
		})
	}
}

// TestRequiredHookNotMetByOthers: a connected hook meets a requirement only with its
// name, subscribed to the call, and of an identity not confined to some scopes (a
// tenant's hook named like the operator's does not stand in for it).
func TestRequiredHookNotMetByOthers(t *testing.T) {
	allow := always(verdict(toolsdv1.HookVerdict_HOOK_VERDICT_ALLOW, ""))
	tests := map[string]func(e *env){
		"other name":     func(e *env) { e.connect(t, helloFor("audit", sub(pre, "", "", 0)), allow) },
		"not subscribed": func(e *env) { e.connect(t, helloFor("policy", sub(pre, "ls", "", 0), sub(post, "", "", 0)), allow) },
		"tenant's hook": func(e *env) {
			e.connect(t, helloFor("policy", sub(pre, "", "", 0)), allow, withMetadata("tenant", "a"))
		},
	}
	for name, connect := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, hook.WithScopeFilter(tenantsFilter), hook.WithRequired(requirement(t, "policy", "pre_execute", "", "")))
			connect(e)
			got := e.newPipeline(&dispatcher{}).Run(t.Context(), newExec("echo", `{}`))
			if got.Code() != tool.CodePolicyUnavailable {
				t.Errorf("Run() = %+v, want %s", got, tool.CodePolicyUnavailable)
			}
		})
	}
}

func TestNewRequirementRefuses(t *testing.T) {
	tests := map[string][4]string{
		"result stage": {"policy", "result", "", ""},
		"no stage":     {"policy", "", "", ""},
		"no name":      {"", "pre_execute", "", ""},
		"bad tool":     {"policy", "pre_execute", "[", ""},
		"bad scope":    {"policy", "post_execute", "", "a/**/b/**/c/**/d/**"},
	}
	for name, a := range tests {
		if _, err := hook.NewRequirement(a[0], a[1], a[2], a[3]); err == nil {
			t.Errorf("%s: NewRequirement(%q) = nil error", name, a)
		}
	}
}

// TestRequiredHookFailsClosed: a hook that meets a requirement fails closed for the
// calls the requirement covers, whatever its hello's fail_open says (it would let them
// run without the policy the operator required); for other calls its fail_open holds.
func TestRequiredHookFailsClosed(t *testing.T) {
	invalid := func(r *toolsdv1.HookRequest) *toolsdv1.HookDecision {
		if r.GetStage() == pre {
			return verdict(toolsdv1.HookVerdict_HOOK_VERDICT_BLOCK, "")
		}
		return verdict(toolsdv1.HookVerdict_HOOK_VERDICT_ALLOW, "")
	}
	tests := map[string]struct {
		stage   toolsdv1.HookStage
		answer  answerFunc
		timeout time.Duration
		want    tool.Result
	}{
		"pre-execute timeout": {
			stage: pre, answer: silent, timeout: 50 * time.Millisecond,
			want: failure(tool.CodePolicyUnavailable, "call denied: a policy hook is unavailable", `hook "policy": no decision before the deadline`),
		},
		"post-execute timeout": {
			stage: post, answer: silent, timeout: 50 * time.Millisecond,
			want: failure(tool.CodePolicyUnavailable, "result withheld: a policy hook is unavailable", `hook "policy": no decision before the deadline`),
		},
		"pre-execute invalid verdict": {
			stage: pre, answer: invalid, timeout: time.Minute,
			want: failure(tool.CodePolicyUnavailable, "call denied: a policy hook is unavailable",
				`hook "policy": protocol error: verdict HOOK_VERDICT_BLOCK is not valid before execution`),
		},
		"post-execute invalid verdict": {
			stage: post, answer: invalid, timeout: time.Minute,
			want: failure(tool.CodePolicyUnavailable, "result withheld: a policy hook is unavailable",
				`hook "policy": protocol error: verdict HOOK_VERDICT_ALLOW is not valid after execution`),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			stage := stageName(tc.stage)
			e := newEnv(t, hook.WithTimeout(tc.timeout), hook.WithRequired(requirement(t, "policy", stage, "echo", "tenant-a/**")))
			hello := helloFor("policy", sub(tc.stage, "", "", 0))
			hello.FailOpen = true
			e.connect(t, hello, tc.answer)
			p := e.newPipeline(&dispatcher{})

			if got := p.Run(t.Context(), newExec("echo", `{}`)); !cmp.Equal(got, tc.want) {
				t.Errorf("Run() of a covered call:\n%s", cmp.Diff(tc.want, got))
			}
			if n := e.obs.get("failure:policy:" + stage + ":false"); n != 1 {
				t.Errorf("fail-closed uses = %d, want 1", n)
			}
			// A call the requirement does not cover fails open, as the hook asked.
			if got := p.Run(t.Context(), withScope(newExec("echo", `{}`), "tenant-b")); got.IsError {
				t.Errorf("Run() of an uncovered call = %+v, want success", got)
			}
			if n := e.obs.get("failure:policy:" + stage + ":true"); n != 1 {
				t.Errorf("fail-open uses = %d, want 1", n)
			}
		})
	}
}

// TestRequiredHookFailsClosedOnDrop: a fail-open hook that meets a requirement and
// whose stream drops while a covered call waits for it fails that call closed.
func TestRequiredHookFailsClosedOnDrop(t *testing.T) {
	for _, stage := range []toolsdv1.HookStage{pre, post} {
		t.Run(stageName(stage), func(t *testing.T) {
			e := newEnv(t, hook.WithTimeout(time.Minute), hook.WithRequired(requirement(t, "policy", stageName(stage), "", "")))
			hello := helloFor("policy", sub(stage, "", "", 0))
			hello.FailOpen = true
			got, _ := e.runAndDrop(t, hello)
			if got.Code() != tool.CodePolicyUnavailable || got.Err.Reason != `hook "policy": stream closed` {
				t.Errorf("Run() = %+v, want POLICY_UNAVAILABLE for the dropped stream", got)
			}
			e.obs.waitFor(t, "failure:policy:"+stageName(stage)+":false", func(n int) bool { return n == 1 })
		})
	}
}
