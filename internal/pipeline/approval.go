package pipeline

import (
	"context"
	"errors"
	"fmt"

	"github.com/toolsd/toolsd/internal/tool"
)

// approval resolves an Ask verdict through the batch's approver, bounded by the
// configured approval timeout. Approval lets the call go on to the guards.
func (s *snapshot) approval(ctx context.Context, e *tool.Exec, t Tool, next Handler) tool.Result {
	st := stateOf(ctx)
	if st.verdict.Decision != Ask {
		return next(ctx, e, t)
	}
	if e.Approver == nil {
		return failure(e, tool.CodeApprovalUnavailable, msgNoApprover, "")
	}
	question := st.verdict.Reason
	if question == "" {
		question = st.verdict.UserReason
	}
	if question == "" {
		question = fmt.Sprintf("tool %q requires approval", e.Name)
	}
	actx, cancel := context.WithTimeout(ctx, s.cfg.ApprovalTimeout)
	d, err := e.Approver.Approve(actx, tool.ApprovalRequest{Call: &st.exposed(e).Call, Reason: question})
	expired := errors.Is(actx.Err(), context.DeadlineExceeded)
	cancel()
	switch {
	case ctx.Err() != nil:
		return failure(e, tool.CodeAbortedBeforeDispatch, msgCancelledBefore, "")
	case err == nil && d.Approved:
		return next(ctx, e, t)
	case err == nil:
		msg := msgNotApproved
		if d.Reason != "" {
			msg += ": " + d.Reason
		}
		return failure(e, tool.CodeApprovalDenied, msg, d.Reason)
	case errors.Is(err, tool.ErrApprovalTimeout), expired:
		return failure(e, tool.CodeApprovalTimeout,
			fmt.Sprintf("approval timed out after %s", s.cfg.ApprovalTimeout), "")
	case errors.Is(err, tool.ErrApprovalUnavailable):
		return failure(e, tool.CodeApprovalUnavailable, msgNoApprover, "")
	default:
		return failure(e, tool.CodeApprovalUnavailable, msgNoApprover, err.Error())
	}
}
