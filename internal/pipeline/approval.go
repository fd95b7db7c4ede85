package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/toolsd/toolsd/internal/textcut"
	"github.com/toolsd/toolsd/internal/tool"
)

// approval resolves an Ask verdict through the batch's approver, bounded by the
// configured approval timeout. Approval lets the call go on to the guards.
func (s *snapshot) approval(ctx context.Context, e *tool.Exec, r *tool.Result) bool {
	st := stateOf(ctx)
	if st.verdict.Decision != Ask {
		return true
	}
	res, ok := s.ask(ctx, e, st)
	if !ok {
		*r = res
	}
	return ok
}

// ask puts the call's question to the approver: true is an approval, false comes with
// the call's failure. A call whose context ended as its policy decided is not asked (the
// approver would show the client a question about a call it has cancelled): it was
// cancelled before dispatch.
//
//go:noinline
func (s *snapshot) ask(ctx context.Context, e *tool.Exec, st *callState) (tool.Result, bool) {
	if ctx.Err() != nil {
		return failure(e, tool.CodeAbortedBeforeDispatch, msgCancelledBefore, ""), false
	}
	if e.Approver == nil {
		return failure(e, tool.CodeApprovalUnavailable, msgNoApprover, ""), false
	}
	question := st.verdict.Reason
	if question == "" {
		question = st.verdict.UserReason
	}
	if question == "" {
		question = fmt.Sprintf("tool %q requires approval", e.Name)
	}
	// The wait's own timer is told apart by its cause: a caller's deadline that passes
	// first (a client's RPC deadline) ends the wait with DeadlineExceeded too, but it
	// cancelled the call; the approval did not time out. A timer that fires once the
	// caller has cancelled, as the approver returns, finds the wait ended already.
	actx, cancel := context.WithCancelCause(ctx)
	var w approvalWait
	stop := s.p.opts.after(s.cfg.ApprovalTimeout, func() {
		if ctx.Err() == nil && w.end(waitExpired) {
			cancel(errApprovalExpired)
		}
	})
	d, err := e.Approver.Approve(actx, tool.ApprovalRequest{Call: &st.exposed(e).Call, Reason: question, Accept: func() bool {
		return actx.Err() == nil && w.end(waitAnswered)
	}})
	stop()
	w.end(waitReturned) // an answer not accepted by now can no longer be
	outcome := w.outcome()
	cancel(nil)
	// Exactly one of an accepted answer and the wait's expiry decides: whichever ended
	// the wait first. A wait that expired, or a denial, came before any cancellation that
	// followed it and is the more specific outcome: it stays. Only an approval (or no
	// answer) gives way to the cancellation.
	switch {
	case outcome == waitExpired:
		// Checked before the answer: an approval that comes once the wait has expired
		// (an approver may return one it got just after its deadline) does not run the call.
		return approvalTimedOut(e, s.cfg.ApprovalTimeout), false
	case err == nil && !d.Approved:
		reason := approvalReason(d.Reason)
		msg := msgNotApproved
		if reason != "" {
			msg += ": " + reason
		}
		return failure(e, tool.CodeApprovalDenied, msg, reason), false
	case ctx.Err() != nil:
		return failure(e, tool.CodeAbortedBeforeDispatch, msgCancelledBefore, ""), false
	case errors.Is(err, tool.ErrApprovalTimeout):
		return approvalTimedOut(e, s.cfg.ApprovalTimeout), false
	case err == nil:
		return tool.Result{}, true
	case errors.Is(err, tool.ErrApprovalUnavailable):
		return failure(e, tool.CodeApprovalUnavailable, msgNoApprover, ""), false
	default:
		return failure(e, tool.CodeApprovalUnavailable, msgNoApprover, err.Error()), false
	}
}

// approvalWait is how one approval wait ended: the first of an accepted answer, the
// timer's expiry, and the approver's return (with no answer accepted) wins, and the
// others find the outcome decided.
type approvalWait struct{ state atomic.Int32 }

const (
	waitPending int32 = iota
	waitAnswered
	waitExpired
	waitReturned
)

// end records outcome, reporting false if the wait had already ended otherwise.
func (w *approvalWait) end(outcome int32) bool {
	return w.state.CompareAndSwap(waitPending, outcome) || w.state.Load() == outcome
}

func (w *approvalWait) outcome() int32 { return w.state.Load() }

// errApprovalExpired is the cause of an approval wait whose own timeout fired.
var errApprovalExpired = fmt.Errorf("approval wait expired: %w", context.DeadlineExceeded)

// approvalTimedOut is the failure of a call whose approval wait of d expired.
func approvalTimedOut(e *tool.Exec, d time.Duration) tool.Result {
	return failure(e, tool.CodeApprovalTimeout, fmt.Sprintf("approval timed out after %s", d), "")
}

// MaxApprovalReasonBytes bounds a denial's reason, as a hook's is bounded: it becomes
// the call's result (its content, message and reason), which no result size limit
// covers, and an approver may send as much as a request holds.
const MaxApprovalReasonBytes = 4096

// approvalReason is a denial's reason, cut at MaxApprovalReasonBytes on a rune boundary.
func approvalReason(r string) string {
	if len(r) <= MaxApprovalReasonBytes {
		return r
	}
	return textcut.Prefix(r, MaxApprovalReasonBytes-len("…")) + "…"
}
