package session

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
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
// to keep until keep returns false. The whole record is read to check its checksum, but
// through a buffer of at most [recordBufBytes]: only the events passed are copied out
// and decoded, as a record may hold many more events, and bytes, than its reader needs.
// keep may be passed events of a record that then fails its checksum: the error voids
// them.
func (d *diskLog) read(loc recLoc, from uint64, keep func(Event) bool) error {
	if d.file == nil {
		return fmt.Errorf("%w: a cold session has no journal file", ErrCorrupt)
	}
	r, err := d.openRecord(loc)
	if err != nil {
		return err
	}
	if kind := r.byte(); r.err == nil && kind != recKindEvents {
		return loc.mismatch()
	}
	sessionID := r.sessionID()
	if first := r.fixed64(); r.err == nil && first != loc.first {
		return loc.mismatch()
	}
	n := r.uvarint()
	if r.err == nil && (n == 0 || n > uint64(r.left)/(valueLenBytes+headerLen)) {
		r.corrupt(fmt.Errorf("implausible event count %d", n))
	}
	more := true
	for i := uint64(0); i < n && r.err == nil; i++ {
		size, seq := uint64(r.fixed32()), loc.first+i
		if !more || seq < from {
			r.skip(size)
			continue
		}
		b := r.span(size)
		if r.err != nil {
			break
		}
		ev, err := decodeEvent(sessionID, seq, b)
		if err != nil {
			return err
		}
		more = keep(ev)
	}
	return r.check()
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

// recordBufBytes bounds the buffer through which a cold read passes a record's body to
// check its checksum: what the read allocates beyond it is the events it returns.
const recordBufBytes = 64 << 10

// recordStream reads the body of a journal record in order, hashing every byte it
// reads, so that a record of any size (up to [maxRecordBytes]) is checked in bounded
// memory. A length beyond the body's end is ErrCorrupt, never an allocation. After an
// error every read returns a zero value.
type recordStream struct {
	at   int64  // the record's offset in the file, for errors
	want uint32 // the checksum in the record's header
	crc  hash.Hash32
	r    *bufio.Reader
	left int64  // bytes of the body not read yet
	buf  []byte // the last span, reused by the next
	err  error
}

// openRecord starts reading the record at loc, after checking that its header's length
// is loc's.
func (d *diskLog) openRecord(loc recLoc) (*recordStream, error) {
	var h [recHeaderLen]byte
	if _, err := d.file.ReadAt(h[:], loc.off); err != nil {
		return nil, fmt.Errorf("session: read the journal at %d: %w", loc.off, err)
	}
	size := int64(loc.size) - recHeaderLen
	if int64(binary.BigEndian.Uint32(h[:])) != size {
		return nil, fmt.Errorf("%w: journal record at %d does not match its checksum", ErrCorrupt, loc.off)
	}
	crc := crc32.New(castagnoli)
	body := io.TeeReader(io.NewSectionReader(d.file, loc.off+recHeaderLen, size), crc)
	return &recordStream{at: loc.off, want: binary.BigEndian.Uint32(h[4:]), crc: crc,
		r: bufio.NewReaderSize(body, int(min(size, recordBufBytes))), left: size}, nil
}

func (r *recordStream) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

// corrupt fails the read with damage to the record.
func (r *recordStream) corrupt(err error) {
	r.fail(fmt.Errorf("%w: journal record at %d: %w", ErrCorrupt, r.at, err))
}

// readFailed fails the read with err from the file, which may end before the record.
func (r *recordStream) readFailed(err error) {
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	r.fail(fmt.Errorf("session: read the journal record at %d: %w", r.at, err))
}

// take reports whether n more bytes of the body are there to read, and counts them
// read.
func (r *recordStream) take(n uint64) bool {
	if r.err != nil {
		return false
	}
	if n > uint64(r.left) {
		r.corrupt(errShort)
		return false
	}
	r.left -= int64(n)
	return true
}

// span reads the next n bytes into a buffer that the next span reuses.
func (r *recordStream) span(n uint64) []byte {
	if !r.take(n) {
		return nil
	}
	if uint64(cap(r.buf)) < n {
		r.buf = make([]byte, n)
	}
	r.buf = r.buf[:n]
	if _, err := io.ReadFull(r.r, r.buf); err != nil {
		r.readFailed(err)
		return nil
	}
	return r.buf
}

// skip reads past the next n bytes, hashing them.
func (r *recordStream) skip(n uint64) {
	if r.take(n) {
		if _, err := r.r.Discard(int(n)); err != nil {
			r.readFailed(err)
		}
	}
}

func (r *recordStream) byte() byte {
	if b := r.span(1); len(b) == 1 {
		return b[0]
	}
	return 0
}

func (r *recordStream) fixed32() uint32 {
	if b := r.span(4); len(b) == 4 {
		return binary.BigEndian.Uint32(b)
	}
	return 0
}

func (r *recordStream) fixed64() uint64 {
	if b := r.span(8); len(b) == 8 {
		return binary.BigEndian.Uint64(b)
	}
	return 0
}

// ReadByte implements [io.ByteReader] for [binary.ReadUvarint].
func (r *recordStream) ReadByte() (byte, error) {
	b := r.byte()
	return b, r.err
}

func (r *recordStream) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, err := binary.ReadUvarint(r)
	if err != nil {
		r.corrupt(err) // an overflow: a failed read has set r.err already
	}
	return v
}

// sessionID reads the record's session id.
func (r *recordStream) sessionID() string {
	n := r.uvarint()
	if r.err == nil && (n == 0 || n > MaxSessionIDBytes) {
		r.corrupt(errors.New("bad session id"))
	}
	return string(r.span(n))
}

// check ends the read: it returns its first error, or ErrCorrupt unless the whole body
// was read and matches its checksum.
func (r *recordStream) check() error {
	if r.err == nil && r.left != 0 {
		r.corrupt(fmt.Errorf("%d trailing bytes", r.left))
	}
	if r.err == nil && r.crc.Sum32() != r.want {
		r.err = fmt.Errorf("%w: journal record at %d does not match its checksum", ErrCorrupt, r.at)
	}
	return r.err
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
