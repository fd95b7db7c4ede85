package provider

import "time"

// WithRetakeClock has the provider time its retakes of a taken name by now and newTimer
// instead of the system clock, so a test decides when each retake is due.
func WithRetakeClock(now func() time.Time, newTimer func(time.Duration) (<-chan time.Time, func() bool)) Option {
	return func(o *options) { o.now, o.newTimer = now, newTimer }
}
