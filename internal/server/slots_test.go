package server

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/toolsd/toolsd/internal/auth"
)

// TestBatchSlotsUnderContention: goroutines taking and giving places at once never
// hold more than the limits, overall or per identity, and leave none taken.
func TestBatchSlotsUnderContention(t *testing.T) {
	b := newBatchSlots(Limits{MaxBatches: 4, MaxBatchesPerIdentity: 2}, nil)
	var held atomic.Int64
	perHeld := map[string]*atomic.Int64{"a": {}, "b": {}}
	var wg sync.WaitGroup
	for g := range 16 {
		name := []string{"a", "b", ""}[g%3]
		ctx := auth.NewContext(context.Background(), auth.Identity{Name: name})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 500 {
				s, err := b.take(ctx, name == "")
				if err != nil {
					continue
				}
				if n := held.Add(1); n > 4 {
					t.Errorf("%d places held, over max_batches 4", n)
				}
				if name != "" {
					if n := perHeld[name].Add(1); n > 2 {
						t.Errorf("%d places held by %s, over max_batches_per_identity 2", n, name)
					}
					perHeld[name].Add(-1)
				}
				held.Add(-1)
				b.give(s)
			}
		}()
	}
	wg.Wait()
	if n := b.n.Load(); n != 0 || len(b.per) != 0 {
		t.Errorf("after every place was given back: %d taken, per identity %v, want none", n, b.per)
	}
}
