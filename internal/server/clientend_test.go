package server

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/toolsd/toolsd/internal/tool/tooltest"
)

// TestClientEndTellsTheDeadlineFromACancel: a stream that ends Canceled within
// deadlineSlack of its deadline ended by it (the client's reset came before toolsd's
// timer), as did one whose deadline has passed with its timer yet to run; one cancelled
// long before it, or with no deadline, was cancelled.
func TestClientEndTellsTheDeadlineFromACancel(t *testing.T) {
	tests := map[string]struct {
		deadline time.Duration // from now; 0: none
		late     bool          // the deadline has passed, its timer has yet to run
		end      func(ctx context.Context, cancel context.CancelFunc)
		want     error
	}{
		"running":                 {deadline: time.Hour, end: func(context.Context, context.CancelFunc) {}, want: nil},
		"cancelled, no deadline":  {end: func(_ context.Context, c context.CancelFunc) { c() }, want: context.Canceled},
		"cancelled long before":   {deadline: time.Hour, end: func(_ context.Context, c context.CancelFunc) { c() }, want: context.Canceled},
		"reset just before":       {deadline: deadlineSlack / 10, end: func(_ context.Context, c context.CancelFunc) { c() }, want: context.DeadlineExceeded},
		"its own timer fired":     {deadline: time.Nanosecond, end: func(ctx context.Context, _ context.CancelFunc) { <-ctx.Done() }, want: context.DeadlineExceeded},
		"reset past the deadline": {deadline: time.Nanosecond, end: func(_ context.Context, c context.CancelFunc) { c() }, want: context.DeadlineExceeded},
		"passed, its timer late":  {late: true, end: func(context.Context, context.CancelFunc) {}, want: context.DeadlineExceeded},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			if tc.deadline > 0 {
				ctx, cancel = context.WithTimeout(t.Context(), tc.deadline)
			}
			defer cancel()
			if tc.late {
				passed := &atomic.Bool{}
				passed.Store(true)
				ctx = tooltest.LateTimer{Context: ctx, Passed: passed}
			}
			e := watchClientEnd(ctx, nil)
			defer e.stop()
			tc.end(ctx, cancel)
			if got := e.err(); !errors.Is(got, tc.want) || (got == nil) != (tc.want == nil) {
				t.Errorf("clientEnd.err() = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestClientEndOfAFailure: a handler's failure that the stream's end caused (gRPC's
// Recv answering Canceled, a wait's context error) is read as the client ended the
// stream; any other failure, or one of a stream that still runs, is kept.
func TestClientEndOfAFailure(t *testing.T) {
	recvCanceled := status.Error(codes.Canceled, "context canceled")
	tests := map[string]struct {
		deadline time.Duration // from now, the stream then reset
		failure  error
		want     codes.Code
	}{
		"recv, reset at the deadline":  {deadline: deadlineSlack / 10, failure: recvCanceled, want: codes.DeadlineExceeded},
		"wait, reset at the deadline":  {deadline: deadlineSlack / 10, failure: fmt.Errorf("session log: %w", context.Canceled), want: codes.DeadlineExceeded},
		"recv, reset long before":      {deadline: time.Hour, failure: recvCanceled, want: codes.Canceled},
		"another failure":              {deadline: deadlineSlack / 10, failure: errShuttingDown, want: codes.Unavailable},
		"another status":               {deadline: deadlineSlack / 10, failure: status.Error(codes.ResourceExhausted, "too large"), want: codes.ResourceExhausted},
		"the stream runs, recv failed": {deadline: -1, failure: recvCanceled, want: codes.Canceled},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			if tc.deadline > 0 {
				ctx, cancel = context.WithTimeout(t.Context(), tc.deadline)
				defer cancel()
			}
			e := watchClientEnd(ctx, nil)
			defer e.stop()
			if tc.deadline > 0 {
				cancel()
			}
			if got := status.Code(toStatus(zap.NewNop(), e.of(tc.failure))); got != tc.want {
				t.Errorf("toStatus(clientEnd.of(%v)) = %v, want %v", tc.failure, got, tc.want)
			}
		})
	}
}

// TestClientEndCauseOfABatch: the cause a batch ends with when its client ends the
// stream, which the cancels of its calls carry to their providers, says which end it
// was: the deadline (reset at it, or toolsd's timer fired) or a cancel. The stream's
// own context says "context canceled" for both. A cause toolsd gave is kept.
func TestClientEndCauseOfABatch(t *testing.T) {
	recvCanceled := status.Error(codes.Canceled, "context canceled")
	tests := map[string]struct {
		deadline time.Duration // from now, the stream then reset; 0: none
		failure  error         // a Recv's failure; nil: the watch's own cause
		want     error
	}{
		"reset at the deadline":          {deadline: deadlineSlack / 10, want: errAgentDeadline},
		"its own timer fired":            {deadline: time.Nanosecond, want: errAgentDeadline},
		"cancelled long before":          {deadline: time.Hour, want: errAgentCancelled},
		"cancelled, no deadline":         {want: errAgentCancelled},
		"recv, reset at the deadline":    {deadline: deadlineSlack / 10, failure: recvCanceled, want: errAgentDeadline},
		"recv, reset long before":        {deadline: time.Hour, failure: recvCanceled, want: errAgentCancelled},
		"recv, a message toolsd refused": {deadline: time.Hour, failure: errRequestTooLarge, want: errRequestTooLarge},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			if tc.deadline > 0 {
				ctx, cancel = context.WithTimeout(t.Context(), tc.deadline)
			}
			defer cancel()
			causes := make(chan error, 1)
			e := watchClientEnd(ctx, func(cause error) { causes <- cause })
			defer e.stop()
			if tc.deadline != time.Nanosecond {
				cancel()
			}
			got := <-causes
			if tc.failure != nil {
				got = e.cause(tc.failure)
			}
			if !errors.Is(got, tc.want) {
				t.Errorf("cause = %v, want %v", got, tc.want)
			}
		})
	}
}
