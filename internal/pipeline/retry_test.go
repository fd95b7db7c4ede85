package pipeline

import (
	"math"
	"testing"
	"time"
)

func TestJitteredBackoff(t *testing.T) {
	cfg := RetryConfig{BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second}
	tests := map[string]struct {
		attempt int
		ceiling time.Duration
	}{
		"first retry":  {attempt: 2, ceiling: 100 * time.Millisecond},
		"second retry": {attempt: 3, ceiling: 200 * time.Millisecond},
		"third retry":  {attempt: 4, ceiling: 400 * time.Millisecond},
		"capped":       {attempt: 10, ceiling: time.Second},
		"far out":      {attempt: 200, ceiling: time.Second},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			seen := map[time.Duration]bool{}
			for range 200 {
				d := jitteredBackoff(tc.attempt, cfg)
				if d < tc.ceiling/2 || d > tc.ceiling {
					t.Fatalf("jitteredBackoff(%d) = %v, want in [%v, %v]", tc.attempt, d, tc.ceiling/2, tc.ceiling)
				}
				seen[d] = true
			}
			if len(seen) < 2 {
				t.Errorf("jitteredBackoff(%d) gave %d distinct delays in 200 draws, want jitter", tc.attempt, len(seen))
			}
		})
	}
}

// TestJitteredBackoffHugeDelays: delays so long that doubling them passes the longest
// Duration are capped at MaxDelay like any other, not wrapped around below zero (which
// made the jitter's random draw panic, and the call INTERNAL).
func TestJitteredBackoffHugeDelays(t *testing.T) {
	tests := map[string]struct {
		cfg     RetryConfig
		attempt int
	}{
		"1500000h up to 2562047h": {
			cfg:     RetryConfig{BaseDelay: 1500000 * time.Hour, MaxDelay: 2562047 * time.Hour},
			attempt: 3,
		},
		"longest": {
			cfg:     RetryConfig{BaseDelay: time.Duration(math.MaxInt64), MaxDelay: time.Duration(math.MaxInt64)},
			attempt: 5,
		},
		"past half the longest, far out": {
			cfg:     RetryConfig{BaseDelay: time.Duration(math.MaxInt64/2 + 1), MaxDelay: time.Duration(math.MaxInt64)},
			attempt: 200,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			for range 50 {
				d := jitteredBackoff(tc.attempt, tc.cfg)
				if d < tc.cfg.MaxDelay/2 || d > tc.cfg.MaxDelay {
					t.Fatalf("jitteredBackoff(%d, %+v) = %v, want in [%v, %v]", tc.attempt, tc.cfg, d, tc.cfg.MaxDelay/2, tc.cfg.MaxDelay)
				}
			}
		})
	}
}
