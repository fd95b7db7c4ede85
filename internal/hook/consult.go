package hook

import (
	"context"
	"time"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
)

// exchange is one round of requests to one or more hooks for one call. Every request
// answers into one buffered channel with a slot per hook, which the calling goroutine
// waits on: consulting hooks costs no goroutine, and every slot gets exactly one answer
// (a decision, or a failure from the request path, the stream's death or the deadline).
type exchange struct {
	stage Stage
	hooks []*conn
	keys  []uint64 // each request's key on its hook's conn
	ch    chan answer
	// timer fires at the deadline shared by the round's requests.
	timer *time.Timer
}

// waitEnd says why [exchange.next] returned without an answer.
type waitEnd uint8

const (
	gotAnswer waitEnd = iota
	expired
	cancelled
)

// send asks every hook in hooks about call (and result, after execution), each request
// carrying traceContext, the call's (see [Hub.traceContext]). The requests share one
// deadline, the hub's timeout from now.
func (h *Hub) send(stage Stage, hooks []*conn, call *toolsdv1.HookCall, result *toolsdv1.HookResult, traceContext map[string]string) *exchange {
	x := &exchange{stage: stage, hooks: hooks, keys: make([]uint64, len(hooks)), ch: make(chan answer, len(hooks))}
	deadline := deadlineOf(h.opts.now().Add(h.opts.timeout))
	x.timer = time.NewTimer(h.opts.timeout)
	for i, c := range hooks {
		// One message per hook: its writer sets the request id, numbered per stream.
		m := requestMsg(stage, call, result, deadline)
		m.GetRequest().TraceContext = traceContext // only read from here on, as call is
		x.keys[i] = c.request(i, x.ch, m)
	}
	return x
}

// traceContext is the trace context headers of the span in ctx, a call's, for its
// requests: read once per call and stage, as its [toolsdv1.HookCall] is built once;
// nil when the hub sends none (see [WithTraceContext]).
func (h *Hub) traceContext(ctx context.Context) map[string]string {
	if h.opts.traceContext == nil {
		return nil
	}
	return h.opts.traceContext(ctx)
}

// next waits for the next answer, the deadline or the end of ctx. A call cancelled as
// the deadline passes, or as a request fails (the stream dropped, the queue was full,
// the verdict is not valid at the stage), is told cancelled, whichever select took:
// the hook did not fail a call that no longer waits for it.
func (x *exchange) next(ctx context.Context) (answer, waitEnd) {
	select {
	case a := <-x.ch:
		return x.answered(ctx, a)
	default:
	}
	select {
	case a := <-x.ch:
		return x.answered(ctx, a)
	case <-x.timer.C:
		if ctx.Err() != nil {
			return answer{}, cancelled
		}
		return answer{}, expired
	case <-ctx.Done():
		return answer{}, cancelled
	}
}

// answered is what next makes of a: a failure that comes once ctx has ended, a
// verdict not valid at the stage among them, is the cancellation.
func (x *exchange) answered(ctx context.Context, a answer) (answer, waitEnd) {
	if ctx.Err() != nil && (a.err != nil || !validAt(x.stage, a.d.GetVerdict())) {
		return answer{}, cancelled
	}
	return a, gotAnswer
}

// validAt reports whether a hook may give verdict v at stage (see preVerdict and
// postStep, which fail the hook for any other).
func validAt(stage Stage, v toolsdv1.HookVerdict) bool {
	switch v {
	case toolsdv1.HookVerdict_HOOK_VERDICT_UNSPECIFIED:
		return true
	case toolsdv1.HookVerdict_HOOK_VERDICT_ALLOW, toolsdv1.HookVerdict_HOOK_VERDICT_DENY, toolsdv1.HookVerdict_HOOK_VERDICT_ASK:
		return stage == StagePreExecute
	case toolsdv1.HookVerdict_HOOK_VERDICT_ACCEPT, toolsdv1.HookVerdict_HOOK_VERDICT_BLOCK, toolsdv1.HookVerdict_HOOK_VERDICT_REPLACE:
		return stage == StagePostExecute
	}
	return false
}

// close withdraws the requests still pending (their late decisions are then ignored)
// and stops the timer.
func (x *exchange) close() {
	x.timer.Stop()
	for i, c := range x.hooks {
		c.forget(x.keys[i])
	}
}
