package session

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"fmt"
	"os"
	"slices"
	"time"

	"go.uber.org/zap"
)

// jrequest is one append, owner claim (recKindOwner) or retention sweep (recKindDelete)
// handed to the journal's writer.
type jrequest struct {
	kind      byte
	sessionID string
	events    []Event      // appends: the store's copies; the writer assigns Seq and Time
	rec       eventsRecord // appends: the encoded record, stamped by the writer
	owner     Owner        // claims
	now       time.Time    // sweeps
	done      chan jresponse
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
}

func newJournalWriter(j *Journal) *journalWriter {
	return &journalWriter{j: j, next: make(map[string]uint64), claims: make(map[string]Owner)}
}

func (w *journalWriter) run() {
	defer close(w.j.writerDone)
	for {
		select {
		case r := <-w.j.queue:
			w.batch = append(w.batch[:0], r)
			w.collect(len(r.rec.buf))
			w.process()
		case <-w.j.quit:
			w.drain()
			return
		}
	}
}

// collect adds every request already waiting, up to the group limits.
func (w *journalWriter) collect(size int) {
	for len(w.batch) < cap(w.j.queue) && size < maxBatchBytes {
		select {
		case r := <-w.j.queue:
			w.batch = append(w.batch, r)
			size += len(r.rec.buf)
		default:
			return
		}
	}
}

func (w *journalWriter) drain() {
	for {
		select {
		case r := <-w.j.queue:
			r.done <- jresponse{err: ErrClosed}
		default:
			return
		}
	}
}

// process commits runs of appends and claims as one group each; a sweep runs alone,
// in queue order.
func (w *journalWriter) process() {
	for i := 0; i < len(w.batch); {
		if w.batch[i].kind == recKindDelete {
			w.sweep(w.batch[i])
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
	buf := w.buf[:0]
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
			buf = appendOwnerRecord(buf, r.sessionID, r.owner)
		}
	}
	w.buf = buf
	if err := w.write(buf); err != nil {
		respondAll(reqs, jresponse{err: err})
		return
	}
	j.o.observer.SyncDone(time.Since(start))
	for _, r := range reqs {
		switch r.kind {
		case recKindEvents:
			s := j.mem.lockSession(r.sessionID)
			s.add(r.events)
			j.account(s, int64(len(r.rec.buf)))
			s.mu.Unlock()
		case recKindOwner:
			if o, ok := w.claims[r.sessionID]; ok && o == r.owner {
				s := j.mem.lockSession(r.sessionID)
				if s.owner == nil {
					s.owner = &o
					j.account(s, ownerRecordSize(r.sessionID, o))
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

func ownerRecordSize(id string, o Owner) int64 {
	return int64(len(appendOwnerRecord(nil, id, o)))
}

// write appends buf to the file and makes it durable. On failure the journal stops:
// the file is cut back to its last good length when possible, and every later change
// fails, because what the disk holds after a failed fdatasync is unknown.
func (w *journalWriter) write(buf []byte) error {
	j := w.j
	if len(buf) == 0 {
		return nil
	}
	_, err := j.f.Write(buf)
	if err == nil && j.o.durability == SyncAlways {
		err = fdatasync(j.f)
	}
	if err != nil {
		err = fmt.Errorf("session: write the journal: %w", err)
		j.fault.Store(&err)
		j.o.logger.Error("session journal write failed; the log is read-only until restart", zap.Error(err))
		if terr := j.f.Truncate(j.size); terr == nil {
			_, _ = j.f.Seek(j.size, 0)
		}
		return err
	}
	j.size += int64(len(buf))
	return nil
}

func respondAll(reqs []*jrequest, resp jresponse) {
	for _, r := range reqs {
		r.done <- resp
	}
}

// sweep deletes the sessions the retention limits select, durably first.
func (w *journalWriter) sweep(r *jrequest) {
	j := w.j
	if err := j.usable(); err != nil {
		r.done <- jresponse{err: err}
		return
	}
	var ids []string
	buf := w.buf[:0]
	for _, v := range j.mem.victims(r.now) {
		s := j.mem.sessions.get(v.id)
		if s == nil {
			continue
		}
		s.mu.Lock()
		keep := len(s.calls.open) > 0
		s.mu.Unlock()
		if keep {
			continue
		}
		ids = append(ids, v.id)
		buf = appendDeleteRecord(buf, v.id)
	}
	w.buf = buf
	if err := w.write(buf); err != nil {
		r.done <- jresponse{err: err}
		return
	}
	for _, id := range ids {
		if s := j.mem.sessions.get(id); s != nil {
			j.live -= s.bytes
		}
		j.mem.sessions.removeIf(id, func(*memSession) bool { return true })
	}
	if len(ids) > 0 {
		j.o.logger.Debug("retention deleted sessions", zap.Int("sessions", len(ids)))
	}
	r.done <- jresponse{removed: len(ids)}
}

// maybeCompact rewrites the journal when it is large and mostly dead.
func (w *journalWriter) maybeCompact() {
	j := w.j
	if j.size < j.o.compactBytes || j.size < 2*j.live || j.usable() != nil {
		return
	}
	start := time.Now()
	before := j.size
	if err := w.compact(); err != nil {
		// The old journal is intact and still open: keep appending to it.
		j.o.logger.Error("session journal compaction failed; will retry", zap.Error(err))
		j.live = j.size // do not retry before the file doubles again
		return
	}
	j.o.logger.Info("session journal compacted", zap.Int64("bytes_before", before),
		zap.Int64("bytes_after", j.size), zap.Duration("took", time.Since(start)))
}

// compact writes the live sessions to a new file, makes it durable and renames it over
// the journal. Appends wait meanwhile (they queue for the writer).
func (w *journalWriter) compact() error {
	j := w.j
	tmp := j.path + compactSuffix
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	fail := func(err error) error {
		_ = f.Close()
		_ = os.Remove(tmp)
		return err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	size := int64(len(journalMagic))
	if _, err := bw.WriteString(journalMagic); err != nil {
		return fail(err)
	}
	type sized struct {
		s     *memSession
		bytes int64
	}
	var sessions []sized
	var werr error
	var buf []byte
	j.mem.sessions.each(func(id string, s *memSession) {
		if werr != nil {
			return
		}
		s.mu.Lock()
		view, owner := s.events.view(), s.owner
		s.mu.Unlock()
		if view.len() == 0 && owner == nil {
			return
		}
		n := int64(0)
		if owner != nil {
			buf = appendOwnerRecord(buf[:0], id, *owner)
			n += int64(len(buf))
			_, werr = bw.Write(buf)
		}
		for from := 0; from < view.len() && werr == nil; {
			buf, from = appendChunk(buf[:0], id, view, from)
			n += int64(len(buf))
			_, werr = bw.Write(buf)
		}
		size += n
		sessions = append(sessions, sized{s, n})
	})
	if werr == nil {
		werr = bw.Flush()
	}
	if werr == nil {
		werr = f.Sync()
	}
	if werr == nil {
		werr = os.Rename(tmp, j.path)
	}
	if werr != nil {
		return fail(werr)
	}
	if err := syncDir(j.dir); err != nil {
		j.o.logger.Warn("session journal compaction: sync directory", zap.Error(err))
	}
	old := j.f
	j.f = f
	_ = old.Close()
	j.size, j.live = size, size
	for _, c := range sessions {
		c.s.bytes = c.bytes
	}
	return nil
}

// compactChunkBytes bounds one events record of a rewritten journal.
const compactChunkBytes = 1 << 20

// appendChunk appends an events record of view's events from index from, up to about
// compactChunkBytes, and returns the index after the last one.
func appendChunk(dst []byte, id string, view logView, from int) ([]byte, int) {
	to, size := from, 0
	for to < view.len() && (to == from || size < compactChunkBytes) {
		size += payloadSize(view.at(to))
		to++
	}
	events := make([]Event, 0, to-from)
	for i := from; i < to; i++ {
		events = append(events, *view.at(i))
	}
	return appendStoredEvents(dst, id, events), to
}

// sortBySource orders synthetic results by the seq of the call they close.
func sortBySource(events []Event) {
	slices.SortFunc(events, func(a, b Event) int {
		return cmp.Compare(a.SourceSeqs[0], b.SourceSeqs[0])
	})
}
