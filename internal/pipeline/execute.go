package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/toolsd/toolsd/internal/tool"
)

// metrics reports each call's pass through the execute chain to the [Observer]. A
// dispatch that panics finishes too, as INTERNAL (the call's result), so that the
// dispatches in flight do not count it forever.
func (s *snapshot) metrics(ctx context.Context, e *tool.Exec, t Tool, next Handler) (r tool.Result) {
	obs := s.p.opts.observer
	name := t.Definition().Name
	obs.DispatchStarted(name)
	start := s.p.opts.now()
	returned := false
	defer func() {
		code := r.Code()
		if !returned {
			code = tool.CodeInternal
		}
		obs.DispatchFinished(name, code, s.p.opts.now().Sub(start))
	}()
	r = next(ctx, e, t)
	returned = true
	return r
}

// errTimedOut is the cause of a dispatch context whose own timeout fired, as opposed
// to one ended by the call's context.
var errTimedOut = fmt.Errorf("tool timed out: %w", context.DeadlineExceeded)

// timeout bounds the whole dispatch, retries included. On expiry the provider call's
// context is cancelled (the Dispatcher forwards it) and a failed or cancelled result
// becomes TOOL_TIMEOUT, even when the call's context ends while the provider is still
// stopping: the timeout came first. A success that raced the deadline is kept. A
// failure at the caller's own, earlier deadline is not the tool's timeout.
func (s *snapshot) timeout(ctx context.Context, e *tool.Exec, t Tool, next Handler) tool.Result {
	d := s.timeoutFor(stateOf(ctx), t)
	deadline := s.p.opts.now().Add(d)
	tctx, cancel := context.WithTimeoutCause(ctx, d, errTimedOut)
	defer cancel()
	r := next(tctx, e, t)
	// A provider that honours the deadline it was sent fails at the same instant the
	// timer fires, so a failure at or past the deadline is the timeout's too. That is
	// the timeout's own deadline: tctx's is the caller's when the caller's comes first,
	// and a failure there, before the caller's context has noticed, is not a timeout.
	if r.IsError && (errors.Is(context.Cause(tctx), errTimedOut) ||
		ctx.Err() == nil && (tctx.Err() != nil || !s.p.opts.now().Before(deadline))) {
		return timedOut(e, r, d)
	}
	return r
}

// timedOut turns r, the failure of a call that ran out of time d, into TOOL_TIMEOUT.
//
//go:noinline
func timedOut(e *tool.Exec, r tool.Result, d time.Duration) tool.Result {
	return keepContexts(r, failure(e, tool.CodeToolTimeout, fmt.Sprintf("tool %q timed out after %s", e.Name, d), ""))
}

// timeoutFor picks the operator's timeout, else the definition's, else the default.
func (s *snapshot) timeoutFor(st *callState, t Tool) time.Duration {
	if st.settings.Timeout > 0 {
		return st.settings.Timeout
	}
	if d := t.Definition().Timeout; d > 0 {
		return d
	}
	return s.cfg.DefaultTimeout
}
