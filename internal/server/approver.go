package server

import (
	"context"
	"errors"
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
	// waitEnded, if set, runs when the wait for an answer ended without one (half-close,
	// cancellation, the approval timeout), before the wait is withdrawn: for tests that
	// order an answer read meanwhile against the withdrawal (see Deps.ApprovalWaitEnded).
	waitEnded func()
	// registered, if set, runs once a call's wait is registered, before its request is
	// queued: for tests that order two calls' requests (see TestRequestIdsInSendOrder).
	registered func(callID string)

	mu      sync.Mutex
	pending map[string]*awaiting
	asks    uint64 // the last request id sent: they are numbered 1, 2, 3, … per stream, in the order sent
	closed  bool
	gone    chan struct{} // closed when the client can no longer answer
}

// awaiting is one call's approval wait. Whoever removes it from pending decides the
// outcome: resolve with the client's answer (sent on ch), or Approve when its wait ends
// without one.
type awaiting struct {
	ch     chan tool.ApprovalDecision // buffered: resolve never waits
	accept func() bool                // the pipeline's [tool.ApprovalRequest.Accept]; nil: none
	// id is the request's request_id, and asked is set with it (under mu) just before
	// the request is handed to the stream: an answer read before then was sent before
	// the client could have seen the request, and a decision that names another request
	// (an earlier one of the call, withdrawn since) is not an answer to this one.
	id    uint64
	asked bool
}

var _ tool.Approver = (*streamApprover)(nil)

// errAlreadyAwaiting refuses an approval asked for a call that already awaits one on
// the stream: the client answers by call id, so one call has one request at a time.
var errAlreadyAwaiting = errors.New("server: the call already awaits an approval")

func newStreamApprover(out *outbox) *streamApprover {
	return &streamApprover{out: out, pending: make(map[string]*awaiting), gone: make(chan struct{})}
}

// Approve implements tool.Approver. A second Approve for a call whose first still
// waits is refused at once (errAlreadyAwaiting); the first keeps its request.
func (a *streamApprover) Approve(ctx context.Context, req tool.ApprovalRequest) (tool.ApprovalDecision, error) {
	if a.before != nil && a.before() != nil {
		return tool.ApprovalDecision{}, tool.ErrApprovalUnavailable
	}
	w := &awaiting{ch: make(chan tool.ApprovalDecision, 1), accept: req.Accept}
	id := req.Call.CallID
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return tool.ApprovalDecision{}, tool.ErrApprovalUnavailable
	}
	if _, dup := a.pending[id]; dup {
		// Replacing the entry would leave the first wait without an answer until it
		// ended, and refuse the client's answer to it as a stray.
		a.mu.Unlock()
		return tool.ApprovalDecision{}, errAlreadyAwaiting
	}
	a.pending[id] = w
	a.mu.Unlock()
	if a.registered != nil {
		a.registered(id)
	}
	m := &toolsdv1.ApprovalRequest{
		CallId:        id,
		Index:         uint32(req.Call.Index),
		Tool:          req.Call.Name,
		ArgumentsJson: req.Call.Arguments,
		Reason:        req.Reason,
	}
	// Numbered as it is handed to the stream (one message at a time: the outbox's
	// sender, or a direct put under its lock), so that the client reads the ids in order
	// even when calls ask at once and their requests are queued in another order than
	// they were registered.
	err := a.out.putAsk(&toolsdv1.ExecuteBatchResponse{Msg: &toolsdv1.ExecuteBatchResponse_ApprovalRequest{ApprovalRequest: m}}, func() {
		a.mu.Lock()
		a.asks++
		w.id, w.asked = a.asks, true
		a.mu.Unlock()
		m.RequestId = w.id
	})
	if err != nil {
		a.withdraw(id, w)
		return tool.ApprovalDecision{}, tool.ErrApprovalUnavailable
	}
	d, err := a.wait(ctx, w.ch)
	if err == nil {
		return d, nil
	}
	if a.waitEnded != nil {
		a.waitEnded()
	}
	// The wait ended without the answer (half-close, cancellation, the approval timeout):
	// the wait is over unless resolve took an answer first, which then stands; it is on
	// its way (the client's answer may have come just before what ended the wait, as
	// the reader handles its messages in order).
	if a.withdraw(id, w) {
		return tool.ApprovalDecision{}, err
	}
	return <-w.ch, nil
}

// withdraw ends w's wait, reporting false if resolve had already taken an answer for it.
func (a *streamApprover) withdraw(id string, w *awaiting) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.pending[id] != w {
		return false
	}
	delete(a.pending, id)
	return true
}

// wait waits for the answer on ch, the client's half-close, or the end of ctx. A client
// that stops reading is cut off meanwhile, as it is while results wait for room (see
// outbox.cutIfStalled): nothing else may be writing to it.
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

// resolve delivers the client's decision; it reports false for a call that is not
// awaiting one: never asked, its request not yet handed to the stream (the decision was
// sent before the client could have seen it), already decided, or its wait over (timed
// out or cancelled: the pipeline's Accept refuses); and for a decision naming a request
// other than the one its call awaits (an earlier one, withdrawn since). A decision
// without a request id (a client older than the field) answers the call's request, as
// before. answered, if set, runs only for a decision that is delivered, and before it
// is: what it records (the log line) happens before the call can go on, and so before
// the batch can end.
func (a *streamApprover) resolve(d *toolsdv1.ApprovalDecision, answered func()) bool {
	a.mu.Lock()
	w, ok := a.pending[d.GetCallId()]
	ok = ok && w.asked && (d.GetRequestId() == 0 || d.GetRequestId() == w.id) && (w.accept == nil || w.accept())
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
	w.ch <- tool.ApprovalDecision{Approved: d.GetApproved(), Reason: d.GetReason()}
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
