package pipeline

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/toolsd/toolsd/internal/tool"
)

// retryable are the codes worth retrying: the provider went away or is not there yet.
var retryable = [...]tool.Code{tool.CodeProviderGone, tool.CodeProviderUnavailable}

// RetryableCodes returns the result codes after which an idempotent tool's call is
// retried: the code values of [Observer.Retried].
func RetryableCodes() []tool.Code { return slices.Clone(retryable[:]) }

// transient reports codes worth retrying.
func transient(c tool.Code) bool { return slices.Contains(retryable[:], c) }

// retry re-dispatches calls of tools the operator marked idempotent after a transient
// result, with exponential backoff and jitter: at most Retry.MaxAttempts tries, the first
// dispatch included, and no retry starting past Retry.Budget or ctx's deadline (nor a
// backoff waited that would reach either). Each retry re-resolves the tool, so a call is
// sent to its provider's new connection once it has reconnected; a try that finds the
// tool still unknown is spent waiting. A registration with another definition (another
// content hash) ends the retries: policy, guards and any approval decided on the
// definition the call was admitted with. Any other outcome ends the retries too, and the
// last dispatched result stands; an attempt answered ABORTED_BEFORE_DISPATCH (cancelled
// before the broker sent it) did not dispatch, so the failure before it stands. A call
// run with a tool set that has ended, or whose provider left (which ends the set), is
// not retried and waits no backoff (see setEnded).
func (s *snapshot) retry(ctx context.Context, e *tool.Exec, t Tool, next Handler) tool.Result {
	st := stateOf(ctx)
	st.attempt = 1
	if !st.settings.Idempotent {
		return next(ctx, e, t)
	}
	return s.retrying(ctx, st, e, t, next)
}

// retrying is retry for an idempotent tool. It is kept out of retry so that the frame
// every call passes through stays small (see the scheduler's stack reservation).
//
//go:noinline
func (s *snapshot) retrying(ctx context.Context, st *callState, e *tool.Exec, t Tool, next Handler) tool.Result {
	start := s.p.opts.now()
	r := next(ctx, e, t)
	cfg := s.cfg.Retry
	dispatches := 1
	for try := 2; try <= cfg.MaxAttempts && transient(r.Code()); try++ {
		if e.ToolSetID != "" && s.setEnded(ctx, e, t) {
			break
		}
		delay, now := s.p.opts.backoff(try, cfg), s.p.opts.now()
		// Compared as what is left of the budget: the time spent plus a delay near the
		// longest Duration would wrap around below zero and pass for within it.
		if delay > cfg.Budget-now.Sub(start) || pastDeadline(ctx, now, delay) {
			break
		}
		// A sleep may end on its timer with ctx ended too, or past ctx's deadline before
		// the timer that ends ctx has run: no attempt starts after a cancel or past the
		// deadline (the broker would not send it), so the call keeps the failure it had.
		if s.p.opts.sleep(ctx, delay) != nil || tool.Ended(ctx) {
			break
		}
		nt, err := s.p.res.Resolve(ctx, &e.Call)
		if errors.Is(err, tool.ErrUnknownTool) {
			continue
		}
		if err != nil || nt == nil || nt.Hash() != t.Hash() || nt.ValidateArguments(e.Arguments) != nil {
			break
		}
		t, st.tool = nt, nt
		dispatches++
		st.attempt = dispatches
		nr := next(ctx, e, t)
		if nr.Code() == tool.CodeAbortedBeforeDispatch {
			// Cancelled (or past its deadline) after the checks above, before the
			// broker handed the attempt to a stream: it never started, so it is not
			// counted as a retry, and the call keeps the failure it had, which says
			// an earlier attempt did.
			dispatches--
			break
		}
		if s.p.opts.observer != nil {
			s.p.opts.observer.Retried(nt.Definition().Name, r.Code(), st.attempt)
		}
		r = nr
	}
	if dispatches > 1 && r.Err != nil && r.Err.Reason == "" {
		errCopy := *r.Err
		errCopy.Reason = fmt.Sprintf("failed after %d attempts", dispatches)
		r.Err = &errCopy
	}
	return r
}

// setEnded reports whether the tool set that governs call e has ended (released,
// expired or invalidated), or is ending because t's provider left: its disconnect
// removes its tools, which ends every set that admitted them, and the registry may not
// have caught up when the call fails. No retry could go through the set, so the call
// keeps its failure at once rather than after a backoff that would only find that.
//
//go:noinline
func (s *snapshot) setEnded(ctx context.Context, e *tool.Exec, t Tool) bool {
	if s.providerLeft(t) {
		return true
	}
	_, err := s.p.res.Resolve(ctx, &e.Call)
	return errors.Is(err, tool.ErrToolSetGone)
}

// pastDeadline reports whether a wait of delay from now would reach ctx's deadline (the
// tool's timeout, or the caller's when that comes first): no retry could start after it,
// so it is not waited, as one past the budget is not, and the call keeps its failure.
func pastDeadline(ctx context.Context, now time.Time, delay time.Duration) bool {
	dl, ok := ctx.Deadline()
	return ok && delay >= dl.Sub(now)
}

// jitteredBackoff is the default delay before attempt number attempt (≥ 2): the base
// delay doubled per earlier retry, capped at MaxDelay, then "equal jitter" (half fixed,
// half uniformly random) so reconnecting providers are not stampeded. A doubling that
// would pass MaxDelay stops at it: past half the longest Duration it would wrap around.
func jitteredBackoff(attempt int, cfg RetryConfig) time.Duration {
	d := cfg.BaseDelay
	for i := 2; i < attempt && d < cfg.MaxDelay; i++ {
		if d > cfg.MaxDelay/2 {
			d = cfg.MaxDelay
			break
		}
		d *= 2
	}
	d = min(d, cfg.MaxDelay)
	half := d / 2
	return half + time.Duration(rand.Int64N(int64(d-half)+1))
}

// sleepCtx waits d or until ctx ends, whichever comes first.
func sleepCtx(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}
