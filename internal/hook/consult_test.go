package hook

import (
	"context"
	"testing"
	"time"
)

// TestCancelledAtTheDeadlineIsCancelled: a call cancelled once the hooks' deadline has
// passed too is told cancelled every time, not expired (a hook failure, and for a
// fail-closed hook a deny) as often as select happens to take the timer.
func TestCancelledAtTheDeadlineIsCancelled(t *testing.T) {
	for i := range 200 {
		x := &exchange{ch: make(chan answer, 1), timer: time.NewTimer(0)}
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		// Past the timer's zero duration: both cases are ready. (Were the timer not
		// due yet, next would say cancelled anyway; this test could only pass wrongly.)
		time.Sleep(time.Millisecond)
		if _, end := x.next(ctx); end != cancelled {
			t.Fatalf("round %d: next() with ctx cancelled and the deadline passed = %v, want cancelled", i, end)
		}
	}
}
