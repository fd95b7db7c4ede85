package provider

import (
	"testing"
	"time"
)

// TestWithBackoff: the delay never shrinks as it grows (a maximum below the minimum is
// the minimum), and a maximum of 0 keeps the default.
func TestWithBackoff(t *testing.T) {
	for _, tc := range []struct {
		minDelay, maxDelay, wantMin, wantMax time.Duration
	}{
		{time.Second, 5 * time.Second, time.Second, 5 * time.Second},
		{20 * time.Second, 5 * time.Second, 20 * time.Second, 20 * time.Second},
		{time.Second, 0, time.Second, DefaultMaxBackoff},
		{0, time.Minute, DefaultMinBackoff, time.Minute},
	} {
		p := New("p", WithBackoff(tc.minDelay, tc.maxDelay))
		if p.opts.backoffMin != tc.wantMin || p.opts.backoffMax != tc.wantMax {
			t.Errorf("WithBackoff(%v, %v): min %v, max %v; want %v, %v", tc.minDelay, tc.maxDelay,
				p.opts.backoffMin, p.opts.backoffMax, tc.wantMin, tc.wantMax)
		}
	}
}
