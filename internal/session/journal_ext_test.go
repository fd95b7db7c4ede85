package session_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap/zaptest"

	"github.com/toolsd/toolsd/internal/session"
)

func openJournal(t *testing.T, dir string, opts ...session.Option) durable {
	t.Helper()
	return durableKinds()["Journal"].openT(t, dir, opts...)
}

func journalSize(t *testing.T, dir string) int64 {
	t.Helper()
	st, err := os.Stat(filepath.Join(dir, session.JournalFileName))
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

func closeOrFail(t *testing.T, s session.Store) {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
}

// A crash can tear the last group write: whatever follows the last whole record is cut
// off at the next open, and the log goes on from there.
func TestJournalCutsTornTail(t *testing.T) {
	tails := map[string]func(lastGroup []byte) []byte{
		"torn record":  func(g []byte) []byte { return g[:len(g)-3] },
		"header only":  func(g []byte) []byte { return g[:5] },
		"zeros":        func([]byte) []byte { return make([]byte, 4096) },
		"garbage":      func([]byte) []byte { return randomBytes(10 << 10) },
		"bad checksum": func(g []byte) []byte { b := bytes.Clone(g); b[len(b)-1] ^= 0xff; return b },
		// The disk kept a later page of the group but not an earlier one; the lost
		// append's payload carries a whole copy of the journal's first group.
		"zeroed start": func(g []byte) []byte { b := bytes.Clone(g); clear(b[:64]); return b },
	}
	for name, tail := range tails {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s := openJournal(t, dir)
			mustAppend(t, s, "a", callEvent("c1", "read", `{}`), resultEvent("c1", 1, false))
			mustAppend(t, s, "b", messageEvent("kept", 0))
			closeOrFail(t, s)
			good := journalSize(t, dir)
			want := map[string][]session.Event{}

			first, err := os.ReadFile(filepath.Join(dir, session.JournalFileName))
			if err != nil {
				t.Fatal(err)
			}
			s = openJournal(t, dir)
			want["a"], want["b"] = readAll(t, s, "a"), readAll(t, s, "b")
			mustAppend(t, s, "a", messageEvent("lost "+string(first[20:]), 0))
			closeOrFail(t, s)
			path := filepath.Join(dir, session.JournalFileName)
			all, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			damaged := append(all[:good:good], tail(all[good:])...)
			if err := os.WriteFile(path, damaged, 0o600); err != nil {
				t.Fatal(err)
			}

			r := openJournal(t, dir)
			for id, evs := range want {
				if diff := cmp.Diff(evs, readAll(t, r, id)); diff != "" {
					t.Errorf("Read(%s) after cutting the tail (-want +got):\n%s", id, diff)
				}
			}
			if got := journalSize(t, dir); got != good {
				t.Errorf("journal size = %d, want %d (cut back to the last whole record)", got, good)
			}
			if got := mustAppend(t, r, "a", messageEvent("next", 0)); got[0].Seq != 3 {
				t.Errorf("Append(a) after the cut seq = %d, want 3", got[0].Seq)
			}
			closeOrFail(t, r)
			if got := len(readAll(t, openJournal(t, dir), "a")); got != 3 {
				t.Errorf("Read(a) after reopening = %d events, want 3", got)
			}
		})
	}
}

// Damage that a whole record follows is not a torn write: Open refuses the file.
func TestJournalCorruptFile(t *testing.T) {
	dir := t.TempDir()
	s := openJournal(t, dir)
	for i := range 4 {
		mustAppend(t, s, "s", messageEvent(fmt.Sprintf("event %d", i), 0))
	}
	closeOrFail(t, s)
	valid, err := os.ReadFile(filepath.Join(dir, session.JournalFileName))
	if err != nil {
		t.Fatal(err)
	}
	const header = 20                   // the magic, the file id and its checksum
	recLen := (len(valid) - header) / 4 // four records of the same size
	tests := map[string]func() []byte{
		"tiny":       func() []byte { return []byte("not a journal") },
		"bad header": func() []byte { b := bytes.Clone(valid); b[0] = 'X'; return b },
		"random":     func() []byte { return randomBytes(64 << 10) },
		"flipped byte in an early record": func() []byte {
			b := bytes.Clone(valid)
			b[header+recLen+20] ^= 0x40
			return b
		},
		"duplicated record": func() []byte {
			return append(bytes.Clone(valid), valid[header:header+recLen]...)
		},
		"bbolt file": func() []byte { return foreignDB(t) },
	}
	for name, content := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, session.JournalFileName), content(), 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := session.OpenJournal(dir)
			if err == nil {
				_ = s.Close()
				t.Fatal("OpenJournal() = nil error, want ErrCorrupt")
			}
			t.Logf("OpenJournal() = %v", err)
			if !errors.Is(err, session.ErrCorrupt) || !strings.HasPrefix(err.Error(), "session: ") {
				t.Errorf("OpenJournal() = %v, want ErrCorrupt with the package prefix", err)
			}
		})
	}
}

// A journal a crash left shorter than its header (created, header not yet durable)
// opens as an empty journal.
func TestJournalShortFileIsEmpty(t *testing.T) {
	for _, n := range []int{0, 3} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, session.JournalFileName), []byte("TOOLSDJ")[:n], 0o600); err != nil {
			t.Fatal(err)
		}
		s := openJournal(t, dir)
		if got := mustAppend(t, s, "a", messageEvent("m", 0)); got[0].Seq != 1 {
			t.Errorf("%d-byte file: Append() seq = %d, want 1", n, got[0].Seq)
		}
		closeOrFail(t, s)
		if got := len(readAll(t, openJournal(t, dir), "a")); got != 1 {
			t.Errorf("%d-byte file: Read(a) after reopen = %d events, want 1", n, got)
		}
	}
}

// Sessions deleted by retention stay deleted after a restart; rewriting the journal
// keeps exactly the live sessions, and appends go on in the new file.
func TestJournalRetentionAndCompaction(t *testing.T) {
	clock := newClock()
	dir := t.TempDir()
	opts := []session.Option{
		session.WithClock(clock.Now), session.WithRetention(0, 2), session.WithSweepInterval(0),
		session.WithCompactBytes(8 << 10), session.WithLogger(zaptest.NewLogger(t)),
	}
	s := openJournal(t, dir, opts...)
	big := strings.Repeat("x", 1000)
	for i := range 30 {
		id := fmt.Sprintf("s%02d", i)
		mustAppend(t, s, id, messageEvent(big, 0), messageEvent(big, 0))
		clock.Set(clock.Now().Add(time.Second))
	}
	owner := session.Owner{Identity: "alice", Scope: "a", ScopeKnown: true}
	if _, err := s.ClaimOwner(t.Context(), "s29", owner); err != nil {
		t.Fatal(err)
	}
	// s28 has an open call: retention keeps it beyond the limit.
	mustAppend(t, s, "s28", callEvent("c", "slow", `{}`))
	before := journalSize(t, dir)
	removed, err := s.Sweep(clock.Now())
	if err != nil || removed != 28 {
		t.Fatalf("Sweep() = %d, %v, want 28 removed", removed, err)
	}
	want := map[string][]session.Event{"s28": readAll(t, s, "s28"), "s29": readAll(t, s, "s29")}
	// The sweep starts a rewrite beside the writer.
	deadline := time.Now().Add(10 * time.Second)
	for journalSize(t, dir) >= before/4 {
		if time.Now().After(deadline) {
			t.Fatalf("journal is %d bytes 10s after deleting 28 of 30 sessions (was %d), want it rewritten", journalSize(t, dir), before)
		}
		time.Sleep(time.Millisecond)
	}
	next := mustAppend(t, s, "s29", messageEvent("after the rewrite", 0))
	want["s29"] = append(want["s29"], next...)
	closeOrFail(t, s)

	r := openJournal(t, dir, opts...)
	for i := range 28 {
		if got := readAll(t, r, fmt.Sprintf("s%02d", i)); len(got) != 0 {
			t.Errorf("session s%02d has %d events after restart, want it deleted", i, len(got))
		}
	}
	if diff := cmp.Diff(want["s29"], readAll(t, r, "s29")); diff != "" {
		t.Errorf("Read(s29) after restart (-want +got):\n%s", diff)
	}
	got := readAll(t, r, "s28") // and the recovered result of its open call
	if len(got) != len(want["s28"])+1 || !got[len(got)-1].Result.Recovered {
		t.Fatalf("Read(s28) after restart = %d events, want %d and a recovered result", len(got), len(want["s28"])+1)
	}
	if diff := cmp.Diff(want["s28"], got[:len(want["s28"])]); diff != "" {
		t.Errorf("Read(s28) after restart (-want +got):\n%s", diff)
	}
	if got, ok, err := r.Owner(t.Context(), "s29"); !ok || err != nil || got != owner {
		t.Errorf("Owner(s29) after restart = %+v, %v, %v, want %+v", got, ok, err, owner)
	}
	if n := r.Recovered(); n != 1 {
		t.Errorf("Recovered() = %d, want 1 (s28's open call)", n)
	}
}

// One append is one record, whose length must fit its header.
func TestJournalRefusesOversizedAppend(t *testing.T) {
	s := openJournal(t, t.TempDir())
	events := make([]session.Event, 40)
	big := strings.Repeat("x", 15<<20)
	for i := range events {
		events[i] = messageEvent(big, 0)
	}
	if _, err := s.Append(t.Context(), "big", events...); !errors.Is(err, session.ErrTooLarge) {
		t.Errorf("Append(600 MiB) = %v, want ErrTooLarge", err)
	}
	if got := readAll(t, s, "big"); len(got) != 0 {
		t.Errorf("Read(big) = %d events after the refused append, want 0", len(got))
	}
}

// A cold page decodes the events it returns, not every event of the appends that hold
// them: a page of two from an append of 128 calls allocates as a page of two from an
// append of two does.
func TestJournalColdPageDecodesOnlyItsEvents(t *testing.T) {
	s := openColdJournal(t, t.TempDir())
	ctx := t.Context()
	plan := func(n int) []session.Event {
		evs := make([]session.Event, n)
		for i := range evs {
			evs[i] = session.Event{Type: session.TypeToolCall, BatchID: "b", SourceSeqs: []uint64{1},
				Call: &session.CallRecord{CallID: fmt.Sprint("c", i), Name: "grep", Arguments: `{"q":"x"}`}}
		}
		return evs
	}
	if _, err := s.Append(ctx, "big", plan(128)...); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, "small", plan(2)...); err != nil {
		t.Fatal(err)
	}
	allocs := func(id string, from uint64) float64 {
		return testing.AllocsPerRun(10, func() {
			if got, err := s.Read(ctx, id, from, 2); err != nil || len(got) != 2 || got[0].Seq != from {
				t.Fatalf("Read(%s, %d, 2) = %d events, %v", id, from, len(got), err)
			}
		})
	}
	small := allocs("small", 1)
	for _, from := range []uint64{1, 64, 127} {
		if big := allocs("big", from); big > small+4 {
			t.Errorf("a cold page of 2 from seq %d of one append of 128 made %.0f allocations, one of an append of 2 made %.0f",
				from, big, small)
		}
	}
}

// A cold page reads, and checks, the whole append record that holds it but allocates
// only for the events it returns: a page of 2 calls of 64 KiB from an append of 128 (an
// 8 MiB record) costs far less than the record.
func TestJournalColdPageAllocatesOnlyItsEvents(t *testing.T) {
	s := openColdJournal(t, t.TempDir())
	ctx := t.Context()
	if _, err := s.Append(ctx, "plan", bigPlan(128)...); err != nil {
		t.Fatal(err)
	}
	for _, from := range []uint64{1, 64, 127} {
		var least uint64 = math.MaxUint64 // of a few reads: the runtime allocates too
		for range 3 {
			got, alloc, err := readAllocs(t, s, "plan", from, 2)
			if err != nil || len(got) != 2 || got[0].Seq != from {
				t.Fatalf("Read(plan, %d, 2) = %d events, %v", from, len(got), err)
			}
			least = min(least, alloc)
		}
		if least >= 1<<20 {
			t.Errorf("a cold page of 2 calls of 64 KiB from seq %d of an 8 MiB append allocated %d KiB, want under 1 MiB",
				from, least>>10)
		}
	}
}

// readAllocs reads a page of s and returns it and the bytes allocated meanwhile.
func readAllocs(t *testing.T, s session.Store, id string, from uint64, limit int) ([]session.Event, uint64, error) {
	t.Helper()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	got, err := s.Read(t.Context(), id, from, limit)
	runtime.ReadMemStats(&after)
	return got, after.TotalAlloc - before.TotalAlloc, err
}

// bigPlan returns n calls of 64 KiB arguments each, every one unique (its call id
// leads its arguments), and all of one size.
// openColdJournal opens the journal in dir, unsynced, with every session cold at once
// (read back from the file), and closes it when t ends.
func openColdJournal(t *testing.T, dir string) *session.Journal {
	t.Helper()
	s, err := session.OpenJournal(dir, session.WithDurability(session.SyncNone), session.WithHotFor(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeOrFail(t, s) })
	return s
}

func bigPlan(n int) []session.Event {
	evs := make([]session.Event, n)
	for i := range evs {
		args := fmt.Sprintf(`"arg%04d %s"`, i, strings.Repeat("x", 64<<10))
		evs[i] = session.Event{Type: session.TypeToolCall,
			Call: &session.CallRecord{CallID: fmt.Sprintf("c%04d", i), Name: "write", Arguments: args}}
	}
	return evs
}

// The checksum of an append record covers all its events: damage to an event a cold page
// does not return still fails the page, and a damaged length fails it without
// allocating what the length claims.
func TestJournalColdPageChecksWholeRecord(t *testing.T) {
	damage := map[string]func(file []byte, argsEnd int){
		"flipped byte":  func(file []byte, argsEnd int) { file[argsEnd-100] ^= 0x20 },
		"huge length":   func(file []byte, argsEnd int) { copy(file[argsEnd:], "\xff\xff\xff\xf0") },
		"longer length": func(file []byte, argsEnd int) { file[argsEnd+1]++ }, // by 64 KiB
	}
	for name, hurt := range damage {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := session.OpenJournal(dir, session.WithDurability(session.SyncNone), session.WithHotFor(-1))
			if err != nil {
				t.Fatal(err)
			}
			defer closeOrFail(t, s)
			ctx := t.Context()
			if _, err := s.Append(ctx, "plan", bigPlan(128)...); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, session.JournalFileName)
			file, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			// Event 100's arguments end where event 101's length starts.
			args := bigPlan(128)[99].Call.Arguments
			at := bytes.Index(file, []byte(args))
			if at < 0 {
				t.Fatal("event 100's arguments are not in the journal file")
			}
			hurt(file, at+len(args))
			f, err := os.OpenFile(path, os.O_WRONLY, 0) // the open journal's own file
			if err != nil {
				t.Fatal(err)
			}
			_, err = f.WriteAt(file, 0)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, from := range []uint64{1, 101, 127} { // 101 is the event after the damage
				got, alloc, err := readAllocs(t, s, "plan", from, 2)
				if !errors.Is(err, session.ErrCorrupt) {
					t.Errorf("Read(plan, %d, 2) = %d events, %v, want ErrCorrupt", from, len(got), err)
				}
				if alloc >= 1<<20 {
					t.Errorf("Read(plan, %d, 2) of a damaged 8 MiB append allocated %d KiB, want under 1 MiB", from, alloc>>10)
				}
			}
		})
	}
}
