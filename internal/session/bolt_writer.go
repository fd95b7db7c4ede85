package session

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.uber.org/zap"
)

// request is one Append, Sweep or Delete handed to the writer goroutine.
type request struct {
	sessionID string
	// events are the caller's events; the writer assigns SessionID, Seq and Time.
	events []Event
	// values are the events' stored forms; the writer stamps their time.
	values [][]byte
	bytes  int
	// names are the tool names the events add to the session summary (set by the writer).
	names toolNames
	sweep bool
	// drop is a [Bolt.Delete] of sessionID; seen is the owner its caller saw, then
	// what runs once it is deleted.
	drop bool
	seen *Owner
	then func()
	now  time.Time
	done chan response
}

// alone reports whether r runs in a transaction of its own: a sweep or a deletion.
func (r *request) alone() bool { return r.sweep || r.drop }

type response struct {
	removed int
	err     error
}

// Limits of one group commit. A commit takes whatever queued while the previous one
// was in flight, up to these.
const (
	maxBatchBytes     = 32 << 20
	maxCachedSessions = 1 << 16
)

// Append implements [Store]. Events are encoded by the caller's goroutine, then
// committed by the writer together with every other append that is waiting. ctx bounds
// only the wait for room in the writer's queue: once queued, an append completes (or
// fails with ErrClosed when Close overtakes it), so a cancelled caller cannot leave an
// append in doubt.
func (b *Bolt) Append(ctx context.Context, sessionID string, events ...Event) ([]Event, error) {
	start := time.Now()
	if err := b.usable(); err != nil {
		return nil, err
	}
	if len(events) == 0 {
		return nil, nil
	}
	if err := validate(sessionID, events, b.o.maxEventBytes); err != nil {
		return nil, err
	}
	r := &request{
		sessionID: sessionID,
		events:    append([]Event(nil), events...),
		values:    make([][]byte, len(events)),
		done:      make(chan response, 1),
	}
	size := 0
	for i := range events {
		size += payloadSize(&events[i]) + 64 + 10*len(events[i].SourceSeqs)
	}
	buf := make([]byte, 0, size)
	ends := make([]int, len(events))
	for i := range events {
		buf = encodeEvent(buf, &events[i])
		ends[i] = len(buf)
	}
	prev := 0
	for i, end := range ends {
		r.values[i] = buf[prev:end:end]
		prev = end
	}
	r.bytes = len(buf)
	if resp := b.submit(ctx, r); resp.err != nil {
		return nil, resp.err
	}
	b.o.observer.AppendDone(len(events), time.Since(start))
	return r.events, nil
}

// submit queues r for the writer and waits for its outcome.
func (b *Bolt) submit(ctx context.Context, r *request) response {
	return submit(ctx, b.queue, b.quit, b.writerDone, r, r.done, func(err error) response { return response{err: err} })
}

// writer owns every write transaction and the per-session write state.
type writer struct {
	b        *Bolt
	sessions map[string]*wsession
	batch    []*request
}

// wsession is what the writer knows about a session: loaded from the log on first
// use, dropped after a failed commit (and reloaded).
type wsession struct {
	next  uint64
	calls calls
}

func newWriter(b *Bolt) *writer {
	return &writer{b: b, sessions: make(map[string]*wsession)}
}

func (w *writer) run() {
	defer close(w.b.writerDone)
	for {
		select {
		case r := <-w.b.queue:
			w.batch = collect(w.b.queue, append(w.batch[:0], r), r.bytes, func(r *request) int { return r.bytes })
			if w.closing() {
				w.fail(ErrClosed)
				continue
			}
			w.process()
		case <-w.b.quit:
			drain(w.b.queue, func(r *request) { r.done <- response{err: ErrClosed} })
			return
		}
	}
}

func (w *writer) closing() bool {
	select {
	case <-w.b.quit:
		return true
	default:
		return false
	}
}

func (w *writer) fail(err error) {
	for _, r := range w.batch {
		r.done <- response{err: err}
	}
	clear(w.batch)
}

// process commits runs of appends as single transactions; a sweep or a deletion runs
// alone, in queue order.
func (w *writer) process() {
	for i := 0; i < len(w.batch); {
		if r := w.batch[i]; r.alone() {
			if r.drop {
				w.drop(r)
			} else {
				w.sweep(r)
			}
			i++
			continue
		}
		j := i + 1
		for j < len(w.batch) && !w.batch[j].alone() {
			j++
		}
		w.commit(w.batch[i:j])
		i = j
	}
	clear(w.batch)
}

// commit writes reqs in one transaction (one fsync with SyncAlways) and releases them.
func (w *writer) commit(reqs []*request) {
	start := time.Now()
	now := w.b.o.now()
	err := w.b.update(func(tx *bolt.Tx) error {
		rt, err := rootsOf(tx)
		if err != nil {
			return err
		}
		for _, r := range reqs {
			if err := w.apply(rt, r, now); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		for _, r := range reqs {
			delete(w.sessions, r.sessionID) // its seqs and open calls advanced in memory only
		}
		if len(reqs) > 1 && !errors.Is(err, ErrStopped) && !errors.Is(err, ErrClosed) {
			w.commitEach(reqs)
			return
		}
		if len(reqs) == 1 { // damage is one session's: commitEach left it alone
			err = damageIn(w.b.path, reqs[0].sessionID, err)
		}
		if !errors.Is(err, ErrStopped) { // else the store stopped, and logged why
			w.b.o.logger.Error("session commit failed", zap.Int("appends", len(reqs)), zap.Error(err))
			err = fmt.Errorf("session: commit: %w", err)
		}
		for _, r := range reqs {
			r.done <- response{err: err}
		}
		return
	}
	// Only a transaction that committed is a group commit: one rolled back wrote and
	// synced nothing (a failed one is not reported either, as in the journal).
	w.b.o.observer.SyncDone(time.Since(start))
	for _, r := range reqs {
		if l := w.b.live.get(r.sessionID); l != nil {
			l.mu.Lock()
			l.note(r.names)
			l.broadcast()
			l.mu.Unlock()
		}
		r.done <- response{}
	}
	w.trim()
}

// commitEach commits each of reqs in a transaction of its own, after their group's
// transaction was rolled back by an error of one of them (a damaged session): that
// append fails alone, not every append that shared its commit.
func (w *writer) commitEach(reqs []*request) {
	for i := range reqs {
		reqs[i].names = toolNames{} // noted by the failed transaction, never committed
		w.commit(reqs[i : i+1])
	}
}

// note applies committed names to a loaded summary and to the scans in progress.
// l.mu must be held.
func (l *boltLive) note(n toolNames) {
	if n.empty() {
		return
	}
	if l.sum != nil {
		l.sum = l.sum.with(n)
	}
	if l.loading > 0 {
		l.pending.called = append(l.pending.called, n.called...)
		l.pending.succeeded = append(l.pending.succeeded, n.succeeded...)
	}
}

func (w *writer) apply(rt roots, r *request, now time.Time) error {
	ws, err := w.session(rt, r.sessionID)
	if err != nil {
		return err
	}
	id := []byte(r.sessionID)
	bkt, err := rt.sessions.CreateBucketIfNotExists(id)
	if err != nil {
		return fmt.Errorf("session: create session bucket: %w", err)
	}
	bkt.FillPercent = 1
	namer := bucketNamer{r.sessionID, bkt}
	for i := range r.events {
		ev := &r.events[i]
		ev.SessionID, ev.Seq, ev.Time = r.sessionID, ws.next, now
		stampTime(r.values[i], now)
		if err := bkt.Put(seqKey(ev.Seq), r.values[i]); err != nil {
			return err
		}
		ws.next++
		ch := ws.calls.apply(ev, namer)
		if ch.opened {
			if err := rt.open.Put(openKey(r.sessionID, ev.Seq), openValue(ws.calls.open[ev.Seq])); err != nil {
				return err
			}
		}
		for _, s := range ch.closed {
			if err := rt.open.Delete(openKey(r.sessionID, s)); err != nil {
				return err
			}
		}
		r.names.add(ch, nil)
	}
	return nil
}

// session returns the writer's state for a session, loading it on first use.
func (w *writer) session(rt roots, id string) (*wsession, error) {
	if ws, ok := w.sessions[id]; ok {
		return ws, nil
	}
	ws := &wsession{next: 1}
	if bkt := rt.sessions.Bucket([]byte(id)); bkt != nil {
		if k, _ := bkt.Cursor().Last(); k != nil {
			last, err := parseSeqKey(k)
			if err != nil {
				return nil, err
			}
			ws.next = last + 1
		}
	}
	prefix := openPrefix(id)
	c := rt.open.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		_, seq, err := parseOpenKey(k)
		if err != nil {
			return nil, err
		}
		oc, err := parseOpenValue(v)
		if err != nil {
			return nil, err
		}
		if ws.calls.open == nil {
			ws.calls.open = make(map[uint64]openCall)
		}
		ws.calls.open[seq] = oc
	}
	w.sessions[id] = ws
	return ws, nil
}

// trim bounds the writer's cache: sessions without open calls reload cheaply.
func (w *writer) trim() {
	if len(w.sessions) <= maxCachedSessions {
		return
	}
	for id, ws := range w.sessions {
		if len(ws.calls.open) == 0 {
			delete(w.sessions, id)
		}
	}
}
