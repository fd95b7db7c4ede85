package server

import (
	"sync"
	"time"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
)

// quietFor is how long a single-call batch starts quietly (see [quietStart]). It is the
// bound the durable log's result coalescing uses (session.coalesce's default), for the
// same reason: a call with two durable commits fits in it, and no agent loop waiting on
// a model notices it.
const quietFor = 5 * time.Millisecond

// quietStart lets a single-call batch that finishes quickly cost one write to its client
// and no goroutine besides the handler's.
//
// A batch normally sends accepted as soon as its plan is durable and starts a goroutine
// that reads the client's approvals and cancels. For one call that answers within
// [quietFor], both are waste: the accepted message goes out in a write of its own (the
// client wakes twice), and the reader is started only to be stopped. So a single-call
// batch holds its accepted message back and starts no reader, until one of:
//   - quietFor elapses (a slow call): the message is written and the reader started,
//     exactly as a multi-call batch would have done at the start;
//   - a message other than the result is about to go out (progress, an approval
//     request): the same, first, so that accepted still leads and an approval can be
//     answered;
//   - the result is ready: the message is written just before it, and no reader is
//     started, since nothing the client could send would change the batch any more.
//
// A client that goes away in the meantime still cancels the call (its stream's context
// ends); a cancel message sent in the quiet time is read when it ends.
type quietStart struct {
	out  *outbox
	wake func() // starts the reader

	mu    sync.Mutex
	state quietState
	msg   *toolsdv1.ExecuteBatchResponse // the held accepted message; nil once written
	timer *time.Timer
}

type quietState uint8

const (
	quietHolding  quietState = iota // nothing written, no reader
	quietWoken                      // accepted written, reader started
	quietFinished                   // accepted written before the result; no reader
)

func newQuietStart(out *outbox, wake func()) *quietStart {
	return &quietStart{out: out, wake: wake}
}

// hold keeps the accepted message m back for at most quietFor.
func (q *quietStart) hold(m *toolsdv1.ExecuteBatchResponse) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.state != quietHolding {
		return
	}
	q.msg = m
	q.timer = time.AfterFunc(quietFor, func() { _ = q.end() })
}

// end ends the quiet start for a message other than the result, or because quietFor has
// elapsed: the held message is written and the reader started. It returns the error of
// that write. Calls after the first do nothing.
func (q *quietStart) end() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.state != quietHolding {
		return nil
	}
	q.state = quietWoken
	if q.timer != nil {
		q.timer.Stop()
	}
	q.wake()
	return q.flushLocked()
}

// finish ends the quiet start for the result (or for the batch's failure): the held
// message, if any, is written; no reader is started. A timer firing later does nothing.
func (q *quietStart) finish() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.state == quietHolding {
		q.state = quietFinished
		if q.timer != nil {
			q.timer.Stop()
		}
	}
	return q.flushLocked()
}

// flushLocked writes the held message. It is the batch's first message, so the outbox
// (direct for a single call) writes it from this goroutine without waiting on the client.
func (q *quietStart) flushLocked() error {
	m := q.msg
	if m == nil {
		return nil
	}
	q.msg = nil
	return q.out.put(m)
}
