package provider

import (
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
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

// TestWithLoggerNil: a nil logger means no logging, also after another WithLogger.
func TestWithLoggerNil(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	p := New("p", WithLogger(zap.New(core)), WithLogger(nil))
	p.log.Info("should not be logged")
	if n := logs.Len(); n != 0 {
		t.Errorf("WithLogger(l), WithLogger(nil): %d entries logged, want none", n)
	}
}
