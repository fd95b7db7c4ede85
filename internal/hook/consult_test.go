package hook

import (
	"context"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/pipeline"
	"github.com/toolsd/toolsd/internal/tool"
)

// TestCancelledAtTheDeadlineIsCancelled: a call cancelled once the hooks' deadline has
// passed too is told cancelled every time, not expired (a hook failure, and for a
// fail-closed hook a deny) as often as select happens to take the timer.
func TestCancelledAtTheDeadlineIsCancelled(t *testing.T) {
	for i := range 200 {
		x := &exchange{ch: make(chan answer, 1), timer: time.NewTimer(0)}
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		// Past the timer's zero duration: both cases are ready. (Were the timer not
		// due yet, next would say cancelled anyway; this test could only pass wrongly.)
		time.Sleep(time.Millisecond)
		if _, end := x.next(ctx); end != cancelled {
			t.Fatalf("round %d: next() with ctx cancelled and the deadline passed = %v, want cancelled", i, end)
		}
	}
}

// failureCounter counts HookFailure.
type failureCounter struct {
	NopObserver
	failures int
}

func (f *failureCounter) HookFailure(string, string, bool) { f.failures++ }

// TestFailureWithTheCancellationIsCancelled: a request that fails once the call's
// context has ended (its hook's stream dropped as the call was cancelled) is the
// cancellation, not a failure: next says cancelled every time, and the answer is not
// handed on to deny the call or be counted.
func TestFailureWithTheCancellationIsCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	x := &exchange{ch: make(chan answer, 2), timer: time.NewTimer(time.Minute)}
	defer x.timer.Stop()
	x.ch <- answer{slot: 0, err: errGone}
	if _, end := x.next(ctx); end != cancelled {
		t.Errorf("next() with ctx cancelled and a failure queued = %v, want cancelled", end)
	}
	x.ch <- answer{slot: 1, d: &toolsdv1.HookDecision{Verdict: toolsdv1.HookVerdict_HOOK_VERDICT_DENY}}
	if _, end := x.next(ctx); end != gotAnswer {
		t.Errorf("next() with ctx cancelled and a decision queued = %v, want gotAnswer", end)
	}
}

// TestInvalidVerdictWithTheCancellationIsCancelled: a verdict not valid at the stage
// (BLOCK before execution, DENY after) is the hook's failure, and one that arrives once
// the call's context has ended is the cancellation, as cancelledPre takes it: next
// handed it on, so that a fail-closed hook denied the call (or blocked its result) with
// POLICY_UNAVAILABLE over the cancellation and the failure was counted. A valid verdict
// is handed on, and so is an invalid one while the call still waits for it.
func TestInvalidVerdictWithTheCancellationIsCancelled(t *testing.T) {
	tests := map[string]struct {
		stage     Stage
		verdict   toolsdv1.HookVerdict
		cancelled bool
		want      waitEnd
	}{
		"block before execution, cancelled":   {stage: StagePreExecute, verdict: toolsdv1.HookVerdict_HOOK_VERDICT_BLOCK, cancelled: true, want: cancelled},
		"replace before execution, cancelled": {stage: StagePreExecute, verdict: toolsdv1.HookVerdict_HOOK_VERDICT_REPLACE, cancelled: true, want: cancelled},
		"deny after execution, cancelled":     {stage: StagePostExecute, verdict: toolsdv1.HookVerdict_HOOK_VERDICT_DENY, cancelled: true, want: cancelled},
		"unknown verdict, cancelled":          {stage: StagePostExecute, verdict: 99, cancelled: true, want: cancelled},
		"allow before execution, cancelled":   {stage: StagePreExecute, verdict: toolsdv1.HookVerdict_HOOK_VERDICT_ALLOW, cancelled: true, want: gotAnswer},
		"block after execution, cancelled":    {stage: StagePostExecute, verdict: toolsdv1.HookVerdict_HOOK_VERDICT_BLOCK, cancelled: true, want: gotAnswer},
		"block before execution, waiting":     {stage: StagePreExecute, verdict: toolsdv1.HookVerdict_HOOK_VERDICT_BLOCK, want: gotAnswer},
		"deny after execution, waiting":       {stage: StagePostExecute, verdict: toolsdv1.HookVerdict_HOOK_VERDICT_DENY, want: gotAnswer},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			if tc.cancelled {
				cancel()
			}
			x := &exchange{stage: tc.stage, ch: make(chan answer, 1), timer: time.NewTimer(time.Minute)}
			defer x.timer.Stop()
			x.ch <- answer{d: &toolsdv1.HookDecision{Verdict: tc.verdict}}
			if _, end := x.next(ctx); end != tc.want {
				t.Errorf("next() at %s with %s queued = %v, want %v", tc.stage, tc.verdict, end, tc.want)
			}
		})
	}
}

// TestCancelledPreDrain: of the answers that arrive with a pre-execute call's
// cancellation, a hook's DENY stands; a failure of a fail-closed hook (a dropped
// stream, a verdict not valid before execution) neither denies the call with
// POLICY_UNAVAILABLE nor is counted as the hook's failure.
func TestCancelledPreDrain(t *testing.T) {
	deny := &toolsdv1.HookDecision{Verdict: toolsdv1.HookVerdict_HOOK_VERDICT_DENY, Reason: "no"}
	tests := map[string]struct {
		answers []answer
		want    pipeline.Verdict
	}{
		"dropped stream": {
			answers: []answer{{slot: 0, err: errGone}},
			want:    cancelledVerdict(),
		},
		"invalid verdict": {
			answers: []answer{{slot: 1, d: &toolsdv1.HookDecision{Verdict: toolsdv1.HookVerdict_HOOK_VERDICT_BLOCK}}},
			want:    cancelledVerdict(),
		},
		"deny stands": {
			answers: []answer{{slot: 0, err: errGone}, {slot: 1, d: deny}},
			want:    pipeline.Verdict{Decision: pipeline.Deny, Reason: "no", UserReason: `hook "b": no`},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			obs := &failureCounter{}
			h := New(WithObserver(obs))
			hooks := []*conn{h.newConn(nopSender{}, Scopes{}), h.newConn(nopSender{}, Scopes{})}
			hooks[0].hello.name, hooks[1].hello.name = "a", "b"
			x := &exchange{hooks: hooks, ch: make(chan answer, len(hooks))}
			for _, a := range tc.answers {
				x.ch <- a
			}
			e := &tool.Exec{Call: tool.Call{Name: "echo", CallID: "c1"}}
			got := h.cancelledPre(x, hooks, e, make([]pipeline.Verdict, len(hooks)))
			if diff := gocmp.Diff(tc.want, got); diff != "" {
				t.Errorf("cancelledPre() (-want +got):\n%s", diff)
			}
			if obs.failures != 0 {
				t.Errorf("hook failures counted = %d, want 0", obs.failures)
			}
		})
	}
}
