package server

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
)

// The limits a batch can be refused for, as Deps.BatchRefused names them.
const (
	LimitMaxBatches            = "max_batches"
	LimitMaxBatchesPerIdentity = "max_batches_per_identity"
)

// batchSlots counts the batches in flight (sent their batch, handler not returned),
// overall and per confined identity, so that one tenant's streams, each holding up to
// max_request_bytes of calls, cannot exhaust memory or take every place. A stream
// waiting for its batch holds none: first_message_timeout bounds those.
type batchSlots struct {
	max, maxPerID int
	refused       func(limit string)

	n  atomic.Int64
	mu sync.Mutex
	// per counts the batches of each confined identity that holds one.
	per map[string]int
}

// slot is one batch's place, which give returns; an unconfined caller's counts only
// against the total.
type slot struct {
	identity string
	confined bool
}

// take claims a place for the batch of the caller in ctx, or refuses it with
// errBatchLimit naming the limit. unconfined reports whether the caller is bound by
// the total alone (the operator's, or anyone's with authorization off). Each check is
// exact: a batch refused never held a place another batch could have been refused for.
func (b *batchSlots) take(ctx context.Context, unconfined bool) (slot, error) {
	if unconfined {
		if !b.claim() {
			return slot{}, b.refuseTotal()
		}
		return slot{}, nil
	}
	id := callerName(ctx)
	b.mu.Lock()
	if b.per[id] >= b.maxPerID {
		b.mu.Unlock()
		return slot{}, b.refuse(LimitMaxBatchesPerIdentity, "this identity may run at most %d at once (limits.max_batches_per_identity)", b.maxPerID)
	}
	if !b.claim() {
		b.mu.Unlock()
		return slot{}, b.refuseTotal()
	}
	if b.per == nil {
		b.per = make(map[string]int)
	}
	b.per[id]++
	b.mu.Unlock()
	return slot{identity: id, confined: true}, nil
}

// claim takes one of the max places unless all are taken.
func (b *batchSlots) claim() bool {
	for {
		n := b.n.Load()
		if n >= int64(b.max) {
			return false
		}
		if b.n.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// give returns s's place; the handler defers it once the place is taken.
func (b *batchSlots) give(s slot) {
	if s.confined {
		b.mu.Lock()
		if b.per[s.identity]--; b.per[s.identity] <= 0 {
			delete(b.per, s.identity)
		}
		b.mu.Unlock()
	}
	b.n.Add(-1)
}

func (b *batchSlots) refuseTotal() error {
	return b.refuse(LimitMaxBatches, "toolsd runs at most %d at once (limits.max_batches)", b.max)
}

func (b *batchSlots) refuse(limit, format string, args ...any) error {
	if b.refused != nil {
		b.refused(limit)
	}
	return fmt.Errorf("%w: "+format, append([]any{errBatchLimit}, args...)...)
}
