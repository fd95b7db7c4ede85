package session

import (
	"encoding/binary"
	"fmt"
	"os"
	"sort"
	"time"
)

// diskLog is where a Journal session's events records are in the journal file. A
// session whose events are not held in memory (cold) is read back from here.
type diskLog struct {
	file *os.File
	locs []recLoc // in seq order
}

// recLoc is one events record: its first seq, its offset in the file (of the record
// header) and its size (header included).
type recLoc struct {
	first uint64
	off   int64
	size  int32
}

// read reads the record at loc and passes its events from seq from on, in seq order,
// to keep until keep returns false. Only the events passed are decoded: a record may
// hold many more events, and bytes, than its reader needs.
func (d *diskLog) read(loc recLoc, from uint64, keep func(Event) bool) error {
	if d.file == nil {
		return fmt.Errorf("%w: a cold session has no journal file", ErrCorrupt)
	}
	buf := make([]byte, loc.size)
	if err := d.copyRecord(buf, loc); err != nil {
		return err
	}
	more := true
	rec, err := parseRecord(buf[recHeaderLen:], func(r *record, seq uint64, b []byte) error {
		if r.first != loc.first {
			return loc.mismatch()
		}
		if !more || seq < from {
			return nil
		}
		ev, err := decodeEvent(r.sessionID, seq, b)
		if err != nil {
			return err
		}
		more = keep(ev)
		return nil
	})
	if err != nil {
		return err
	}
	if rec.kind != recKindEvents {
		return loc.mismatch()
	}
	return nil
}

// mismatch is the error of a record at loc that is not the events it should be.
func (loc recLoc) mismatch() error {
	return fmt.Errorf("%w: journal record at %d is not the events from seq %d", ErrCorrupt, loc.off, loc.first)
}

// event returns event seq.
func (d *diskLog) event(seq uint64) (Event, error) {
	i := sort.Search(len(d.locs), func(i int) bool { return d.locs[i].first > seq }) - 1
	if i < 0 {
		return Event{}, fmt.Errorf("%w: no journal record holds seq %d", ErrCorrupt, seq)
	}
	var (
		ev    Event
		found bool
	)
	err := d.read(d.locs[i], seq, func(e Event) bool {
		ev, found = e, true
		return false
	})
	if err != nil {
		return Event{}, err
	}
	if !found {
		return Event{}, fmt.Errorf("%w: no journal record holds seq %d", ErrCorrupt, seq)
	}
	return ev, nil
}

// load reads every event back into a log of n events.
func (d *diskLog) load(n int) (eventLog, error) {
	var l eventLog
	for _, loc := range d.locs {
		err := d.read(loc, loc.first, func(ev Event) bool {
			l.append(ev)
			return true
		})
		if err != nil {
			return eventLog{}, err
		}
	}
	if l.n != n {
		return eventLog{}, fmt.Errorf("%w: the journal holds %d events of a session that has %d", ErrCorrupt, l.n, n)
	}
	return l, nil
}

// Evict drops from memory the events of the sessions whose last append is older than
// the hot period as of now ([WithHotFor]) and that no Watch holds, and returns how many
// sessions it made cold. The writer runs it periodically; it is safe from any goroutine.
func (j *Journal) Evict(now time.Time) int {
	cutoff := now.Add(-j.o.hotFor)
	n := 0
	j.mem.sessions.each(func(_ string, s *memSession) {
		if !s.mu.TryLock() { // busy (a reader of a cold session holds it while it reads): next time
			return
		}
		if !s.events.cold && s.events.n > 0 && s.watchers == 0 && len(s.disk.locs) > 0 &&
			(j.o.hotFor < 0 || s.last.Before(cutoff)) {
			s.events.evict()
			n++
		}
		s.mu.Unlock()
	})
	return n
}

// evictEvery is how often the writer runs Evict.
func evictEvery(hotFor time.Duration) time.Duration {
	return min(max(hotFor/2, time.Second), time.Minute)
}

// copyRecord reads the whole record at loc into dst (len(dst) == loc.size) and checks it.
func (d *diskLog) copyRecord(dst []byte, loc recLoc) error {
	if _, err := d.file.ReadAt(dst, loc.off); err != nil {
		return fmt.Errorf("session: read the journal at %d: %w", loc.off, err)
	}
	if int(binary.BigEndian.Uint32(dst)) != len(dst)-recHeaderLen || crcOf(dst[recHeaderLen:]) != binary.BigEndian.Uint32(dst[4:]) {
		return fmt.Errorf("%w: journal record at %d does not match its checksum", ErrCorrupt, loc.off)
	}
	return nil
}

// page returns up to limit events from seq fromSeq of a session of n events (limit <= 0
// → [DefaultPageSize]), reading only the records that hold them.
func (d *diskLog) page(fromSeq uint64, limit, n int) ([]Event, error) {
	if limit <= 0 {
		limit = DefaultPageSize
	}
	from := max(fromSeq, 1)
	if from > uint64(n) {
		return nil, nil
	}
	out := make([]Event, 0, min(uint64(limit), uint64(n)-from+1))
	i := max(sort.Search(len(d.locs), func(i int) bool { return d.locs[i].first > from })-1, 0)
	size := 0
	for ; i < len(d.locs) && !pageDone(len(out), size, limit); i++ {
		err := d.read(d.locs[i], from, func(ev Event) bool {
			out = append(out, ev)
			size += payloadSize(&ev)
			return !pageDone(len(out), size, limit)
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}
