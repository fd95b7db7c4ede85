package server

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestClientEndTellsTheDeadlineFromACancel: a stream that ends Canceled within
// deadlineSlack of its deadline ended by it (the client's reset came before toolsd's
// timer); one cancelled long before it, or with no deadline, was cancelled.
func TestClientEndTellsTheDeadlineFromACancel(t *testing.T) {
	tests := map[string]struct {
		deadline time.Duration // from now; 0: none
		end      func(ctx context.Context, cancel context.CancelFunc)
		want     error
	}{
		"running":                 {deadline: time.Hour, end: func(context.Context, context.CancelFunc) {}, want: nil},
		"cancelled, no deadline":  {end: func(_ context.Context, c context.CancelFunc) { c() }, want: context.Canceled},
		"cancelled long before":   {deadline: time.Hour, end: func(_ context.Context, c context.CancelFunc) { c() }, want: context.Canceled},
		"reset just before":       {deadline: deadlineSlack / 10, end: func(_ context.Context, c context.CancelFunc) { c() }, want: context.DeadlineExceeded},
		"its own timer fired":     {deadline: time.Nanosecond, end: func(ctx context.Context, _ context.CancelFunc) { <-ctx.Done() }, want: context.DeadlineExceeded},
		"reset past the deadline": {deadline: time.Nanosecond, end: func(_ context.Context, c context.CancelFunc) { c() }, want: context.DeadlineExceeded},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			if tc.deadline > 0 {
				ctx, cancel = context.WithTimeout(t.Context(), tc.deadline)
			}
			defer cancel()
			e := watchClientEnd(ctx)
			defer e.stop()
			tc.end(ctx, cancel)
			if got := e.err(); !errors.Is(got, tc.want) || (got == nil) != (tc.want == nil) {
				t.Errorf("clientEnd.err() = %v, want %v", got, tc.want)
			}
		})
	}
}
