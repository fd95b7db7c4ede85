package session

import (
	"hash/maphash"
	"sync"
)

// live is the per-session state both stores share: the notifier Watch waits on and the
// tool summary. Lock order: shard lock, then mu.
type live struct {
	mu sync.Mutex
	// refs counts Watch and Summary calls holding the entry; guarded by the shard lock.
	refs int
	// gone is set when the entry leaves its map: retention deleted the session (a
	// pinned entry leaves no other way), so a Watch holding it ends with ErrDeleted.
	gone bool
	// notify is closed (and cleared) on every append; created lazily by a waiter.
	notify chan struct{}
	sum    *toolSummary
}

// wait returns a channel closed by the next broadcast. l.mu must be held.
func (l *live) wait() <-chan struct{} {
	if l.notify == nil {
		l.notify = make(chan struct{})
	}
	return l.notify
}

// broadcast wakes every waiter. l.mu must be held.
func (l *live) broadcast() {
	if l.notify != nil {
		close(l.notify)
		l.notify = nil
	}
}

// entry is a per-session value held in a [shardMap].
type entry[T any] interface {
	*T
	base() *live
}

const shardCount = 64

// shardMap maps session ids to per-session entries behind shardCount locks, so that
// appends to different sessions rarely contend.
type shardMap[T any, P entry[T]] struct {
	seed   maphash.Seed
	shards [shardCount]struct {
		mu sync.RWMutex
		m  map[string]P
		_  [32]byte // keep neighbouring shard locks on separate cache lines
	}
}

func newShardMap[T any, P entry[T]]() *shardMap[T, P] {
	s := &shardMap[T, P]{seed: maphash.MakeSeed()}
	for i := range s.shards {
		s.shards[i].m = make(map[string]P)
	}
	return s
}

func (s *shardMap[T, P]) shard(id string) int {
	return int(maphash.String(s.seed, id) % shardCount)
}

// get returns the session's entry or nil.
func (s *shardMap[T, P]) get(id string) P {
	sh := &s.shards[s.shard(id)]
	sh.mu.RLock()
	p := sh.m[id]
	sh.mu.RUnlock()
	return p
}

// getOrCreate returns the session's entry, creating it when absent.
func (s *shardMap[T, P]) getOrCreate(id string) P {
	if p := s.get(id); p != nil {
		return p
	}
	sh := &s.shards[s.shard(id)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	p := sh.m[id]
	if p == nil {
		p = P(new(T))
		sh.m[id] = p
	}
	return p
}

// acquire returns the session's entry, created if needed, pinned until release.
func (s *shardMap[T, P]) acquire(id string) P {
	sh := &s.shards[s.shard(id)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	p := sh.m[id]
	if p == nil {
		p = P(new(T))
		sh.m[id] = p
	}
	p.base().refs++
	return p
}

// release unpins p and drops it from the map when nobody holds it and idle reports
// that it carries nothing worth keeping (idle runs with p's lock held).
func (s *shardMap[T, P]) release(id string, p P, idle func(P) bool) {
	sh := &s.shards[s.shard(id)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	b := p.base()
	b.refs--
	if b.refs > 0 || sh.m[id] != p {
		return
	}
	b.mu.Lock()
	if idle(p) {
		delete(sh.m, id)
		b.gone = true
		b.broadcast()
	}
	b.mu.Unlock()
}

// evict drops entries of id's shard that nobody holds, other than id's own, while the
// shard holds more than limit. For maps whose entries are a cache that can be rebuilt
// (Bolt's summaries), never for a store's records. An entry dropped here is not gone:
// it has no holder to tell, and a later acquire creates it afresh.
func (s *shardMap[T, P]) evict(id string, limit int) {
	sh := &s.shards[s.shard(id)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for k, p := range sh.m {
		if len(sh.m) <= limit {
			return
		}
		if k != id && p.base().refs == 0 {
			delete(sh.m, k)
		}
	}
}

// removeIf drops the session's entry when drop, run with the entry's lock held, agrees,
// and wakes its waiters. It reports whether the entry was dropped.
func (s *shardMap[T, P]) removeIf(id string, drop func(P) bool) bool {
	sh := &s.shards[s.shard(id)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	p := sh.m[id]
	if p == nil {
		return false
	}
	b := p.base()
	b.mu.Lock()
	defer b.mu.Unlock()
	if !drop(p) {
		return false
	}
	delete(sh.m, id)
	b.gone = true
	b.broadcast()
	return true
}

// each calls fn for every entry, one shard at a time under that shard's read lock.
func (s *shardMap[T, P]) each(fn func(id string, p P)) {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.RLock()
		for id, p := range sh.m {
			fn(id, p)
		}
		sh.mu.RUnlock()
	}
}
