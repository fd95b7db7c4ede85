package server

import (
	"context"
	"sync"
	"time"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/tool"
)

// streamApprover answers "ask" decisions over the ExecuteBatch stream: it sends an
// approval_request and waits for the client's approval message. Once the client has
// half-closed its side, no answer can come, so pending and later asks fail at once.
type streamApprover struct {
	out *outbox
	// before, if set, runs before an approval is requested: a quietly started batch
	// (see quietStart) writes its held accepted message and starts reading the client.
	before func() error

	mu      sync.Mutex
	pending map[string]chan tool.ApprovalDecision
	closed  bool
	gone    chan struct{} // closed when the client can no longer answer
}

var _ tool.Approver = (*streamApprover)(nil)

func newStreamApprover(out *outbox) *streamApprover {
	return &streamApprover{out: out, pending: make(map[string]chan tool.ApprovalDecision), gone: make(chan struct{})}
}

// Approve implements tool.Approver.
func (a *streamApprover) Approve(ctx context.Context, req tool.ApprovalRequest) (tool.ApprovalDecision, error) {
	if a.before != nil && a.before() != nil {
		return tool.ApprovalDecision{}, tool.ErrApprovalUnavailable
	}
	ch := make(chan tool.ApprovalDecision, 1)
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return tool.ApprovalDecision{}, tool.ErrApprovalUnavailable
	}
	a.pending[req.Call.CallID] = ch
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		delete(a.pending, req.Call.CallID)
		a.mu.Unlock()
	}()
	err := a.out.put(&toolsdv1.ExecuteBatchResponse{Msg: &toolsdv1.ExecuteBatchResponse_ApprovalRequest{
		ApprovalRequest: &toolsdv1.ApprovalRequest{
			CallId:        req.Call.CallID,
			Index:         uint32(req.Call.Index),
			Tool:          req.Call.Name,
			ArgumentsJson: string(req.Call.Arguments),
			Reason:        req.Reason,
		},
	}})
	if err != nil {
		return tool.ApprovalDecision{}, tool.ErrApprovalUnavailable
	}
	d, err := a.wait(ctx, ch)
	if err == nil {
		return d, nil // one that came with the deadline is refused by the pipeline
	}
	// The client's answer may have come just before the half-close or cancellation that
	// ended the wait (the reader handles its messages in order): the answer stands.
	select {
	case d := <-ch:
		return d, nil
	default:
		return tool.ApprovalDecision{}, err
	}
}

// wait waits for the answer on ch, the client's half-close, or the end of ctx. A client that stops reading is cut off meanwhile, as it is while
// results wait for room (see outbox.cutIfStalled): nothing else may be writing to it.
func (a *streamApprover) wait(ctx context.Context, ch chan tool.ApprovalDecision) (tool.ApprovalDecision, error) {
	var stall <-chan time.Time
	if a.out.timeout > 0 {
		t := time.NewTicker(a.out.timeout)
		defer t.Stop()
		stall = t.C
	}
	for {
		select {
		case d := <-ch:
			return d, nil
		case <-a.gone:
			return tool.ApprovalDecision{}, tool.ErrApprovalUnavailable
		case <-ctx.Done():
			return tool.ApprovalDecision{}, ctx.Err()
		case <-stall:
			if a.out.cutIfStalled() {
				return tool.ApprovalDecision{}, tool.ErrApprovalUnavailable
			}
		}
	}
}

// resolve delivers the client's decision; it reports false for a call nobody asked
// about. answered, if set, runs before the decision is delivered: what it records
// (the log line) happens before the call can go on, and so before the batch can end.
func (a *streamApprover) resolve(d *toolsdv1.ApprovalDecision, answered func()) bool {
	a.mu.Lock()
	ch, ok := a.pending[d.GetCallId()]
	if ok {
		delete(a.pending, d.GetCallId())
	}
	a.mu.Unlock()
	if !ok {
		return false
	}
	if answered != nil {
		answered()
	}
	ch <- tool.ApprovalDecision{Approved: d.GetApproved(), Reason: d.GetReason()}
	return true
}

// closeSide records that the client half-closed or vanished.
func (a *streamApprover) closeSide() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.closed {
		a.closed = true
		close(a.gone)
	}
}
