package session

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// JournalFileName is the [Journal]'s file in the data directory; JournalLockName is the
// file it holds locked while open.
const (
	JournalFileName = "sessions.journal"
	JournalLockName = "sessions.journal.lock"
	compactSuffix   = ".compact"
)

// DefaultCompactBytes is the file size below which the journal is never rewritten.
const DefaultCompactBytes = 64 << 20

// maxRecordBytes bounds one record, so one Append (its length field is 32 bits).
const maxRecordBytes = 512 << 20

// maxTornBytes bounds one group's frame: its header, then records that collect stopped
// taking once they held maxBatchBytes, the last of them at most maxRecordBytes (a
// sweep's groups stop at sweepGroupBytes plus one deletion, a rewrite's at
// compactChunkBytes plus one record). Open reads a length field claiming more as
// damage, without reading what it claims, and cuts off at most this much as a torn
// last write; a larger damaged tail is reported as corruption.
const maxTornBytes = groupHeadLen + maxBatchBytes + maxRecordBytes

// Journal is a durable [Store] whose every change is first written to an append-only
// file, the journal, which Open reads back. Sessions live in memory as [Memory] keeps
// them, but only a session appended to within the hot period ([WithHotFor]) keeps its
// events there: the others keep their open calls, tool summary, owner and where their
// records are in the file (24 bytes per append); a read pages their events from the
// file and a watch brings them back into memory.
//
// One writer goroutine orders every change: it takes all the appends, owner claims and
// deletions that queued while the previous group was being written, stamps their seqs
// and time, writes their records with one write(2), fdatasyncs once ([SyncAlways]),
// and only then applies them to memory and releases their callers. A commit is one
// sequential write and one flush of it; nothing already written is rewritten. When the
// file has grown past [DefaultCompactBytes] (see [WithCompactBytes]) and more than half
// of it belongs to deleted sessions, it is rewritten with the live sessions only: a
// goroutine writes a snapshot to a new file while the writer goes on committing to the
// old one, then the writer copies over the groups committed meanwhile and renames the
// new file over the old (see journal_compact.go).
//
// The price of the design against [Bolt]: Open replays the whole file (bbolt opens in
// constant time), and every retained session keeps a few hundred bytes of state in
// memory plus 24 bytes per append.
type Journal struct {
	o    options
	mem  *Memory // the state; its own Append and Sweep are never used
	dir  string
	path string
	lock *os.File
	f    *os.File // the journal, opened for appending; owned by the writer

	queue      chan *jrequest
	quit       chan struct{}
	writerDone chan struct{}
	closed     atomic.Bool
	closeOnce  sync.Once
	closeErr   error
	sweeper    *sweeper
	recovered  int
	// opened is when Open began: the claim time of owners recorded without one.
	opened time.Time
	// fault is the write or sync error that stopped the journal; later changes fail.
	fault atomic.Pointer[error]
	// stopped is closed when fault is set: it ends the watches (see Memory.stopped).
	stopped  chan struct{}
	stopOnce sync.Once

	// size is the file's length and live the bytes of records of sessions still held;
	// group is the seq of the last group in the file. All are the writer's (and Open's,
	// before the writer starts).
	size, live int64
	group      uint64
	// seed is the checksum seed of the file's groups (see journal_record.go); the
	// writer's too.
	seed uint32
	// jobs receives the journal's own metrics, when the observer takes them.
	jobs JournalObserver

	// Test seams: snapshotting is called as a rewrite's goroutine starts, rewritten by
	// the writer after each rewrite.
	snapshotting, rewritten func()
}

var (
	_ Store         = (*Journal)(nil)
	_ AttachWatcher = (*Journal)(nil)
)

// OpenJournal opens (creating if needed) the journal in dir, replays it into memory,
// cuts off a write torn by a crash at its end, closes every call a previous run left
// open with a synthetic ABORTED result, and starts the writer and, with
// [WithRetention], the sweeper. Damage before the end fails with [ErrCorrupt]. A dir
// that holds a [Bolt] log and no journal is refused, not silently started empty.
func OpenJournal(dir string, opts ...Option) (*Journal, error) {
	o := applyOptions(opts)
	if err := makeDataDir(dir); err != nil {
		return nil, err
	}
	j := &Journal{
		o:          o,
		mem:        &Memory{o: o, sessions: newShardMap[memSession](), done: make(chan struct{})},
		dir:        dir,
		path:       filepath.Join(dir, JournalFileName),
		queue:      make(chan *jrequest, o.queueSize),
		quit:       make(chan struct{}),
		writerDone: make(chan struct{}),
		opened:     o.now(),
		stopped:    make(chan struct{}),
	}
	j.mem.stopped, j.mem.stopErr = j.stopped, j.usable
	start := time.Now()
	if err := j.open(); err != nil {
		_ = j.release() // the open error is the one to report
		return nil, err
	}
	j.jobs, _ = o.observer.(JournalObserver)
	j.reportBytes()
	sessions := 0
	j.mem.sessions.each(func(string, *memSession) { sessions++ })
	o.logger.Info("session journal replayed", zap.String("path", j.path), zap.Int64("bytes", j.size),
		zap.Int("sessions", sessions), zap.Duration("took", time.Since(start)))
	go newJournalWriter(j).run()
	n, err := j.recoverOpenCalls()
	if err != nil {
		_ = j.Close()
		return nil, fmt.Errorf("session: open %s: recover interrupted calls: %w", j.path, err)
	}
	j.recovered = n
	if n > 0 {
		o.logger.Warn("closed calls interrupted by a restart with synthetic ABORTED results", zap.Int("calls", n))
	}
	j.sweeper = startSweeper(&j.o, j.Sweep)
	return j, nil
}

// open locks the directory, replays the journal and leaves j.f open for appending.
func (j *Journal) open() error {
	lock, err := lockFile(filepath.Join(j.dir, JournalLockName), j.o.lockTimeout)
	if err != nil {
		return err
	}
	j.lock = lock
	_ = os.Remove(j.path + compactSuffix) // a rewrite a crash interrupted
	if _, err := os.Stat(j.path); errors.Is(err, os.ErrNotExist) {
		if _, err := os.Stat(filepath.Join(j.dir, FileName)); err == nil {
			return fmt.Errorf("session: %s holds a bbolt session log (%s) and no journal; set session.store: bolt to keep using it",
				j.dir, FileName)
		}
		if err := createJournal(j.path); err != nil {
			return err
		}
	} else if err := syncDir(j.dir); err != nil {
		// The run that created the journal, or renamed a rewrite over it, may have
		// crashed before it synced the directory: the name is made durable before any
		// append is acknowledged in the file it names.
		return fmt.Errorf("session: open %s: sync the data directory: %w", j.path, err)
	}
	f, err := os.OpenFile(j.path, os.O_RDWR|syscall.O_NONBLOCK, 0) // a named pipe opens at once
	if err != nil {
		return fmt.Errorf("session: open %s: %w", j.path, err)
	}
	j.f = f
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("session: open %s: %w", j.path, err)
	}
	if err := regularFile(j.path, st); err != nil {
		return err
	}
	if err := j.replay(); err != nil {
		return fmt.Errorf("session: open %s: %w", j.path, err)
	}
	if _, err := f.Seek(j.size, io.SeekStart); err != nil {
		return fmt.Errorf("session: open %s: %w", j.path, err)
	}
	return nil
}

// createJournal writes an empty journal (its header) durably.
func createJournal(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("session: create %s: %w", path, err)
	}
	head, _ := newJournalHeader()
	_, err = f.Write(head)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = syncDir(filepath.Dir(path))
	}
	if err != nil {
		return fmt.Errorf("session: create %s: %w", path, err)
	}
	return nil
}

// replay reads every record into memory. A damaged tail that no whole record follows
// is a write torn by a crash: it is cut off. Any other damage is ErrCorrupt.
func (j *Journal) replay() error {
	st, err := j.f.Stat()
	if err != nil {
		return err
	}
	end := st.Size()
	r := bufio.NewReaderSize(io.NewSectionReader(j.f, 0, end), 1<<20)
	head, _ := r.Peek(journalHeadLen)
	var off int64
	// A group of the first format may be larger than maxTornBytes: a sweep wrote all
	// its deletions as one.
	frameMax := int64(maxTornBytes)
	switch {
	case int64(len(head)) == end && tornHeader(head):
		return j.rewriteHeader() // created by a run that crashed before its header was durable
	case len(head) == journalHeadLen && string(head[:len(journalMagic)]) == journalMagic:
		seed, ok := headerSeed(head)
		if !ok {
			return fmt.Errorf("%w: the journal's header does not match its checksum", ErrCorrupt)
		}
		off, j.seed = int64(journalHeadLen), seed
	case len(head) >= len(journalMagicV1) && string(head[:len(journalMagicV1)]) == journalMagicV1:
		off, j.seed = int64(len(journalMagicV1)), 0 // the first format: groups checksummed alone
		frameMax = end
	case int64(len(head)) == end && isHeaderPrefix(head):
		return j.rewriteHeader() // created by a run that crashed before its header was durable
	default:
		return fmt.Errorf("%w: not a toolsd session journal (bad header)", ErrCorrupt)
	}
	if _, err := r.Discard(int(off)); err != nil {
		return err
	}
	var hdr [recHeaderLen]byte
	for off < end {
		n, body, ok := readFrame(r, j.f, off, hdr[:], min(end-off, frameMax), j.seed)
		if !ok {
			return j.cutTail(off, end)
		}
		if err := j.replayGroup(body, off+recHeaderLen); err != nil {
			return fmt.Errorf("%w (group at offset %d)", err, off)
		}
		off += int64(n)
	}
	j.size = off
	return nil
}

// replayGroup applies the records of one whole group, whose body is at offset at.
func (j *Journal) replayGroup(body []byte, at int64) error {
	seq, offs, err := splitGroup(body)
	if err != nil {
		return err
	}
	if seq != j.group+1 {
		return fmt.Errorf("%w: journal group %d follows group %d", ErrCorrupt, seq, j.group)
	}
	for i, off := range offs {
		end := len(body)
		if i+1 < len(offs) {
			end = offs[i+1]
		}
		rec, err := skimRecord(body[off+recHeaderLen : end])
		if err != nil {
			return err
		}
		if err := j.replayRecord(&rec, at+int64(off), int32(end-off)); err != nil {
			return err
		}
	}
	j.group = seq
	return nil
}

// isHeaderPrefix reports whether b, shorter than a header, is the start of one.
func isHeaderPrefix(b []byte) bool {
	if len(b) <= len(journalMagic) {
		return journalMagic[:len(b)] == string(b)
	}
	return len(b) < journalHeadLen && string(b[:len(journalMagic)]) == journalMagic
}

// tornHeader reports whether b, a whole file of at most a header's length, is a
// header that was not yet durable when a crash came, with zeros past what reached the
// disk (some file systems keep a file's size but not its data). A header is made
// durable before anything is appended, so such a file never held a record.
func tornHeader(b []byte) bool {
	kept := bytes.TrimRight(b, "\x00")
	if len(kept) == len(b) {
		return false // no zeros: a prefix (isHeaderPrefix), or not a header
	}
	if len(b) == journalHeadLen {
		if _, ok := headerSeed(b); ok {
			return false // a whole header that happens to end in zeros
		}
	}
	return isHeaderPrefix(kept)
}

// rewriteHeader makes a file shorter than its header an empty journal.
func (j *Journal) rewriteHeader() error {
	head, seed := newJournalHeader()
	if _, err := j.f.WriteAt(head, 0); err != nil {
		return err
	}
	if err := j.f.Sync(); err != nil {
		return err
	}
	j.size, j.seed = int64(len(head)), seed
	return nil
}

// frameReadAhead is the longest group body Open reads before its checksum matched.
// Longer ones are read twice; a rewrite's groups (about compactChunkBytes) are not.
const frameReadAhead = 8 << 20

// readFrame reads the next group, at offset off of f, through r: its body if it is
// whole and its checksum (from seed) matches. A frame claiming more than left bytes,
// what the file holds from off or more than a writer writes, is damage read no
// further. A body over frameReadAhead is checksummed as it streams through r, then
// read from f: a damaged length that the file could hold costs reading the bytes it
// claims, not allocating them.
func readFrame(r *bufio.Reader, f io.ReaderAt, off int64, hdr []byte, left int64, seed uint32) (int, []byte, bool) {
	if _, err := io.ReadFull(r, hdr); err != nil {
		return 0, nil, false
	}
	n := int64(binary.BigEndian.Uint32(hdr))
	if n < 1 || n > left-recHeaderLen {
		return 0, nil, false
	}
	want := binary.BigEndian.Uint32(hdr[4:])
	if n <= frameReadAhead {
		body := make([]byte, n)
		if _, err := io.ReadFull(r, body); err != nil || groupCRC(seed, body) != want {
			return 0, nil, false
		}
		return recHeaderLen + int(n), body, true
	}
	sum := seed
	for rest := int(n); rest > 0; {
		b, err := r.Peek(min(rest, r.Size()))
		if err != nil {
			return 0, nil, false
		}
		sum = crc32.Update(sum, castagnoli, b)
		_, _ = r.Discard(len(b))
		rest -= len(b)
	}
	if sum != want {
		return 0, nil, false
	}
	body := make([]byte, n)
	if _, err := f.ReadAt(body, off+recHeaderLen); err != nil {
		return 0, nil, false
	}
	return recHeaderLen + int(n), body, true
}

// cutTail handles damage at off: a torn last group is truncated away; damage that a
// whole later group follows is corruption.
func (j *Journal) cutTail(off, end int64) error {
	if end-off > maxTornBytes {
		return fmt.Errorf("%w: damaged group at offset %d with %d bytes after it", ErrCorrupt, off, end-off)
	}
	tail := make([]byte, end-off)
	if _, err := j.f.ReadAt(tail, off); err != nil {
		return err
	}
	scan := tailScan{tail: tail, seed: j.seed, after: j.group}
	if q, seq, ok := scan.firstWhole(); ok {
		return fmt.Errorf("%w: damaged group at offset %d followed by whole group %d at %d", ErrCorrupt, off, seq, off+int64(q))
	}
	if err := j.f.Truncate(off); err != nil {
		return fmt.Errorf("cut off a torn write: %w", err)
	}
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("cut off a torn write: %w", err)
	}
	j.o.logger.Warn("cut off the end of the session journal that a crash left half-written",
		zap.Int64("offset", off), zap.Int64("bytes", end-off))
	j.size = off
	return nil
}

// replayRecord applies one record read back from the file at offset off. Replayed
// sessions are cold: their events are read back from the file when asked for.
func (j *Journal) replayRecord(rec *record, off int64, size int32) error {
	id := rec.sessionID // skimRecord's strings are copies: they keep no record alive
	switch rec.kind {
	case recKindEvents:
		s := j.mem.sessions.getOrCreate(id)
		if want := uint64(s.events.n) + 1; rec.events[0].Seq != want {
			return fmt.Errorf("%w: session %q continues at seq %d, want %d", ErrCorrupt, id, rec.events[0].Seq, want)
		}
		s.events.cold = true
		s.disk.file = j.f
		s.disk.locs = append(s.disk.locs, recLoc{first: rec.events[0].Seq, off: off, size: size})
		s.add(rec.events)
		j.account(s, int64(size))
	case recKindOwner:
		s := j.mem.sessions.getOrCreate(id)
		if s.owner == nil { // a later claim does not take effect: dead data, as in the writer
			s.owner, s.claimed = &rec.owner, rec.claimed
			if rec.claimed.IsZero() { // an untimed claim: idle from this start on
				s.claimed = j.opened
			}
			j.account(s, int64(size))
		}
	case recKindDelete:
		if s := j.mem.sessions.get(id); s != nil {
			j.live -= s.bytes
			j.mem.sessions.removeIf(id, func(*memSession) bool { return true })
		}
	}
	return nil
}

// reportBytes reports the file's length to the observer, if it takes it.
func (j *Journal) reportBytes() {
	if j.jobs != nil {
		j.jobs.JournalBytes(j.size)
	}
}

// account adds a record of size bytes to s and to the live total. Writer only.
func (j *Journal) account(s *memSession, size int64) {
	s.bytes += size
	j.live += size
}

// recoverOpenCalls closes, through the writer, every call the replayed log left open.
func (j *Journal) recoverOpenCalls() (int, error) {
	type orphans struct {
		id     string
		events []Event
	}
	var (
		all    []orphans
		failed error
	)
	j.mem.sessions.each(func(id string, s *memSession) {
		if len(s.calls.open) == 0 {
			return
		}
		o := orphans{id: id}
		for seq := range s.calls.open {
			call, err := s.eventAt(seq)
			if err != nil {
				failed = err
				return
			}
			o.events = append(o.events, interruptedResult(&call))
		}
		all = append(all, o)
	})
	if failed != nil {
		return 0, failed
	}
	n := 0
	for _, o := range all {
		sortBySource(o.events)
		// Not held to the event cap: a synthetic result carries its call's id and tool
		// name, and can outgrow a call that was just under it. Refusing it here would
		// refuse the journal at every start.
		if _, err := j.append(context.Background(), o.id, o.events, maxValueBytes); err != nil {
			return n, err
		}
		n += len(o.events)
	}
	return n, nil
}

// Recovered returns how many interrupted calls Open closed with a synthetic result.
func (j *Journal) Recovered() int { return j.recovered }

// Append implements [Store]; see [Bolt.Append] for how ctx is used.
func (j *Journal) Append(ctx context.Context, sessionID string, events ...Event) ([]Event, error) {
	return j.append(ctx, sessionID, events, j.o.maxEventBytes)
}

// append is Append with events held to maxBytes each.
func (j *Journal) append(ctx context.Context, sessionID string, events []Event, maxBytes int) ([]Event, error) {
	start := time.Now()
	if err := j.usable(); err != nil {
		return nil, err
	}
	if len(events) == 0 {
		return nil, nil
	}
	if err := validate(sessionID, events, maxBytes); err != nil {
		return nil, err
	}
	size := eventsRecordSize(sessionID, events)
	if size > maxRecordBytes {
		return nil, fmt.Errorf("%w: the append needs up to %d bytes, the journal's limit for one append is %d", ErrTooLarge, size, maxRecordBytes)
	}
	r := &jrequest{
		kind:      recKindEvents,
		sessionID: sessionID,
		events:    cloneAll(events),
		rec:       encodeEventsRecord(sessionID, events, size),
		done:      make(chan jresponse, 1),
	}
	if resp := j.submit(ctx, r); resp.err != nil {
		return nil, resp.err
	}
	j.o.observer.AppendDone(len(events), time.Since(start))
	return r.events, nil
}

// usable fails when the journal is closed or stopped by a write failure.
func (j *Journal) usable() error {
	if j.closed.Load() {
		return ErrClosed
	}
	if err := j.fault.Load(); err != nil {
		return fmt.Errorf("%w: %w", ErrStopped, *err)
	}
	return nil
}

// Read implements [Store].
func (j *Journal) Read(ctx context.Context, sessionID string, fromSeq uint64, limit int) ([]Event, error) {
	evs, err := j.mem.Read(ctx, sessionID, fromSeq, limit)
	return evs, damageIn(j.path, sessionID, err)
}

// Watch implements [Store].
func (j *Journal) Watch(ctx context.Context, sessionID string, fromSeq uint64, fn func(Event) error) error {
	return damageIn(j.path, sessionID, j.mem.Watch(ctx, sessionID, fromSeq, fn))
}

// WatchAttached implements [AttachWatcher].
func (j *Journal) WatchAttached(ctx context.Context, sessionID string, fromSeq uint64, attached func() error, fn func(Event) error) error {
	return damageIn(j.path, sessionID, j.mem.WatchAttached(ctx, sessionID, fromSeq, attached, fn))
}

// Summary implements [Store].
func (j *Journal) Summary(ctx context.Context, sessionID string) (Summary, error) {
	sum, err := j.mem.Summary(ctx, sessionID)
	return sum, damageIn(j.path, sessionID, err)
}

// Owner implements [Store].
func (j *Journal) Owner(ctx context.Context, sessionID string) (Owner, bool, error) {
	return j.mem.Owner(ctx, sessionID)
}

// ClaimOwner implements [Store]. A recorded owner is answered from memory; a first
// claim is committed like an append.
func (j *Journal) ClaimOwner(ctx context.Context, sessionID string, o Owner) (Owner, error) {
	if err := j.usable(); err != nil {
		return Owner{}, err
	}
	if err := validateSessionID(sessionID); err != nil {
		return Owner{}, err
	}
	if size := ownerRecordSize(sessionID, o); size > maxRecordBytes {
		return Owner{}, fmt.Errorf("%w: the owner needs up to %d bytes, the journal's limit for one record is %d", ErrTooLarge, size, maxRecordBytes)
	}
	if got, ok, err := j.mem.Owner(ctx, sessionID); err != nil || ok {
		return got, err
	}
	r := &jrequest{kind: recKindOwner, sessionID: sessionID, owner: o, done: make(chan jresponse, 1)}
	resp := j.submit(ctx, r)
	return resp.owner, resp.err
}

// Hold implements [Store].
func (j *Journal) Hold(ctx context.Context, sessionID string) (func(), error) {
	if j.closed.Load() {
		return nil, ErrClosed
	}
	return j.mem.holds.hold(ctx, sessionID, j.quit)
}

// Sweep applies the retention limits as of now through the writer and returns how many
// sessions it deleted.
func (j *Journal) Sweep(now time.Time) (int, error) {
	if err := j.usable(); err != nil {
		return 0, err
	}
	r := &jrequest{kind: recKindDelete, now: now, done: make(chan jresponse, 1)}
	resp := j.submit(context.Background(), r)
	return resp.removed, resp.err
}

// Delete implements [Store] through the writer: the session's delete record is
// durable before the session leaves memory, so it stays deleted after a restart.
func (j *Journal) Delete(ctx context.Context, sessionID string, seen *Owner, then func()) (int, error) {
	if err := j.usable(); err != nil {
		return 0, err
	}
	if err := validateSessionID(sessionID); err != nil {
		return 0, err
	}
	r := &jrequest{kind: recKindDelete, sessionID: sessionID, seen: seen, then: then, done: make(chan jresponse, 1)}
	resp := j.submit(ctx, r)
	return resp.removed, damageIn(j.path, sessionID, resp.err)
}

// submit queues r for the writer and waits for its outcome.
func (j *Journal) submit(ctx context.Context, r *jrequest) jresponse {
	return submit(ctx, j.queue, j.quit, j.writerDone, r, r.done, func(err error) jresponse { return jresponse{err: err} })
}

// Close implements [Store]: the writer finishes the group in flight, later calls fail
// with ErrClosed and watchers return it.
func (j *Journal) Close() error {
	j.closeOnce.Do(func() {
		j.closed.Store(true)
		close(j.quit)
		j.sweeper.close()
		<-j.writerDone
		_ = j.mem.Close()
		j.closeErr = j.release()
	})
	return j.closeErr
}

// release closes the journal and its lock.
func (j *Journal) release() error {
	var err error
	if j.f != nil {
		if cerr := j.f.Close(); cerr != nil {
			err = fmt.Errorf("session: close %s: %w", j.path, cerr)
		}
	}
	if j.lock != nil {
		_ = j.lock.Close() // closing the descriptor drops its lock
	}
	return err
}

// makeDataDir creates dir if needed and makes its entry, and the entry of every
// directory above it, durable in its parent, so that the log file created or found in
// it, whose appends are acknowledged once synced, cannot vanish with a directory in a
// crash. The levels are synced at every open, not only when this run creates them: a
// run that created some and crashed before syncing them left entries that may not
// survive a power loss, and nothing tells them from older ones. A level this run
// creates must sync; one it found may be on a filesystem toolsd cannot sync there (a
// directory it may not read, a read-only root): that one is skipped.
func makeDataDir(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("session: data directory: %w", err)
	}
	created := map[string]bool{} // the directories MkdirAll will create
	for d := abs; d != filepath.Dir(d); d = filepath.Dir(d) {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			break
		}
		created[d] = true
	}
	if err := os.MkdirAll(abs, 0o750); err != nil {
		return fmt.Errorf("session: create data directory: %w", err)
	}
	for d := abs; d != filepath.Dir(d); d = filepath.Dir(d) {
		err := syncDir(filepath.Dir(d))
		if err != nil && (created[d] || !cannotSyncDir(err)) {
			return fmt.Errorf("session: make the data directory durable: sync %s: %w", filepath.Dir(d), err)
		}
	}
	return nil
}

// cannotSyncDir reports whether err says a directory cannot be synced at all (rather
// than that syncing it failed).
func cannotSyncDir(err error) bool {
	return errors.Is(err, os.ErrPermission) || errors.Is(err, errors.ErrUnsupported) ||
		errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.EROFS)
}

// syncDir fsyncs a directory so that a file created or renamed in it survives a crash.
// A variable: tests see which directories are synced.
var syncDir = func(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
