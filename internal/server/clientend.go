package server

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/toolsd/toolsd/internal/tool"
)

// deadlineSlack is how long before its deadline a stream may end and still have ended
// by it. A client whose deadline passes resets the stream, as a cancel does, and the
// reset may come before toolsd's own timer for that deadline: the deadline travels as a
// timeout, counted from when the stream's headers arrived, so toolsd's runs later than
// the client's by their trip, and the reset's trip can be the shorter. The stream's
// context then ends Canceled, a little before its deadline.
const deadlineSlack = 100 * time.Millisecond

// clientEnd tells, once an RPC's context has ended without toolsd ending it, whether
// its client cancelled or its deadline came (see [clientEnd.err]). An RPC without a
// deadline needs no watch: its end can only be a cancel. Nor does one whose handler
// returns as soon as its stream ends: a clientEnd{ctx: ctx}, not watched, takes the
// end to be when it is asked.
type clientEnd struct {
	ctx  context.Context // the RPC's
	at   atomic.Int64    // when ctx was seen to end (UnixNano), 0 before
	stop func() bool
}

// watchClientEnd starts noting when ctx, a stream's context, ends, and then calls
// onEnd, when not nil, with the end's cause (see [clientEnd.cause]); the caller calls
// stop once the handler no longer needs to know.
func watchClientEnd(ctx context.Context, onEnd func(cause error)) *clientEnd {
	e := &clientEnd{ctx: ctx}
	if _, ok := ctx.Deadline(); ok || onEnd != nil {
		e.stop = context.AfterFunc(ctx, func() {
			e.at.Store(time.Now().UnixNano())
			if onEnd != nil {
				onEnd(e.cause(context.Cause(ctx)))
			}
		})
	} else {
		e.stop = func() bool { return false }
	}
	return e
}

// err is how the stream ended, nil while it runs: context.DeadlineExceeded when its
// deadline came (its timer fired, or it ended within deadlineSlack of the deadline, or
// the deadline has passed while the timer that ends it has yet to run, as the scheduler
// reads it: see [tool.Ended]), context.Canceled when its client cancelled or went away.
func (e *clientEnd) err() error {
	err := e.ctx.Err()
	if err == nil && tool.Ended(e.ctx) {
		return context.DeadlineExceeded
	}
	if !errors.Is(err, context.Canceled) {
		return err
	}
	d, ok := e.ctx.Deadline()
	if !ok {
		return err
	}
	at := time.Now() // the end's note may not have been written yet: later than the end
	if n := e.at.Load(); n != 0 {
		at = time.Unix(0, n)
	}
	if at.Before(d.Add(-deadlineSlack)) {
		return err
	}
	return context.DeadlineExceeded
}

// of is err, a failure of the handler's that the stream's end may have caused (gRPC's
// Recv answers Canceled for a stream its client reset, whatever the reason; a wait under
// the stream's context, its context's error), as the client ended the stream: Canceled
// or DeadlineExceeded (see [clientEnd.err]). Any other err is returned as it is.
func (e *clientEnd) of(err error) error {
	if !errors.Is(err, context.Canceled) && status.Code(err) != codes.Canceled {
		return err
	}
	if end := e.err(); end != nil {
		return end
	}
	return err
}

// Causes of a batch whose client ended its stream, which the cancels of its calls
// carry to their providers as the reason: the stream's own context says "context
// canceled" for a deadline too, since the client resets the stream at its deadline,
// often before toolsd's timer for it fires (see [deadlineSlack]).
var (
	errAgentCancelled = errors.New("server: the agent cancelled the batch's RPC or went away")
	errAgentDeadline  = errors.New("server: the agent's deadline for the batch passed")
)

// cause is why a batch whose stream ended with err (its context's cause, or the
// failure of a Recv) ends: errAgentDeadline or errAgentCancelled when its client ended
// the stream (see [clientEnd.of]), any other err as it is.
func (e *clientEnd) cause(err error) error {
	switch end := e.of(err); {
	case errors.Is(end, context.DeadlineExceeded) || status.Code(end) == codes.DeadlineExceeded:
		return errAgentDeadline
	case errors.Is(end, context.Canceled) || status.Code(end) == codes.Canceled:
		return errAgentCancelled
	}
	return err
}

// streamEnd is err, a failure of a handler that returns as soon as its stream ends (a
// watch), read at its return: once the stream has ended, its client's end, Canceled or
// DeadlineExceeded (see [clientEnd.of]), whatever the store or a Send answered; as a
// status for the RPC's log line and metrics.
func (s *Server) streamEnd(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		err = ctx.Err()
	}
	return toStatus(s.log, (&clientEnd{ctx: ctx}).of(err))
}
