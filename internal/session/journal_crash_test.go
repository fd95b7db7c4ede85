package session

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// A rewrite gives the journal a new file. A crash that tears the new file's last group
// can leave in its tail whole groups of the file the rewrite replaced, numbered past
// anything the new file holds: carried in the lost append's payload (a tool that read
// the data directory), or in blocks of the replaced file that the new one reused and a
// crash left unwritten. Neither is a group of this journal: the tail is cut and the
// journal opens with every group committed before it.
func TestJournalTornTailAfterRewrite(t *testing.T) {
	tails := map[string]func(t *testing.T, j *Journal, old []byte, good int64) []byte{
		// The lost append carries every group of the replaced file; the disk kept its
		// later pages but not the first.
		"payload copy of the replaced file": func(t *testing.T, j *Journal, old []byte, good int64) []byte {
			if _, err := j.Append(t.Context(), "s9", msg("lost "+string(old))); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(j.path)
			if err != nil {
				t.Fatal(err)
			}
			tail := b[good:]
			clear(tail[:64])
			return tail
		},
		// The file grew by a group whose blocks still hold the replaced file's bytes.
		"stale blocks of the replaced file": func(t *testing.T, _ *Journal, old []byte, good int64) []byte {
			return old[good:]
		},
	}
	for name, tail := range tails {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			j, opts, done := journalOfTen(t, dir, 1)
			old, err := os.ReadFile(j.path)
			if err != nil {
				t.Fatal(err)
			}
			if n, err := j.Sweep(j.o.now()); err != nil || n != 9 {
				t.Fatalf("Sweep() = %d, %v, want 9", n, err)
			}
			<-done // the rewrite renamed a file of one session over the old one
			if _, err := j.Append(t.Context(), "s9", msg("kept after the rewrite")); err != nil {
				t.Fatal(err)
			}
			if j.group >= 10 {
				t.Fatalf("the rewritten file has %d groups, want fewer than the 11 of the file it replaced", j.group)
			}
			want, err := j.Read(t.Context(), "s9", 1, 0)
			if err != nil {
				t.Fatal(err)
			}
			good := j.size
			damaged := tail(t, j, old, good)
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(j.path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(j.path, append(b[:good:good], damaged...), 0o600); err != nil {
				t.Fatal(err)
			}

			r, err := OpenJournal(dir, opts...)
			if err != nil {
				t.Fatalf("OpenJournal() after a torn write in a rewritten journal = %v, want the torn tail cut", err)
			}
			defer closeStore(t, r)
			got, err := r.Read(t.Context(), "s9", 1, 0)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Read(s9) after cutting the tail (-want +got):\n%s", diff)
			}
			if st, err := os.Stat(filepath.Join(dir, JournalFileName)); err != nil || st.Size() != good {
				t.Errorf("journal size after open = %v, %v, want %d (cut back to the last whole group)", st.Size(), err, good)
			}
		})
	}
}

// A journal of the first format (testdata/journal_v1, written before groups were bound
// to their file: an owner claim, a tool call and its result, a session deleted by
// retention) opens unchanged and takes appends in its own format; a rewrite, with
// groups committed while it ran, replaces it with a file of the current format.
func TestJournalFirstFormatOpens(t *testing.T) {
	v1, err := os.ReadFile(filepath.Join("testdata", "journal_v1"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, JournalFileName)
	if err := os.WriteFile(path, v1, 0o600); err != nil {
		t.Fatal(err)
	}
	opts := []Option{WithCompactBytes(2 << 10), WithRetention(0, 1), WithSweepInterval(0), WithClock(tickingClock())}
	check := func(j *Journal, extra ...string) {
		t.Helper()
		got, err := j.Read(t.Context(), "kept", 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 3+len(extra) || got[0].Message.Content != "hello" || got[1].Call.CallID != "c1" ||
			got[1].Call.Arguments != `{"p":1}` || got[2].Result.Content != "ok" || got[2].Result.Recovered {
			t.Fatalf("Read(kept) = %+v, want hello, call c1 and its result, then %q", got, extra)
		}
		for i, text := range extra {
			if got[3+i].Message.Content != text {
				t.Errorf("Read(kept)[%d] = %q, want %q", 3+i, got[3+i].Message.Content, text)
			}
		}
		if o, ok, _ := j.Owner(t.Context(), "kept"); !ok || o != (Owner{Identity: "alice", Scope: "x", ScopeKnown: true}) {
			t.Errorf("Owner(kept) = %+v, %v, want alice", o, ok)
		}
		if gone, _ := j.Read(t.Context(), "gone", 1, 0); len(gone) != 0 {
			t.Errorf("Read(gone) = %d events, want the session deleted", len(gone))
		}
	}
	j, err := OpenJournal(dir, opts...)
	if err != nil {
		t.Fatalf("OpenJournal(first format) = %v", err)
	}
	check(j)
	if _, err := j.Append(t.Context(), "kept", msg("appended")); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), string(v1)) || !strings.HasPrefix(string(b), journalMagicV1) {
		t.Fatal("an append to a journal of the first format changed what was there")
	}

	j, err = OpenJournal(dir, opts...)
	if err != nil {
		t.Fatalf("OpenJournal(first format, appended to) = %v", err)
	}
	check(j, "appended")
	entered, hold, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	j.snapshotting = func() { close(entered); <-hold }
	j.rewritten = func() { close(done) }
	if _, err := j.Append(t.Context(), "big", msg(strings.Repeat("x", 4<<10))); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Append(t.Context(), "kept", msg("before the rewrite")); err != nil {
		t.Fatal(err)
	}
	if n, err := j.Sweep(j.o.now()); err != nil || n != 1 {
		t.Fatalf("Sweep() = %d, %v, want big deleted", n, err)
	}
	<-entered
	if _, err := j.Append(t.Context(), "kept", msg("during the rewrite")); err != nil {
		t.Fatal(err)
	}
	close(hold)
	<-done
	if _, err := j.Append(t.Context(), "kept", msg("after the rewrite")); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if b, err = os.ReadFile(path); err != nil || !strings.HasPrefix(string(b), journalMagic) {
		t.Fatalf("the rewritten journal starts %q, %v, want the current format", b[:min(len(b), 8)], err)
	}
	r, err := OpenJournal(dir, opts...)
	if err != nil {
		t.Fatalf("OpenJournal(rewritten from the first format) = %v", err)
	}
	defer closeStore(t, r)
	check(r, "appended", "before the rewrite", "during the rewrite", "after the rewrite")
}

// smallJournal writes a journal of a few groups, the last one a retention sweep that
// deletes four sessions (one group of four records), and returns its bytes, where its
// last group starts, and the events of every session before the sweep.
func smallJournal(t *testing.T) (dir string, file []byte, last int64, before map[string][]Event) {
	t.Helper()
	dir = t.TempDir()
	opts := []Option{WithRetention(0, 1), WithSweepInterval(0), WithClock(tickingClock())}
	j, err := OpenJournal(dir, opts...)
	if err != nil {
		t.Fatal(err)
	}
	before = map[string][]Event{}
	for i := range 5 {
		id := fmt.Sprintf("s%d", i)
		if _, err := j.Append(t.Context(), id, msg(fmt.Sprintf("m%d", i))); err != nil {
			t.Fatal(err)
		}
		if before[id], err = j.Read(t.Context(), id, 1, 0); err != nil {
			t.Fatal(err)
		}
	}
	last = j.size
	if n, err := j.Sweep(j.o.now()); err != nil || n != 4 {
		t.Fatalf("Sweep() = %d, %v, want 4", n, err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if file, err = os.ReadFile(j.path); err != nil {
		t.Fatal(err)
	}
	return dir, file, last, before
}

// A crash can cut the last group at any byte: the journal opens with every group
// before it and nothing of it (the sweep's four deletions all undone), cut back to
// where the group started.
func TestJournalCutAnywhereInLastGroup(t *testing.T) {
	dir, file, last, before := smallJournal(t)
	path := filepath.Join(dir, JournalFileName)
	for cut := last; cut < int64(len(file)); cut++ {
		if err := os.WriteFile(path, file[:cut], 0o600); err != nil {
			t.Fatal(err)
		}
		j, err := OpenJournal(dir)
		if err != nil {
			t.Fatalf("cut at %d of %d: OpenJournal() = %v", cut, len(file), err)
		}
		for id, want := range before {
			if got, err := j.Read(t.Context(), id, 1, 0); err != nil || !cmp.Equal(want, got) {
				t.Errorf("cut at %d: Read(%s) = %v, %v, want %v", cut, id, got, err, want)
			}
		}
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		if st, err := os.Stat(path); err != nil || st.Size() != last {
			t.Errorf("cut at %d: journal size after open = %v, %v, want %d", cut, st.Size(), err, last)
		}
	}
}

// A flipped bit anywhere before the last group (the header included) is not a torn
// write: Open refuses the journal rather than cut off committed groups.
func TestJournalFlippedBitBeforeLastGroup(t *testing.T) {
	dir, file, last, _ := smallJournal(t)
	path := filepath.Join(dir, JournalFileName)
	for off := range last {
		for _, bit := range []byte{0x01, 0x80} {
			b := bytes.Clone(file)
			b[off] ^= bit
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
			j, err := OpenJournal(dir)
			if err == nil {
				_ = j.Close()
				t.Errorf("bit %#x of byte %d (of %d, last group at %d) flipped: OpenJournal() = nil, want ErrCorrupt", bit, off, len(file), last)
				continue
			}
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("bit %#x of byte %d flipped: OpenJournal() = %v, want ErrCorrupt", bit, off, err)
			}
		}
	}
}

// A file shorter than a header that is the start of one was created by a run that
// crashed before the header was durable: it opens as an empty journal.
func TestJournalHeaderPrefixIsEmpty(t *testing.T) {
	head, _ := newJournalHeader()
	for _, n := range []int{0, 5, 8, 12, journalHeadLen - 1} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, JournalFileName), head[:n], 0o600); err != nil {
			t.Fatal(err)
		}
		j, err := OpenJournal(dir)
		if err != nil {
			t.Fatalf("%d header bytes: OpenJournal() = %v", n, err)
		}
		if _, err := j.Append(t.Context(), "a", msg("m")); err != nil {
			t.Fatal(err)
		}
		closeStore(t, j)
		r, err := OpenJournal(dir)
		if err != nil {
			t.Fatalf("%d header bytes: reopen: %v", n, err)
		}
		if got, _ := r.Read(t.Context(), "a", 1, 0); len(got) != 1 {
			t.Errorf("%d header bytes: Read(a) after reopen = %d events, want 1", n, len(got))
		}
		closeStore(t, r)
	}
}

// A file of at most a header's length whose header was written but not yet durable
// may come back zero-filled past some point (a file system that keeps the size but not
// the data): no append can have followed (the header is made durable first), so it
// opens as an empty journal too.
func TestJournalZeroFilledHeaderIsEmpty(t *testing.T) {
	head, _ := newJournalHeader()
	for _, kept := range []int{0, 3, len(journalMagic), journalHeadLen - 4} {
		for _, size := range []int{kept + 1, journalHeadLen} {
			file := make([]byte, size)
			copy(file, head[:kept])
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, JournalFileName), file, 0o600); err != nil {
				t.Fatal(err)
			}
			j, err := OpenJournal(dir)
			if err != nil {
				t.Errorf("%d header bytes, zeros to %d: OpenJournal() = %v, want an empty journal", kept, size, err)
				continue
			}
			if _, err := j.Append(t.Context(), "a", msg("m")); err != nil {
				t.Fatal(err)
			}
			closeStore(t, j)
			r, err := OpenJournal(dir)
			if err != nil {
				t.Fatalf("%d header bytes, zeros to %d: reopen: %v", kept, size, err)
			}
			if got, _ := r.Read(t.Context(), "a", 1, 0); len(got) != 1 {
				t.Errorf("%d header bytes, zeros to %d: Read(a) after reopen = %d events, want 1", kept, size, len(got))
			}
			closeStore(t, r)
		}
	}
}

// A sweep's deletions are written in groups of at most sweepGroupBytes (plus one
// record), so that a sweep a crash tears is never more than Open cuts off as a torn
// write: one group of every deletion of a large sweep could outgrow maxTornBytes and
// make Open refuse the journal. A torn last group of a sweep undoes only its own
// deletions.
func TestJournalSweepGroupsAreBounded(t *testing.T) {
	orig := sweepGroupBytes
	sweepGroupBytes = 1 << 10
	t.Cleanup(func() { sweepGroupBytes = orig })
	dir := t.TempDir()
	opts := []Option{WithRetention(0, 1), WithSweepInterval(0), WithClock(tickingClock())}
	j, err := OpenJournal(dir, opts...)
	if err != nil {
		t.Fatal(err)
	}
	pad := strings.Repeat("p", 100)
	for i := range 50 {
		if _, err := j.Append(t.Context(), fmt.Sprintf("%s%02d", pad, i), msg("m")); err != nil {
			t.Fatal(err)
		}
	}
	before, groups := j.size, j.group
	if n, err := j.Sweep(j.o.now()); err != nil || n != 49 {
		t.Fatalf("Sweep() = %d, %v, want 49", n, err)
	}
	after, swept := j.size, j.group-groups
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(j.path)
	if err != nil {
		t.Fatal(err)
	}
	maxRecord := len(appendDeleteRecord(nil, pad+"00"))
	var starts []int64
	for off := before; off < after; {
		n := int64(recHeaderLen) + int64(binary.BigEndian.Uint32(b[off:]))
		if n > int64(groupHeadLen+sweepGroupBytes+maxRecord) {
			t.Errorf("sweep group at %d is %d bytes, want at most %d", off, n, groupHeadLen+sweepGroupBytes+maxRecord)
		}
		starts = append(starts, off)
		off += n
	}
	if swept < 2 || int(swept) != len(starts) {
		t.Fatalf("the sweep wrote %d groups (%d found in the file), want several", swept, len(starts))
	}

	// Tear the sweep's last group: the deletions of its earlier groups stay.
	lastStart := starts[len(starts)-1]
	if err := os.WriteFile(j.path, b[:lastStart+10], 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := OpenJournal(dir, WithSweepInterval(0))
	if err != nil {
		t.Fatalf("OpenJournal() after a torn sweep = %v", err)
	}
	defer closeStore(t, r)
	kept := 0
	for i := range 50 {
		if got, _ := r.Read(t.Context(), fmt.Sprintf("%s%02d", pad, i), 1, 0); len(got) > 0 {
			kept++
		}
	}
	lastGroupDeletes := 0
	for body := b[lastStart+groupHeadLen : after]; len(body) > 0; lastGroupDeletes++ {
		body = body[recHeaderLen+int(binary.BigEndian.Uint32(body)):]
	}
	if want := 1 + lastGroupDeletes; kept != want {
		t.Errorf("%d sessions after tearing the sweep's last group, want %d (the kept one and the torn group's %d)", kept, want, lastGroupDeletes)
	}
}

// A rewrite writes the new journal beside the old one and renames it over it: a crash
// at any point leaves the old journal (with the new one whole, cut short or absent
// beside it) or the new one, and each opens with the same sessions. The file beside it
// is removed.
func TestJournalRewriteCrashPoints(t *testing.T) {
	dir := t.TempDir()
	j, _, done := journalOfTen(t, dir, 2)
	if _, err := j.ClaimOwner(t.Context(), "s9", Owner{Identity: "alice"}); err != nil {
		t.Fatal(err)
	}
	// The rewrite starts after the sweep's group is committed: the old file as the
	// rename finds it is the file after the sweep, which the writer reports as j.size.
	if n, err := j.Sweep(j.o.now()); err != nil || n != 8 {
		t.Fatalf("Sweep() = %d, %v, want 8", n, err)
	}
	<-done
	want := map[string][]Event{}
	var err error
	for i := range 10 {
		id := fmt.Sprintf("s%d", i)
		if want[id], err = j.Read(t.Context(), id, 1, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	newFile, err := os.ReadFile(j.path)
	if err != nil {
		t.Fatal(err)
	}

	// The old file: the same appends and sweep in a journal never rewritten.
	oldDir := t.TempDir()
	o, err := OpenJournal(oldDir, WithRetention(0, 2), WithSweepInterval(0), WithClock(tickingClock()))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if _, err := o.Append(t.Context(), fmt.Sprintf("s%d", i), msg(strings.Repeat("x", 1000))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := o.ClaimOwner(t.Context(), "s9", Owner{Identity: "alice"}); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Sweep(o.o.now()); err != nil {
		t.Fatal(err)
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	oldFile, err := os.ReadFile(o.path)
	if err != nil {
		t.Fatal(err)
	}
	if len(newFile) >= len(oldFile) {
		t.Fatalf("rewritten journal %d bytes, old %d: want it smaller", len(newFile), len(oldFile))
	}

	type state struct {
		journal []byte
		beside  []byte // the rewrite's file, nil when absent
	}
	points := map[string]state{
		"before the new file": {oldFile, nil},
		"new file empty":      {oldFile, []byte{}},
		"new file cut short":  {oldFile, newFile[:len(newFile)/2]},
		"new file whole":      {oldFile, newFile},
		"renamed":             {newFile, nil},
	}
	for name, st := range points {
		t.Run(name, func(t *testing.T) {
			d := t.TempDir()
			if err := os.WriteFile(filepath.Join(d, JournalFileName), st.journal, 0o600); err != nil {
				t.Fatal(err)
			}
			if st.beside != nil {
				if err := os.WriteFile(filepath.Join(d, JournalFileName+compactSuffix), st.beside, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			r, err := OpenJournal(d, WithSweepInterval(0))
			if err != nil {
				t.Fatalf("OpenJournal() = %v", err)
			}
			defer closeStore(t, r)
			for id, evs := range want {
				got, err := r.Read(t.Context(), id, 1, 0)
				if err != nil {
					t.Fatal(err)
				}
				if len(evs) != len(got) || (len(evs) > 0 && evs[0].Message.Content != got[0].Message.Content) {
					t.Errorf("Read(%s) = %d events, want %d", id, len(got), len(evs))
				}
			}
			if ow, ok, _ := r.Owner(t.Context(), "s9"); !ok || ow.Identity != "alice" {
				t.Errorf("Owner(s9) = %+v, %v, want alice", ow, ok)
			}
			if _, err := os.Stat(filepath.Join(d, JournalFileName+compactSuffix)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the rewrite's file is still there after Open: %v", err)
			}
		})
	}
}

// journalOfTen opens a journal in dir that keeps at most keep sessions and rewrites
// itself past 4 KiB, and appends ten sessions of 1 KB to it: retention's sweep then
// leads to a rewrite, which closes done. It returns the options to open dir again with.
func journalOfTen(t *testing.T, dir string, keep int) (*Journal, []Option, chan struct{}) {
	t.Helper()
	opts := []Option{WithCompactBytes(4 << 10), WithRetention(0, keep), WithSweepInterval(0), WithClock(tickingClock())}
	j, err := OpenJournal(dir, opts...)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	j.rewritten = func() { close(done) }
	for i := range 10 {
		if _, err := j.Append(t.Context(), fmt.Sprintf("s%d", i), msg(strings.Repeat("x", 1000))); err != nil {
			t.Fatal(err)
		}
	}
	return j, opts, done
}

// The writer stops taking requests into a group once their records hold maxBatchBytes,
// owner claims counted with appends: else a burst of claims queued behind a commit
// went into one group of any size, beyond what Open reads as one group or cuts off as
// a torn write.
func TestJournalGroupCountsOwnerClaims(t *testing.T) {
	dir := t.TempDir()
	g := newGate()
	j, err := OpenJournal(dir, WithObserver(g))
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = j.Append(t.Context(), "first", msg("m")) }()
	<-g.entered // the writer is inside the first commit; the claims queue behind it
	const claims = 40
	identity := strings.Repeat("i", 1<<20)
	errs := make(chan error, claims)
	for i := range claims {
		go func() {
			_, err := j.ClaimOwner(t.Context(), fmt.Sprintf("s%d", i), Owner{Identity: identity})
			errs <- err
		}()
	}
	waitFor(t, "the claims to queue", func() bool { return len(j.queue) == claims })
	close(g.release)
	for range claims {
		if err := <-errs; err != nil {
			t.Fatalf("ClaimOwner() = %v", err)
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(j.path)
	if err != nil {
		t.Fatal(err)
	}
	record := len(appendOwnerRecord(nil, "s10", Owner{Identity: identity}, time.Now()))
	for off := journalHeadLen; off < len(b); {
		n := int(binary.BigEndian.Uint32(b[off:]))
		if max := groupHeadLen - recHeaderLen + maxBatchBytes + record; n > max {
			t.Errorf("group at %d holds %d bytes, want at most %d (maxBatchBytes and one more claim)", off, n, max)
		}
		off += recHeaderLen + n
	}
}

// A group's length field damaged to claim more than a writer puts in one group (or
// than the file holds) is damage found without reading what it claims: at the end of
// the file it is a torn last write, cut off; with more than a torn write after it,
// corruption. A damaged length the file could hold fails the group's checksum without
// Open allocating it either: a bit flip must not make a small container run out of
// memory at start-up before the journal is refused.
func TestJournalDamagedGroupLength(t *testing.T) {
	dir, file, last, _ := smallJournal(t)
	path := filepath.Join(dir, JournalFileName)
	const huge = 1<<32 - 1
	overMax := uint32(maxTornBytes - recHeaderLen + 1) // the body of a frame one byte over a torn write's
	tests := map[string]struct {
		at     int    // the group whose length is damaged
		length uint32 // what it claims
		grow   int64  // zeros appended to the file (a sparse file)
		cut    bool   // a torn last write: cut off; else ErrCorrupt
	}{
		"last group, huge":                                     {at: int(last), length: huge, cut: true},
		"last group, over the largest group":                   {at: int(last), length: overMax, cut: true},
		"first group, huge, more than a torn write after it":   {at: journalHeadLen, length: huge, grow: maxTornBytes + 1<<20},
		"first group, over the largest group":                  {at: journalHeadLen, length: overMax, grow: maxTornBytes + 1<<20},
		"first group, 64 MiB, more than a torn write after it": {at: journalHeadLen, length: 64 << 20, grow: maxTornBytes + 1<<20},
		"first group, 64 MiB over the file's end":              {at: journalHeadLen, length: 64 << 20, grow: 1 << 20},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			b := bytes.Clone(file)
			binary.BigEndian.PutUint32(b[tt.at:], tt.length)
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(path, int64(len(b))+tt.grow); err != nil {
				t.Fatal(err)
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			j, err := OpenJournal(dir)
			runtime.ReadMemStats(&after)
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 16<<20 {
				t.Errorf("OpenJournal() allocated %d MiB for a group claiming %d MiB, want a few MiB at most", grew>>20, tt.length>>20)
			}
			switch {
			case tt.cut && err != nil:
				t.Fatalf("OpenJournal() = %v, want the torn last group cut off", err)
			case tt.cut:
				closeStore(t, j)
				if st, err := os.Stat(path); err != nil || st.Size() != last {
					t.Errorf("journal size after open = %v, %v, want %d", st.Size(), err, last)
				}
			case err == nil:
				closeStore(t, j)
				t.Fatal("OpenJournal() = nil, want ErrCorrupt")
			case !errors.Is(err, ErrCorrupt):
				t.Errorf("OpenJournal() = %v, want ErrCorrupt", err)
			}
		})
	}
}

// A group longer than Open reads before checking it (frameReadAhead) is checksummed
// first and then read: it replays as any other.
func TestJournalReplaysLargeGroup(t *testing.T) {
	dir := t.TempDir()
	j, err := OpenJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	want, err := j.Append(t.Context(), "big", msg(strings.Repeat("x", frameReadAhead)), msg("after"))
	if err != nil {
		t.Fatal(err)
	}
	closeStore(t, j)
	r, err := OpenJournal(dir)
	if err != nil {
		t.Fatalf("OpenJournal() = %v", err)
	}
	defer closeStore(t, r)
	if got, err := r.Read(t.Context(), "big", 1, 0); err != nil || !cmp.Equal(want, got) {
		t.Errorf("Read(big) after reopen = %d events, %v; want the %d appended", len(got), err, len(want))
	}
}
