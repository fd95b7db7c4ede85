// Package tooltest has test helpers for code that runs calls.
package tooltest

import (
	"context"
	"sync/atomic"
	"time"
)

// LateTimer is a context whose deadline has passed once Passed is set, while its Done
// and Err stay those of the context it wraps: the state of a context whose deadline has
// passed but whose timer has not run yet (a timer's callback is a goroutine like any
// other, and may be scheduled late under load).
type LateTimer struct {
	context.Context
	Passed *atomic.Bool
}

// Deadline is an hour ahead, or a second ago once Passed is set.
func (c LateTimer) Deadline() (time.Time, bool) {
	if c.Passed.Load() {
		return time.Now().Add(-time.Second), true
	}
	return time.Now().Add(time.Hour), true
}
