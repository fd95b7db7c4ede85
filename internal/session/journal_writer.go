package session

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"
)

// jrequest is one append, owner claim (recKindOwner), retention sweep (recKindDelete)
// or deletion of one session (recKindDelete with a sessionID) handed to the journal's
// writer.
type jrequest struct {
	kind      byte
	sessionID string
	events    []Event      // appends: the store's copies; the writer assigns Seq and Time
	rec       eventsRecord // appends: the encoded record, stamped by the writer
	off, n    int          // the record's offset in its group and its size
	owner     Owner        // claims
	seen      *Owner       // deletions: the owner the caller saw (see [Store.Delete])
	then      func()       // deletions: runs once the session is deleted
	now       time.Time    // sweeps
	done      chan jresponse
}

// size is what r adds to a group, as collect counts it toward maxBatchBytes: an
// append's record, or at most a claim's. A deletion is written in groups of its own.
func (r *jrequest) size() int {
	if r.kind == recKindOwner {
		return ownerRecordSize(r.sessionID, r.owner)
	}
	return len(r.rec.buf)
}

type jresponse struct {
	owner   Owner
	removed int
	err     error
}

// journalWriter owns the file and every change to the journal's state.
type journalWriter struct {
	j     *Journal
	batch []*jrequest
	buf   []byte
	// next is the next seq of each session appended to in the group being built;
	// claims are the owners claimed in it.
	next   map[string]uint64
	claims map[string]Owner
	// rw is the rewrite in progress, if any.
	rw *rewrite
}

func newJournalWriter(j *Journal) *journalWriter {
	return &journalWriter{j: j, next: make(map[string]uint64), claims: make(map[string]Owner)}
}

func (w *journalWriter) run() {
	defer close(w.j.writerDone)
	var evict <-chan time.Time
	if w.j.o.hotFor > 0 {
		t := time.NewTicker(evictEvery(w.j.o.hotFor))
		defer t.Stop()
		evict = t.C
	}
	for {
		select {
		case <-evict:
			w.j.Evict(w.j.o.now())
		case r := <-w.j.queue:
			w.batch = collect(w.j.queue, append(w.batch[:0], r), r.size(), (*jrequest).size)
			w.process()
		case res := <-w.rewriteDone():
			w.finishRewrite(res)
		case <-w.j.quit:
			w.stopRewrite()
			drain(w.j.queue, func(r *jrequest) { r.done <- jresponse{err: ErrClosed} })
			return
		}
	}
}

// process commits runs of appends and claims as one group each; a sweep or a
// deletion runs alone, in queue order.
func (w *journalWriter) process() {
	for i := 0; i < len(w.batch); {
		if r := w.batch[i]; r.kind == recKindDelete {
			if r.sessionID != "" {
				w.deleteOne(r)
			} else {
				w.sweep(r)
			}
			i++
			continue
		}
		k := i + 1
		for k < len(w.batch) && w.batch[k].kind != recKindDelete {
			k++
		}
		w.commit(w.batch[i:k])
		i = k
	}
	clear(w.batch)
	w.maybeCompact()
}

// commit orders reqs, writes their records with one write and one fdatasync, applies
// them to memory and releases their callers.
func (w *journalWriter) commit(reqs []*jrequest) {
	j := w.j
	if err := j.usable(); err != nil {
		respondAll(reqs, jresponse{err: err})
		return
	}
	start := time.Now()
	now := j.o.now()
	clear(w.next)
	clear(w.claims)
	buf := beginGroup(w.buf[:0], j.group+1)
	for _, r := range reqs {
		switch r.kind {
		case recKindEvents:
			next, ok := w.next[r.sessionID]
			if !ok {
				next = j.nextSeq(r.sessionID)
			}
			binary.BigEndian.PutUint64(r.rec.buf[r.rec.seqOff:], next)
			for i, v := range r.rec.vals {
				stampTime(r.rec.buf[v:], now)
				r.events[i].SessionID, r.events[i].Seq, r.events[i].Time = r.sessionID, next+uint64(i), now
			}
			w.next[r.sessionID] = next + uint64(len(r.events))
			sealRecord(r.rec.buf)
			r.off, r.n = len(buf), len(r.rec.buf)
			buf = append(buf, r.rec.buf...)
		case recKindOwner:
			if o, ok := w.claims[r.sessionID]; ok {
				r.owner = o // an earlier claim in this group won
				continue
			}
			if o, ok := j.ownerOf(r.sessionID); ok {
				r.owner = o
				continue
			}
			w.claims[r.sessionID] = r.owner
			r.off = len(buf)
			buf = appendOwnerRecord(buf, r.sessionID, r.owner, now)
			r.n = len(buf) - r.off
		}
	}
	w.keep(buf)
	at := j.size
	if err := w.writeGroup(buf); err != nil {
		respondAll(reqs, jresponse{err: err})
		return
	}
	j.o.observer.SyncDone(time.Since(start))
	for _, r := range reqs {
		switch r.kind {
		case recKindEvents:
			s := j.mem.lockSession(r.sessionID)
			s.disk.file = j.f
			s.disk.locs = append(s.disk.locs, recLoc{first: r.events[0].Seq, off: at + int64(r.off), size: int32(r.n)})
			s.add(r.events)
			if j.o.hotFor < 0 && s.watchers == 0 {
				s.events.evict()
			}
			j.account(s, int64(r.n))
			s.mu.Unlock()
		case recKindOwner:
			if o, ok := w.claims[r.sessionID]; ok && o == r.owner {
				s := j.mem.lockSession(r.sessionID)
				if s.owner == nil {
					s.owner, s.claimed = &o, now
					j.account(s, int64(r.n))
				}
				s.mu.Unlock()
			}
		}
		r.done <- jresponse{owner: r.owner}
	}
}

// ownerOf returns the session's owner in memory.
func (j *Journal) ownerOf(id string) (Owner, bool) {
	s := j.mem.sessions.get(id)
	if s == nil {
		return Owner{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.owner == nil {
		return Owner{}, false
	}
	return *s.owner, true
}

// nextSeq is the seq the session's next event gets.
func (j *Journal) nextSeq(id string) uint64 {
	s := j.mem.sessions.get(id)
	if s == nil {
		return 1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return uint64(s.events.n) + 1
}

// writeGroup seals group (built by beginGroup for the next seq), appends it to the file
// and makes it durable; a group without records is not written. On failure the
// journal stops (see stop).
func (w *journalWriter) writeGroup(group []byte) error {
	j := w.j
	if len(group) == groupHeadLen {
		return nil
	}
	sealGroup(group, j.seed)
	_, err := j.f.Write(group)
	if err == nil && j.o.durability == SyncAlways {
		err = fdatasync(j.f)
	}
	if err != nil {
		return j.stop(fmt.Errorf("session: write the journal: %w", err))
	}
	j.size += int64(len(group))
	j.group++
	j.reportBytes()
	return nil
}

// stop makes every later change fail with err, because what the disk holds after a
// failed write or fdatasync is unknown, and cuts the file back to its last good length
// when it can so that the failed group does not come back at the next start. It
// returns err wrapped in [ErrStopped], as the changes after it fail (see usable), for
// the changes whose write failed: like bbolt's failed commit, they fail as stopped.
func (j *Journal) stop(err error) error {
	j.fault.Store(&err)
	j.stopOnce.Do(func() { close(j.stopped) })
	j.o.logger.Error("session journal stopped; appends fail until toolsd restarts", zap.Error(err))
	if terr := j.f.Truncate(j.size); terr == nil {
		_, _ = j.f.Seek(j.size, 0)
		_ = j.f.Sync()
	}
	return fmt.Errorf("%w: %w", ErrStopped, err)
}

func respondAll(reqs []*jrequest, resp jresponse) {
	for _, r := range reqs {
		r.done <- resp
	}
}

// sweep deletes the sessions the retention limits select, durably first. The
// deletions are written in groups of at most sweepGroupBytes (plus one record), each
// applied once it is durable: one group of them all could outgrow what Open cuts off
// as a torn write (maxTornBytes) and make it refuse the journal after a crash.
func (w *journalWriter) sweep(r *jrequest) {
	j := w.j
	if err := j.usable(); err != nil {
		r.done <- jresponse{err: err}
		return
	}
	j.mem.holds.beginSweep()
	defer j.mem.holds.endSweep()
	var ids []string
	removed := 0
	buf := beginGroup(w.buf[:0], j.group+1)
	flush := func() error {
		w.keep(buf)
		if err := w.writeGroup(buf); err != nil {
			return err
		}
		w.forget(ids)
		for _, id := range ids {
			j.o.runThen(id, j.o.sweptThen(id))
		}
		removed += len(ids)
		ids = ids[:0]
		buf = beginGroup(w.buf[:0], j.group+1)
		return nil
	}
	for _, v := range j.mem.victims(r.now) {
		ids = append(ids, v.id)
		buf = appendDeleteRecord(buf, v.id)
		if len(buf)-groupHeadLen >= sweepGroupBytes {
			if err := flush(); err != nil {
				r.done <- jresponse{removed: removed, err: err}
				return
			}
		}
	}
	if err := flush(); err != nil {
		r.done <- jresponse{removed: removed, err: err}
		return
	}
	if removed > 0 {
		j.o.logger.Debug("retention deleted sessions", zap.Int("sessions", removed))
	}
	r.done <- jresponse{removed: removed}
}

// forget drops the sessions ids, whose delete records are durable, from memory: their
// watches end with ErrDeleted. Retention's sweep and [Journal.Delete] share it.
func (w *journalWriter) forget(ids []string) {
	j := w.j
	for _, id := range ids {
		if s := j.mem.sessions.get(id); s != nil {
			j.live -= s.bytes
		}
		j.mem.sessions.removeIf(id, func(*memSession) bool { return true })
	}
}

// deleteOne deletes the session r names, as the sweep deletes one, durably first: it
// is kept (ErrInUse) while held or with a call open, as retention keeps it.
func (w *journalWriter) deleteOne(r *jrequest) {
	j := w.j
	if err := j.usable(); err != nil {
		r.done <- jresponse{err: err}
		return
	}
	j.mem.holds.beginSweep()
	defer j.mem.holds.endSweep()
	if err := j.mem.doomOne(r.sessionID, r.seen); err != nil {
		r.done <- jresponse{err: err}
		return
	}
	events := 0
	if s := j.mem.sessions.get(r.sessionID); s != nil {
		s.mu.Lock()
		events = s.events.n
		s.mu.Unlock()
	}
	buf := appendDeleteRecord(beginGroup(w.buf[:0], j.group+1), r.sessionID)
	w.keep(buf)
	if err := w.writeGroup(buf); err != nil {
		r.done <- jresponse{err: err}
		return
	}
	w.forget([]string{r.sessionID})
	j.o.runThen(r.sessionID, r.then)
	r.done <- jresponse{removed: events}
}

// maxKeptGroupBytes bounds the group buffer the writer keeps for the next group: a
// burst of large appends (a group may hold maxBatchBytes and one more record) must not
// leave its buffer held for the life of the process.
const maxKeptGroupBytes = 1 << 20

// keep keeps buf, the group just built, for the next group, unless it is large.
func (w *journalWriter) keep(buf []byte) {
	if cap(buf) > maxKeptGroupBytes {
		buf = nil
	}
	w.buf = buf
}

// sortBySource orders synthetic results by the seq of the call they close.
func sortBySource(events []Event) {
	slices.SortFunc(events, func(a, b Event) int {
		return cmp.Compare(a.SourceSeqs[0], b.SourceSeqs[0])
	})
}

// sweepGroupBytes bounds the delete records of one group of a sweep. A variable: tests
// lower it.
var sweepGroupBytes = maxBatchBytes

var _ Stopper = (*Journal)(nil)

// Stopped implements [Stopper].
func (j *Journal) Stopped() <-chan struct{} { return j.stopped }

// StopCause implements [Stopper]: the failed write's error, wrapping [ErrStopped] (nil
// while the journal runs).
func (j *Journal) StopCause() error {
	if err := j.fault.Load(); err != nil {
		return fmt.Errorf("%w: %w", ErrStopped, *err)
	}
	return nil
}
