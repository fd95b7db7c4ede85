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
	// ErrToolSetGone: the step's tool set was released, expired or invalidated (or its
	// session deleted); an unstarted call may no longer use it.
	ErrToolSetGone = errors.New("tool: tool set no longer valid")
)

// Exec is one call in flight: the model's call plus the batch context that policy
// stages may read. Stages never rewrite Call.Arguments: what was logged is what runs.
type Exec struct {
	Call
	// Siblings are the tool names of every call in the batch, in model order.
	Siblings []string
	// Approver answers "ask" decisions; nil means nobody can answer (an ask fails
	// with APPROVAL_UNAVAILABLE).
	Approver Approver
	// Progress forwards provider progress for this call; nil drops it.
	Progress func(Progress)
	// Pin is opaque to all but the pipeline: the policy generation that gave the call
	// its mode, under which the call then runs, so that a reload between the two cannot
	// give it its mode under one policy and its decision under another. Nil until the
	// mode is read (a lone call's never is); the call then runs under the current one.
	Pin any
	// DefinitionMode is, like Pin, opaque to all but the pipeline: the mode it read from
	// the tool's definition when it gave the call its mode (parallel when the definition
	// says none or the tool did not resolve), unspecified when an operator's setting gave
	// it. A call scheduled as parallel this way whose tool is registered again as
	// exclusive before the call starts is not run.
	DefinitionMode Mode
}

// ApprovalRequest asks the agent loop to approve one call.
type ApprovalRequest struct {
	Call   *Call
	Reason string
	// Accept, if set, takes an answer that has arrived for the request: an approver
	// calls it before it acts on (or records) the answer, and uses the answer only if it
	// reports true. True makes the answer the call's outcome: the wait can no longer time
	// out. False means the wait has already ended (timed out, or the call was cancelled),
	// and the answer must be treated as one for a request nobody awaits. Without it, an
	// answer returned once the wait expired is refused as late.
	Accept func() bool
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
