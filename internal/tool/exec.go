package tool

import (
	"context"
	"errors"
)

// Sentinel errors that cross package boundaries. Producers wrap them with %w; consumers
// match them with errors.Is.
var (
	// ErrUnknownTool: the name is not visible to the caller (never registered, filtered
	// by a restriction, conditional and outside the step's tool set — all alike).
	ErrUnknownTool = errors.New("tool: unknown tool")
	// ErrToolSetGone: the step's tool set was released, expired or invalidated; an
	// unstarted call may no longer use it.
	ErrToolSetGone = errors.New("tool: tool set no longer valid")
)

// Exec is one call in flight: the model's call plus the batch context that policy
// stages may read. Stages never rewrite Call.Arguments: what was logged is what runs.
type Exec struct {
	Call
	// Siblings are the tool names of every call in the batch, in model order.
	Siblings []string
	// Approver answers "ask" decisions; nil means nobody can answer (ask → denied).
	Approver Approver
	// Progress forwards provider progress for this call; nil drops it.
	Progress func(Progress)
}

// ApprovalRequest asks the agent loop to approve one call.
type ApprovalRequest struct {
	Call   *Call
	Reason string
}

// ApprovalDecision is the agent loop's answer.
type ApprovalDecision struct {
	Approved bool
	Reason   string
}

// Approver resolves "ask" decisions for the calls of one batch. Approve blocks until the
// loop answers, ctx ends, or the approver knows no answer can come.
type Approver interface {
	Approve(ctx context.Context, req ApprovalRequest) (ApprovalDecision, error)
}

// Approval failures an [Approver] returns; the pipeline maps them to result codes.
var (
	// ErrApprovalUnavailable: nobody can answer (the client half-closed its stream).
	ErrApprovalUnavailable = errors.New("tool: no approver can answer")
	// ErrApprovalTimeout: no answer arrived within the approval timeout.
	ErrApprovalTimeout = errors.New("tool: approval timed out")
)
