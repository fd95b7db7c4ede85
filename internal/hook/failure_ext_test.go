package hook_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/hook"
	"github.com/toolsd/toolsd/internal/pipeline"
	"github.com/toolsd/toolsd/internal/tool"
)

// silent never answers.
func silent(*toolsdv1.HookRequest) *toolsdv1.HookDecision { return nil }

func TestDeadline(t *testing.T) {
	tests := map[string]struct {
		stage    toolsdv1.HookStage
		failOpen bool
		want     tool.Result
		counter  string
	}{
		"pre-execute fails closed": {
			stage:   pre,
			want:    failure(tool.CodePolicyUnavailable, "call denied: a policy hook is unavailable", `hook "slow": no decision before the deadline`),
			counter: "failure:slow:pre_execute:false",
		},
		"post-execute fails closed": {
			stage:   post,
			want:    failure(tool.CodePolicyUnavailable, "result withheld: a policy hook is unavailable", `hook "slow": no decision before the deadline`),
			counter: "failure:slow:post_execute:false",
		},
		"pre-execute fail-open abstains": {
			stage:    pre,
			failOpen: true,
			want:     tool.Result{Content: "ok"},
			counter:  "failure:slow:pre_execute:true",
		},
		"post-execute fail-open accepts": {
			stage:    post,
			failOpen: true,
			want:     tool.Result{Content: "ok"},
			counter:  "failure:slow:post_execute:true",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, hook.WithTimeout(50*time.Millisecond))
			hello := helloFor("slow", sub(tc.stage, "", "", 0))
			hello.FailOpen = tc.failOpen
			h := e.connect(t, hello, silent)
			got := e.newPipeline(&dispatcher{}).Run(t.Context(), newExec("echo", `{}`))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Run() (-want +got):\n%s", diff)
			}
			if n := e.obs.get(tc.counter); n != 1 {
				t.Errorf("count %q = %d, want 1", tc.counter, n)
			}
			// The late decision is ignored and the hook stays connected.
			h.decide(&toolsdv1.HookDecision{RequestId: h.next().GetRequestId(), Verdict: toolsdv1.HookVerdict_HOOK_VERDICT_DENY})
			if n := len(e.hub.Hooks()); n != 1 {
				t.Errorf("Hooks() has %d hooks, want 1", n)
			}
		})
	}
}

// TestKilledHook closes a hook's connection while a request is pending: the call fails
// at once (the deadline is a minute away) and later calls no longer consult the hook.
func TestKilledHook(t *testing.T) {
	tests := map[string]struct {
		stage    toolsdv1.HookStage
		failOpen bool
		want     tool.Code
	}{
		"pre-execute":           {stage: pre, want: tool.CodePolicyUnavailable},
		"post-execute":          {stage: post, want: tool.CodePolicyUnavailable},
		"pre-execute fail-open": {stage: pre, failOpen: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, hook.WithTimeout(time.Minute))
			hello := helloFor("doomed", sub(tc.stage, "", "", 0))
			hello.FailOpen = tc.failOpen
			got, p := e.runAndDrop(t, hello)
			if got.Code() != tc.want {
				t.Errorf("Run() = %+v, want code %q", got, tc.want)
			}
			if tc.want != "" && got.Err.Reason != `hook "doomed": stream closed` {
				t.Errorf("Run() reason = %q", got.Err.Reason)
			}
			if n := len(e.hub.Hooks()); n != 0 {
				t.Errorf("Hooks() = %d hooks after the stream dropped, want 0", n)
			}
			if r := p.Run(t.Context(), newExec("echo", `{}`)); r.IsError {
				t.Errorf("Run() after the hook left = %+v, want success", r)
			}
			e.obs.waitFor(t, "connected", func(n int) bool { return n == 0 })
			if n := e.obs.get("failure:doomed:" + stageName(tc.stage) + ":" + boolName(tc.failOpen)); n != 1 {
				t.Errorf("failure count = %d, want 1", n)
			}
		})
	}
}

func stageName(s toolsdv1.HookStage) string {
	if s == pre {
		return "pre_execute"
	}
	return "post_execute"
}

func boolName(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// TestCancelledCall checks that a call whose context ends while a hook decides returns
// at once with a cancellation code, not counted as a hook failure.
func TestCancelledCall(t *testing.T) {
	e := newEnv(t, hook.WithTimeout(time.Minute))
	h := e.connect(t, helloFor("slow", sub(pre, "", "", 0), sub(post, "", "", 0)), silent)
	tests := map[string]struct {
		run  func(ctx context.Context, x *tool.Exec) any
		want any
	}{
		"pre-execute": {
			run: func(ctx context.Context, x *tool.Exec) any {
				return e.hub.PreExecute().PreExecute(ctx, x, newTool("echo"))
			},
			want: pipeline.Verdict{Decision: pipeline.Deny, Reason: "call was cancelled before dispatch", Code: tool.CodeAbortedBeforeDispatch},
		},
		"post-execute keeps an error's code": {
			run: func(ctx context.Context, x *tool.Exec) any {
				return e.hub.PostExecute().PostExecute(ctx, x, newTool("echo"), tool.Failure(tool.CodeToolTimeout, "slow"))
			},
			want: pipeline.PostVerdict{Action: pipeline.Block, Reason: "call was cancelled before its result was reviewed", Code: tool.CodeToolTimeout},
		},
		"post-execute aborts a success": {
			run: func(ctx context.Context, x *tool.Exec) any {
				return e.hub.PostExecute().PostExecute(ctx, x, newTool("echo"), tool.Result{Content: "secret"})
			},
			want: pipeline.PostVerdict{Action: pipeline.Block, Reason: "call was cancelled before its result was reviewed", Code: tool.CodeAborted},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan any, 1)
			go func() { done <- tc.run(ctx, newExec("echo", `{}`)) }()
			h.next()
			cancel()
			var got any
			select {
			case got = <-done:
			case <-time.After(waitTimeout):
				t.Fatal("call still waiting after its context ended")
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("verdict (-want +got):\n%s", diff)
			}
		})
	}
	if n := e.obs.get("failure:slow:pre_execute:false") + e.obs.get("failure:slow:post_execute:false"); n != 0 {
		t.Errorf("failures = %d, want 0", n)
	}
}

// TestFailOpenOnProtocolError checks that a fail-open hook's invalid answers abstain and
// are counted, each use.
func TestFailOpenOnProtocolError(t *testing.T) {
	e := newEnv(t)
	hello := helloFor("open", sub(pre, "", "", 0))
	hello.FailOpen = true
	e.connect(t, hello, always(verdict(toolsdv1.HookVerdict_HOOK_VERDICT_BLOCK, "")))
	for range 3 {
		if got := e.hub.PreExecute().PreExecute(t.Context(), newExec("echo", `{}`), newTool("echo")); got != (pipeline.Verdict{}) {
			t.Errorf("PreExecute() = %+v, want abstain", got)
		}
	}
	if n := e.obs.get("failure:open:pre_execute:true"); n != 3 {
		t.Errorf("fail-open uses = %d, want 3", n)
	}
}

// TestConcurrentCalls runs many calls through two hooks while one of them dies: every
// call ends, allowed or failed closed, and nothing races.
func TestConcurrentCalls(t *testing.T) {
	e := newEnv(t)
	e.connect(t, helloFor("steady", sub(pre, "", "", 0), sub(post, "", "", 0)), always(&toolsdv1.HookDecision{}))
	doomed := e.connect(t, helloFor("doomed", sub(pre, "", "", 1), sub(post, "", "", 1)), always(&toolsdv1.HookDecision{}))
	p := e.newPipeline(&dispatcher{})
	const workers, calls = 16, 20
	results := make(chan tool.Result, workers*calls)
	start := make(chan struct{})
	for range workers {
		go func() {
			<-start
			for range calls {
				results <- p.Run(context.Background(), newExec("echo", `{}`))
			}
		}()
	}
	close(start)
	for i := range workers * calls {
		if i == workers*calls/4 {
			_ = doomed.cc.Close()
		}
		r := <-results
		if r.IsError && r.Code() != tool.CodePolicyUnavailable {
			t.Errorf("Run() = %+v, want success or POLICY_UNAVAILABLE", r)
		}
	}
	if n := len(e.hub.Hooks()); n != 1 {
		t.Errorf("Hooks() = %d, want 1", n)
	}
}

// TestCancelAfterDenyStaysDenied: a call whose context ends while one hook is still
// deciding, after another has denied it, is denied: no answer can turn that deny into
// permission, so the cancellation does not replace it (it would report a call the
// policy refused as one the client cancelled).
func TestCancelAfterDenyStaysDenied(t *testing.T) {
	e := newEnv(t, hook.WithTimeout(time.Minute))
	slow := e.connect(t, helloFor("slow", sub(pre, "", "", 0)), silent)
	denier := e.connect(t, helloFor("denier", sub(pre, "", "", 1)),
		always(verdict(toolsdv1.HookVerdict_HOOK_VERDICT_DENY, "no echo today")))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan pipeline.Verdict, 1)
	go func() { done <- e.hub.PreExecute().PreExecute(ctx, newExec("echo", `{}`), newTool("echo")) }()
	slow.next()
	denier.next()
	waitUntil(t, "the denier's answer", func() bool {
		for _, h := range e.hub.Hooks() {
			if h.Name == "denier" && h.Pending == 0 {
				return true
			}
		}
		return false
	})
	cancel()
	var got pipeline.Verdict
	select {
	case got = <-done:
	case <-time.After(waitTimeout):
		t.Fatal("call still waiting after its context ended")
	}
	want := pipeline.Verdict{Decision: pipeline.Deny, Reason: "no echo today", UserReason: `hook "denier": no echo today`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("PreExecute() after a deny and a cancel (-want +got):\n%s", diff)
	}
}
