package pipeline

import (
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
