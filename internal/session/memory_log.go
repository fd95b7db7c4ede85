package session

import "math/bits"

// eventLog is one session's events in chunks that are allocated once and never moved:
// an append never copies the log (a single growing slice would copy it on every
// growth and keep up to 5x its size in garbage), and a reader can keep a [logView]
// after unlocking because slots below the length it saw are never written again.
// Chunk k holds 8<<k events up to 512, then 512 each, so a short session stays small.
type eventLog struct {
	chunks [][]Event
	n      int
	// cold: the events are not held, only counted; the Journal reads them back from its
	// file (see memSession.warm). The memory store never has a cold log.
	cold bool
}

const (
	firstChunk = 8
	lastChunk  = 512
	// growthEnd is the number of events held by the doubling chunks 8..512.
	growthEnd = 2*lastChunk - firstChunk
)

// locate returns the chunk and offset of event index i.
func locate(i int) (int, int) {
	if i < growthEnd {
		k := bits.Len(uint(i/firstChunk+1)) - 1
		return k, i - firstChunk*(1<<k-1)
	}
	i -= growthEnd
	return bits.Len(lastChunk/firstChunk) + i/lastChunk, i % lastChunk
}

func chunkSize(k int) int {
	if k >= bits.Len(lastChunk/firstChunk)-1 {
		return lastChunk
	}
	return firstChunk << k
}

func (l *eventLog) append(ev Event) {
	if l.cold {
		l.n++
		return
	}
	k, off := locate(l.n)
	if k == len(l.chunks) {
		l.chunks = append(l.chunks, make([]Event, chunkSize(k)))
	}
	l.chunks[k][off] = ev
	l.n++
}

// at returns event index i (seq i+1); i must be below l.n.
func (l *eventLog) at(i int) *Event {
	k, off := locate(i)
	return &l.chunks[k][off]
}

// evict drops the events and keeps their count.
func (l *eventLog) evict() { *l = eventLog{n: l.n, cold: true} }

// view returns a snapshot that stays valid after the session's lock is released. The
// log must not be cold.
func (l *eventLog) view() logView { return logView{chunks: l.chunks, n: l.n} }

// logView is a read-only snapshot of an [eventLog].
type logView eventLog

func (v logView) len() int { return v.n }

func (v logView) at(i int) *Event { return (*eventLog)(&v).at(i) }

// page copies the events with Seq >= fromSeq, at most limit of them (limit <= 0 →
// [DefaultPageSize]).
func (v logView) page(fromSeq uint64, limit int) []Event {
	if limit <= 0 {
		limit = DefaultPageSize
	}
	from := max(fromSeq, 1) - 1
	if from >= uint64(v.n) {
		return nil
	}
	out := make([]Event, 0, min(v.n-int(from), limit))
	size := 0
	for i := int(from); i < v.n && !pageDone(len(out), size, limit); i++ {
		out = append(out, *v.at(i))
		size += payloadSize(&out[len(out)-1])
	}
	return out
}
