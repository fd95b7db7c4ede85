package server

import (
	"sync"
	"time"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
)

// quietStart lets a single-call batch that finishes quickly cost its client one write
// and the server no goroutine besides the handler's (Limits.AcceptedHold > 0).
//
// A batch normally sends accepted as soon as its plan is durable and starts a goroutine
// that reads the client's approvals and cancels. For one call that answers quickly, the
// accepted message leaves in a write of its own just before the result's, and the
// reader is started only to be stopped; in paired runs at one agent the reader alone
// cost 3–8 % of a call's latency (it is scheduled between the call's dispatch and the
// transport's write to the provider). So a single-call batch holds its accepted message
// back and starts no reader until the first of:
//   - the hold time elapses (a slow call): accepted is written and the reader started,
//     as a multi-call batch does at its start;
//   - a message other than the result is about to go out (progress, an approval
//     request): the same, first, so that accepted still leads the stream and an
//     approval can be answered;
//   - the result is ready: accepted is written just before it, and no reader is
//     started.
//
// The price, documented on BatchAccepted: a cancel message sent during the hold is read
// when the hold ends, so a call that finishes within the hold completes (and its
// result says so). A client that goes away still cancels the call at once, because
// its stream's context ends. Limits.AcceptedHold = 0 turns all of this off.
type quietStart struct {
	out  *outbox
	d    time.Duration
	wake func() // starts the reader

	mu    sync.Mutex
	msg   *toolsdv1.ExecuteBatchResponse // the held message; nil before hold and once written
	done  bool                           // the hold has ended: later calls do nothing
	timer *time.Timer
}

func newQuietStart(out *outbox, d time.Duration, wake func()) *quietStart {
	return &quietStart{out: out, d: d, wake: wake}
}

// hold keeps the accepted message m back for at most the hold time. If the hold has
// already ended (it cannot, today: accepted is the batch's first message), m is written
// at once rather than lost.
func (q *quietStart) hold(m *toolsdv1.ExecuteBatchResponse) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.done {
		return q.out.put(m)
	}
	q.msg = m
	q.timer = time.AfterFunc(q.d, func() { _ = q.end() })
	return nil
}

// end ends the hold for a message other than the result, or because the hold time has
// elapsed: the held message is written and the reader started. It returns the error of
// that write.
func (q *quietStart) end() error { return q.stop(true) }

// finish ends the hold for the result (or the batch's failure): the held message is
// written, and no reader is started.
func (q *quietStart) finish() error { return q.stop(false) }

func (q *quietStart) stop(wake bool) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.done {
		return nil
	}
	q.done = true
	if q.timer != nil {
		q.timer.Stop()
	}
	if wake {
		q.wake()
	}
	m := q.msg
	q.msg = nil
	if m == nil {
		return nil
	}
	// The batch's first message, and the outbox of a single-call batch is direct: the
	// write happens on this goroutine and cannot wait on the client (see directLimit).
	// Progress ends the hold from a provider's receive loop, which must never wait on a
	// client.
	return q.out.put(m)
}
