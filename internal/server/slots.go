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

// The limits a watch can be refused for, as Deps.WatchRefused names them.
const (
	LimitMaxWatches            = "max_watches"
	LimitMaxWatchesPerIdentity = "max_watches_per_identity"
	// LimitMaxHealthWatches is the limit a health Watch can be refused for.
	LimitMaxHealthWatches = "max_health_watches"
)

// slots counts the streams of one kind that hold a place (batches in flight, open
// watches), overall and per confined identity, so that one tenant's streams, each
// holding memory and a goroutine, cannot exhaust memory or take every place.
type slots struct {
	max, maxPerID int
	// limit and limitPerID name the two limits (their keys under limits.), err is
	// what a refusal wraps, and refused counts a refusal by the limit's name.
	limit, limitPerID string
	err               error
	refused           func(limit string)

	n  atomic.Int64
	mu sync.Mutex
	// per counts the places of each confined identity that holds one.
	per map[string]int
}

// newBatchSlots returns the places of the batches in flight (sent their batch, handler
// not returned), each holding up to max_request_bytes of calls. A stream waiting for
// its batch holds none: first_message_timeout bounds those.
func newBatchSlots(l Limits, refused func(string)) *slots {
	return &slots{max: l.MaxBatches, maxPerID: l.MaxBatchesPerIdentity, refused: refused,
		limit: LimitMaxBatches, limitPerID: LimitMaxBatchesPerIdentity, err: errBatchLimit}
}

// newWatchSlots returns the places of the open WatchSession and WatchSchemas streams,
// each holding a goroutine (and a WatchSession a store watch and its buffers) until it
// ends.
func newWatchSlots(l Limits, refused func(string)) *slots {
	return &slots{max: l.MaxWatches, maxPerID: l.MaxWatchesPerIdentity, refused: refused,
		limit: LimitMaxWatches, limitPerID: LimitMaxWatchesPerIdentity, err: errWatchLimit}
}

// newHealthWatchSlots returns the places of the open health Watch streams, each
// holding a goroutine and the health server's state for its watcher until it ends.
// The health service needs no credentials, so every caller counts against the total
// alone: take them unconfined.
func newHealthWatchSlots(l Limits, refused func(string)) *slots {
	return &slots{max: l.MaxHealthWatches, refused: refused, limit: LimitMaxHealthWatches, err: errHealthWatchLimit}
}

// slot is one stream's place, which give returns; an unconfined caller's counts only
// against the total.
type slot struct {
	identity string
	confined bool
}

// take claims a place for the stream of the caller in ctx, or refuses it with the
// slots' error naming the limit. unconfined reports whether the caller is bound by the
// total alone (the operator's, or anyone's with authorization off). Each check is
// exact: a stream refused never held a place another stream could have been refused
// for.
func (b *slots) take(ctx context.Context, unconfined bool) (slot, error) {
	if unconfined {
		if !b.claim() {
			return slot{}, b.refuse(b.limit, "at most %d at once", b.max)
		}
		return slot{}, nil
	}
	id := callerName(ctx)
	b.mu.Lock()
	if b.per[id] >= b.maxPerID {
		b.mu.Unlock()
		return slot{}, b.refuse(b.limitPerID, "at most %d of one identity's at once", b.maxPerID)
	}
	if !b.claim() {
		b.mu.Unlock()
		return slot{}, b.refuse(b.limit, "at most %d at once", b.max)
	}
	if b.per == nil {
		b.per = make(map[string]int)
	}
	b.per[id]++
	b.mu.Unlock()
	return slot{identity: id, confined: true}, nil
}

// claim takes one of the max places unless all are taken.
func (b *slots) claim() bool {
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
func (b *slots) give(s slot) {
	if s.confined {
		b.mu.Lock()
		if b.per[s.identity]--; b.per[s.identity] <= 0 {
			delete(b.per, s.identity)
		}
		b.mu.Unlock()
	}
	b.n.Add(-1)
}

// refuse counts a refusal for limit and returns its error, which names the limit.
func (b *slots) refuse(limit, format string, n int) error {
	if b.refused != nil {
		b.refused(limit)
	}
	return fmt.Errorf("%w: "+format+" (limits.%s)", b.err, n, limit)
}
