package session

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// A rewrite of the journal runs beside the writer, which keeps committing to the old
// file meanwhile:
//
//  1. the writer takes a snapshot of every session (where its events records are so
//     far, and its owner) and remembers the file's length;
//  2. a goroutine copies those records, which are never changed, to a new file (with a
//     file id of its own) as groups 1..K and fsyncs it;
//  3. the writer copies the groups it committed since the snapshot to the new file,
//     numbered on from K+1, fsyncs it, renames it over the journal, fsyncs the
//     directory and appends to it from then on.
//
// Appends wait only for step 3, whose cost is the groups committed during step 2.

// rewrite is a rewrite in progress.
type rewrite struct {
	from     int64 // the journal's length at the snapshot
	started  time.Time
	sessions []rewriteSession
	stop     atomic.Bool // Close asks the goroutine to give up
	done     chan rewritten
}

// rewriteSession is one session of the snapshot.
type rewriteSession struct {
	id    string
	s     *memSession
	disk  diskLog // its events records at the snapshot
	owner *Owner
	// claimed is the owner's claim time.
	claimed time.Time
	bytes   int64 // the session's record bytes at the snapshot
}

// rewritten is what step 2 produced.
type rewritten struct {
	f     *os.File
	size  int64
	group uint64
	seed  uint32     // the new file's checksum seed
	bytes []int64    // per snapshot session, its record bytes in the new file
	locs  [][]recLoc // per snapshot session, its events records in the new file
	err   error
}

var errRewriteStopped = fmt.Errorf("session: journal rewrite stopped by Close")

// maybeCompact starts a rewrite when the journal is large and mostly dead and none runs.
func (w *journalWriter) maybeCompact() {
	j := w.j
	if w.rw != nil || j.size < j.o.compactBytes || j.size < 2*j.live || j.usable() != nil {
		return
	}
	rw := &rewrite{from: j.size, started: time.Now(), done: make(chan rewritten, 1)}
	j.mem.sessions.each(func(id string, s *memSession) {
		rw.sessions = append(rw.sessions, rewriteSession{id: id, s: s})
	})
	for i := range rw.sessions {
		rs := &rw.sessions[i]
		rs.s.mu.Lock()
		n := len(rs.s.disk.locs)
		rs.disk, rs.bytes = diskLog{file: rs.s.disk.file, locs: rs.s.disk.locs[:n:n]}, rs.s.bytes
		if rs.s.owner != nil {
			o := *rs.s.owner
			rs.owner, rs.claimed = &o, rs.s.claimed
		}
		rs.s.mu.Unlock()
	}
	w.rw = rw
	go func() { rw.done <- j.writeSnapshot(rw) }()
}

// rewriteDone is the channel the writer waits on for a rewrite (nil when none runs).
func (w *journalWriter) rewriteDone() <-chan rewritten {
	if w.rw == nil {
		return nil
	}
	return w.rw.done
}

// stopRewrite ends a rewrite in progress without using it (Close).
func (w *journalWriter) stopRewrite() {
	if w.rw == nil {
		return
	}
	w.rw.stop.Store(true)
	w.j.discard(<-w.rw.done)
	w.rw = nil
}

// discard drops a rewrite's file.
func (j *Journal) discard(res rewritten) {
	if res.f != nil {
		_ = res.f.Close()
	}
	_ = os.Remove(j.path + compactSuffix)
}

// writeSnapshot is step 2; it runs on its own goroutine and touches only rw.
func (j *Journal) writeSnapshot(rw *rewrite) rewritten {
	if j.snapshotting != nil {
		j.snapshotting()
	}
	tmp := j.path + compactSuffix
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o600)
	if err != nil {
		return rewritten{err: err}
	}
	head, seed := newJournalHeader()
	c := compactor{bw: bufio.NewWriterSize(f, 1<<20), size: int64(len(head)), seed: seed}
	_, c.err = c.bw.Write(head)
	c.group = beginGroup(nil, 1)
	bytes := make([]int64, len(rw.sessions))
	locs := make([][]recLoc, len(rw.sessions))
	for i := range rw.sessions {
		if rw.stop.Load() {
			c.err = errRewriteStopped
		}
		if c.err != nil {
			break
		}
		rs := &rw.sessions[i]
		if rs.owner != nil {
			bytes[i] += c.add(appendOwnerRecord(c.group, rs.id, *rs.owner, rs.claimed))
		}
		locs[i] = make([]recLoc, 0, len(rs.disk.locs))
		for _, loc := range rs.disk.locs {
			if rw.stop.Load() {
				c.err = errRewriteStopped
				break
			}
			start := len(c.group)
			grown := slices.Grow(c.group, int(loc.size))[:start+int(loc.size)]
			if c.err = rs.disk.copyRecord(grown[start:], loc); c.err != nil {
				break
			}
			locs[i] = append(locs[i], recLoc{first: loc.first, off: c.size + int64(start), size: loc.size})
			bytes[i] += c.add(grown)
		}
	}
	c.flush()
	if c.err == nil {
		c.err = c.bw.Flush()
	}
	if c.err == nil && rw.stop.Load() {
		c.err = errRewriteStopped
	}
	if c.err == nil {
		c.err = f.Sync()
	}
	if c.err != nil {
		_ = f.Close()
		return rewritten{err: c.err}
	}
	return rewritten{f: f, size: c.size, group: c.seq, seed: seed, bytes: bytes, locs: locs}
}

// finishRewrite is step 3, on the writer.
func (w *journalWriter) finishRewrite(res rewritten) {
	j, rw := w.j, w.rw
	w.rw = nil
	before := j.size
	if j.closed.Load() { // Close is on its way: drop the rewrite quietly
		j.discard(res)
		return
	}
	err := res.err
	if err == nil {
		err = j.usable()
	}
	tail := res.size
	if err == nil {
		res.size, res.group, err = copyGroups(j.f, j.seed, rw.from, j.size, res.f, res.seed, res.size, res.group)
	}
	if err == nil {
		err = res.f.Sync()
	}
	if err == nil {
		err = os.Rename(j.path+compactSuffix, j.path)
	}
	if err != nil {
		j.discard(res)
		// The old journal is intact and still open: keep appending to it.
		j.o.logger.Error("session journal rewrite failed; will retry when the file has doubled", zap.Error(err))
		j.live = j.size
		return
	}
	old := j.f
	j.f = res.f
	j.size, j.group, j.seed = res.size, res.group, res.seed
	// Every session's records move to the new file: the snapshot's to where step 2 put
	// them, the ones committed since by as much as their groups moved. A reader of a
	// cold page holds its lock while it reads, so once all are moved nobody reads the
	// old file but a watch reading a whole session back (see memSession.warm): its
	// read fails once the file is closed, or ends, and it sees the file changed and
	// reads the session again from the new one.
	snap := make(map[*memSession]int, len(rw.sessions))
	for i, rs := range rw.sessions {
		snap[rs.s] = i
	}
	shift := tail - rw.from
	j.live = 0
	j.mem.sessions.each(func(_ string, s *memSession) {
		s.mu.Lock()
		defer s.mu.Unlock()
		var moved []recLoc
		since := s.disk.locs
		if i, ok := snap[s]; ok {
			moved = append(make([]recLoc, 0, len(since)), res.locs[i]...)
			since = since[len(rw.sessions[i].disk.locs):]
			s.bytes += res.bytes[i] - rw.sessions[i].bytes // what it appended since stays counted
		}
		for _, l := range since {
			l.off += shift
			moved = append(moved, l)
		}
		s.disk.locs = moved
		if len(moved) > 0 {
			s.disk.file = res.f
		}
		j.live += s.bytes
	})
	_ = old.Close()
	if err := syncDir(j.dir); err != nil {
		// The new name may not survive a power loss: appends to the new file could be
		// lost with it, so none are taken.
		_ = j.stop(fmt.Errorf("session: sync the data directory after rewriting the journal: %w", err))
		return
	}
	j.o.logger.Info("session journal rewritten", zap.Int64("bytes_before", before),
		zap.Int64("bytes_after", j.size), zap.Duration("took", time.Since(rw.started)))
	j.reportBytes()
	if j.jobs != nil {
		j.jobs.JournalRewritten(time.Since(rw.started))
	}
	if j.rewritten != nil {
		j.rewritten()
	}
}

// copyGroups appends the groups of src[from:to] to dst (whose length is size and whose
// last group is group), numbering them on and checksumming them as dst's, one group at
// a time, and returns dst's new length and last group. The seeds are the files'
// checksum seeds.
func copyGroups(src *os.File, srcSeed uint32, from, to int64, dst *os.File, dstSeed uint32, size int64, group uint64) (int64, uint64, error) {
	var buf []byte
	for off := from; off < to; {
		var hdr [recHeaderLen]byte
		if _, err := src.ReadAt(hdr[:], off); err != nil {
			return 0, 0, fmt.Errorf("read the journal at %d: %w", off, err)
		}
		n := int64(recHeaderLen) + int64(binary.BigEndian.Uint32(hdr[:]))
		if n > to-off {
			return 0, 0, fmt.Errorf("%w: journal group at offset %d runs past the end", ErrCorrupt, off)
		}
		buf = slices.Grow(buf[:0], int(n))[:n]
		if _, err := src.ReadAt(buf, off); err != nil {
			return 0, 0, fmt.Errorf("read the journal at %d: %w", off, err)
		}
		if _, ok := groupAt(buf, 0, srcSeed); !ok {
			return 0, 0, fmt.Errorf("%w: journal group at offset %d is damaged", ErrCorrupt, off)
		}
		group++
		binary.BigEndian.PutUint64(buf[recHeaderLen+1:], group)
		sealGroup(buf, dstSeed)
		if _, err := dst.WriteAt(buf, size); err != nil {
			return 0, 0, err
		}
		size += n
		off += n
	}
	if _, err := dst.Seek(size, 0); err != nil {
		return 0, 0, err
	}
	return size, group, nil
}

// compactor writes groups of about compactChunkBytes to a rewritten journal.
type compactor struct {
	bw    *bufio.Writer
	group []byte // the group being filled; records are appended to it
	seq   uint64 // the last group written
	seed  uint32 // the file's checksum seed
	size  int64
	err   error
}

// add takes group, the current group with one more record appended, and returns that
// record's size; a group that is full is written.
func (c *compactor) add(group []byte) int64 {
	n := int64(len(group) - len(c.group))
	c.group = group
	if len(c.group) >= compactChunkBytes {
		c.flush()
	}
	return n
}

// flush writes the current group if it holds records and starts the next one.
func (c *compactor) flush() {
	if len(c.group) == groupHeadLen {
		return
	}
	sealGroup(c.group, c.seed)
	if c.err == nil {
		_, c.err = c.bw.Write(c.group)
	}
	c.size += int64(len(c.group))
	c.seq++
	c.group = beginGroup(c.group[:0], c.seq+1)
}

// compactChunkBytes is about the size of one group of a rewritten journal.
const compactChunkBytes = 1 << 20
