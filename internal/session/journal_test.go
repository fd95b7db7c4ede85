package session

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// A failed write stops the journal: the failing append and every later change report
// it, nothing half-written is applied, and reads go on.
func TestJournalStopsAfterFailedWrite(t *testing.T) {
	dir := t.TempDir()
	j, err := OpenJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Append(t.Context(), "s", msg("kept")); err != nil {
		t.Fatal(err)
	}
	checkRunning(t, j)
	// The writer is idle between groups; a closed descriptor fails its next write as a
	// full disk or an I/O error would.
	if err := j.f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Append(t.Context(), "s", msg("lost")); err == nil || !strings.Contains(err.Error(), "write the journal") {
		t.Errorf("Append() after a failed write = %v, want the write error", err)
	}
	checkStopped(t, j, "write the journal")
	if _, err := j.Append(t.Context(), "s", msg("later")); err == nil || !strings.Contains(err.Error(), "stopped") {
		t.Errorf("later Append() = %v, want the journal stopped", err)
	}
	if _, err := j.ClaimOwner(t.Context(), "s", Owner{Identity: "a"}); err == nil {
		t.Error("ClaimOwner() after a failed write = nil error")
	}
	got, err := j.Read(t.Context(), "s", 1, 0)
	if err != nil || len(got) != 1 || got[0].Message.Content != "kept" {
		t.Errorf("Read() after a failed write = %v, %v, want only the kept event", got, err)
	}
	if err := j.Close(); err == nil {
		t.Error("Close() = nil, want the close error of the already-closed file")
	}
	r, err := OpenJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore(t, r)
	if got, _ := r.Read(t.Context(), "s", 1, 0); len(got) != 1 {
		t.Errorf("Read() after restart = %d events, want 1", len(got))
	}
}

// TestJournalFailedWriteIsErrStopped: the change whose own write fails (an append, an
// owner claim, a deletion) fails with ErrStopped, as every later change does and as
// bbolt's failing commit does: toolsd answers it UNAVAILABLE (SESSION_STORE_STOPPED).
// It failed with the bare write error, which toolsd answered INTERNAL.
func TestJournalFailedWriteIsErrStopped(t *testing.T) {
	for name, change := range map[string]func(*Journal) error{
		"append": func(j *Journal) error { _, err := j.Append(t.Context(), "s", msg("lost")); return err },
		"claim":  func(j *Journal) error { _, err := j.ClaimOwner(t.Context(), "t", Owner{Identity: "a"}); return err },
		"delete": func(j *Journal) error { _, err := j.Delete(t.Context(), "s", nil, nil); return err },
	} {
		t.Run(name, func(t *testing.T) {
			j, err := OpenJournal(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = j.Close() }() // the close error of the already-closed file
			if _, err := j.Append(t.Context(), "s", msg("kept")); err != nil {
				t.Fatal(err)
			}
			// A closed descriptor fails the next write as a full disk would.
			if err := j.f.Close(); err != nil {
				t.Fatal(err)
			}
			if err := change(j); !errors.Is(err, ErrStopped) || !strings.Contains(err.Error(), "write the journal") {
				t.Errorf("%s whose write failed = %v, want ErrStopped and the write error", name, err)
			}
		})
	}
}

// checkRunning fails t if s says it stopped.
func checkRunning(t *testing.T, s Stopper) {
	t.Helper()
	select {
	case <-s.Stopped():
		t.Errorf("Stopped() is closed before any failure (StopCause() = %v)", s.StopCause())
	default:
	}
	if err := s.StopCause(); err != nil {
		t.Errorf("StopCause() before any failure = %v, want nil", err)
	}
}

// checkStopped fails t unless s says it stopped, for a cause that wraps ErrStopped and
// mentions cause: toolsd's readiness watches this, with no request to fail.
func checkStopped(t *testing.T, s Stopper, cause string) {
	t.Helper()
	select {
	case <-s.Stopped():
	default:
		t.Error("Stopped() is not closed after the store stopped")
	}
	if err := s.StopCause(); !errors.Is(err, ErrStopped) || !strings.Contains(err.Error(), cause) {
		t.Errorf("StopCause() = %v, want ErrStopped and %q", err, cause)
	}
}

// Arbitrary bytes after a valid header either open (as a journal whose torn tail was
// cut) or fail with ErrCorrupt; they never panic, and an opened journal takes appends.
func FuzzJournalOpen(f *testing.F) {
	for _, v2 := range []bool{false, true} {
		seed := t0Journal(fuzzSeed(v2))
		f.Add(v2, seed)
		f.Add(v2, seed[:len(seed)-1])
		f.Add(v2, []byte{0, 0, 0, 1, 0, 0, 0, 0, 1})
	}
	f.Fuzz(func(t *testing.T, v2 bool, records []byte) {
		dir := t.TempDir()
		content := append([]byte(journalMagicV1), records...) // groups checksummed alone
		if v2 {
			content = append(fuzzHeader(), records...) // groups checksummed from the header's
		}
		if err := os.WriteFile(filepath.Join(dir, JournalFileName), content, 0o600); err != nil {
			t.Fatal(err)
		}
		j, err := OpenJournal(dir)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("OpenJournal() = %v, want nil or ErrCorrupt", err)
			}
			return
		}
		defer closeStore(t, j)
		if _, err := j.Append(t.Context(), "fuzz", msg("after")); err != nil {
			t.Fatalf("Append() on an opened journal = %v", err)
		}
	})
}

// TestJournalFuzzSeedsOpen checks that the fuzzer starts from journals that open, in
// both formats: else it would explore only the refusal of a bad first group.
func TestJournalFuzzSeedsOpen(t *testing.T) {
	for _, v2 := range []bool{false, true} {
		dir := t.TempDir()
		head := []byte(journalMagicV1)
		if v2 {
			head = fuzzHeader()
		}
		content := append(head, t0Journal(fuzzSeed(v2))...)
		if err := os.WriteFile(filepath.Join(dir, JournalFileName), content, 0o600); err != nil {
			t.Fatal(err)
		}
		j, err := OpenJournal(dir)
		if err != nil {
			t.Fatalf("v2=%v: OpenJournal() = %v", v2, err)
		}
		// The seed's call and the result its open call is given at the open.
		got, err := j.Read(t.Context(), "s", 0, 0)
		if err != nil || len(got) != 2 || got[0].Call == nil || got[0].Call.CallID != "1" || got[1].Result == nil {
			t.Errorf("v2=%v: Read(s) = %+v, %v; want the call and its recovered result", v2, got, err)
		}
		if got, err := j.Read(t.Context(), "t", 0, 0); err != nil || len(got) != 0 {
			t.Errorf("v2=%v: Read(t) = %+v, %v; want nothing (deleted)", v2, got, err)
		}
		closeStore(t, j)
	}
}

// fuzzHeader is a current-format journal header with a fixed file id, so that the
// fuzzer's seed groups can be sealed with its checksum seed.
func fuzzHeader() []byte {
	h := append([]byte(journalMagic), "fuzzfile"...)
	return binary.BigEndian.AppendUint32(h, crcOf(h))
}

// fuzzSeed is the group checksum seed of the fuzzed file's format.
func fuzzSeed(v2 bool) uint32 {
	if !v2 {
		return 0
	}
	seed, ok := headerSeed(fuzzHeader())
	if !ok {
		panic("fuzzHeader does not match its checksum")
	}
	return seed
}

// t0Journal returns the groups of a small journal with every kind of record, sealed
// for a file whose group checksums start from seed.
func t0Journal(seed uint32) []byte {
	b := beginGroup(nil, 1)
	call := Event{Type: TypeToolCall, Call: &CallRecord{CallID: "1", Name: "n", Arguments: `{}`}, Seq: 1}
	b = appendStoredEvents(b, "s", []Event{call})
	b = appendOwnerRecord(b, "s", Owner{Identity: "id", Scope: "x", ScopeKnown: true}, time.Unix(1, 0))
	sealGroup(b, seed)
	second := len(b)
	b = beginGroup(b, 2)
	b = appendStoredEvents(b, "t", []Event{{Type: TypeUserMessage, Message: &MessageRecord{Content: "m"}, Seq: 1}})
	b = appendDeleteRecord(b, "t")
	sealGroup(b[second:], seed)
	return b
}

// A rewrite runs beside the writer: appends, a new session, an owner claim and a
// deletion committed while the snapshot is being written all survive in the new file,
// and the deleted sessions stay deleted.
func TestJournalRewriteBesideAppends(t *testing.T) {
	for name, hot := range map[string]time.Duration{"hot": time.Hour, "cold": -1} {
		t.Run(name, func(t *testing.T) { testRewriteBesideAppends(t, hot) })
	}
}

func testRewriteBesideAppends(t *testing.T, hot time.Duration) {
	clock := tickingClock()
	dir := t.TempDir()
	opts := []Option{WithCompactBytes(4 << 10), WithRetention(0, 3), WithSweepInterval(0), WithClock(clock), WithHotFor(hot)}
	j, err := OpenJournal(dir, opts...)
	if err != nil {
		t.Fatal(err)
	}
	entered, hold, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	j.snapshotting = func() { close(entered); <-hold }
	j.rewritten = func() { close(done) }
	ctx := t.Context()
	big := strings.Repeat("x", 2000)
	for i := range 20 {
		if _, err := j.Append(ctx, fmt.Sprintf("s%02d", i), msg(big), msg(big)); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := j.Sweep(clock()); err != nil || n != 17 {
		t.Fatalf("Sweep() = %d, %v, want 17", n, err)
	}
	<-entered // the snapshot is taken; its file is not written yet
	if _, err := j.Append(ctx, "s19", msg("during the rewrite")); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Append(ctx, "new", msg("born during the rewrite")); err != nil {
		t.Fatal(err)
	}
	if _, err := j.ClaimOwner(ctx, "new", Owner{Identity: "alice"}); err != nil {
		t.Fatal(err)
	}
	if n, err := j.Sweep(clock()); err != nil || n != 1 { // s17, the oldest of four
		t.Fatalf("second Sweep() = %d, %v, want 1", n, err)
	}
	before, _ := os.Stat(filepath.Join(dir, JournalFileName))
	close(hold)
	<-done
	after, _ := os.Stat(filepath.Join(dir, JournalFileName))
	if after.Size() >= before.Size()/3 {
		t.Errorf("journal is %d bytes after the rewrite (was %d), want it smaller", after.Size(), before.Size())
	}
	if _, err := j.Append(ctx, "new", msg("after the rewrite")); err != nil {
		t.Fatal(err)
	}
	ids := []string{"s16", "s17", "s18", "s19", "new"}
	want := map[string][]Event{}
	for _, id := range ids {
		if want[id], err = j.Read(ctx, id, 1, 0); err != nil {
			t.Fatal(err)
		}
	}
	if len(want["s16"]) != 0 || len(want["s17"]) != 0 || len(want["s19"]) != 3 || len(want["new"]) != 2 {
		t.Fatalf("before restart: s16 %d, s17 %d, s19 %d, new %d events, want 0, 0, 3, 2",
			len(want["s16"]), len(want["s17"]), len(want["s19"]), len(want["new"]))
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := OpenJournal(dir, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore(t, r)
	for _, id := range ids {
		got, err := r.Read(ctx, id, 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want[id], got); diff != "" {
			t.Errorf("Read(%s) after restart (-before +after):\n%s", id, diff)
		}
	}
	if o, ok, _ := r.Owner(ctx, "new"); !ok || o.Identity != "alice" {
		t.Errorf("Owner(new) after restart = %+v, %v, want alice", o, ok)
	}
}

// Close during a rewrite stops it and leaves the journal whole.
func TestJournalCloseDuringRewrite(t *testing.T) {
	dir := t.TempDir()
	opts := []Option{WithCompactBytes(4 << 10), WithRetention(0, 1), WithSweepInterval(0)}
	j, err := OpenJournal(dir, opts...)
	if err != nil {
		t.Fatal(err)
	}
	entered, hold := make(chan struct{}), make(chan struct{})
	j.snapshotting = func() { close(entered); <-hold }
	for i := range 10 {
		if _, err := j.Append(t.Context(), fmt.Sprintf("s%d", i), msg(strings.Repeat("y", 1000))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := j.Sweep(time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	<-entered
	closed := make(chan error, 1)
	go func() { closed <- j.Close() }()
	waitFor(t, "Close to start", j.closed.Load)
	close(hold)
	if err := <-closed; err != nil {
		t.Fatalf("Close() = %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, JournalFileName+compactSuffix)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the rewrite's file is left behind: %v", err)
	}
	r, err := OpenJournal(dir, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore(t, r)
	n := 0
	for i := range 10 {
		got, _ := r.Read(t.Context(), fmt.Sprintf("s%d", i), 1, 0)
		n += len(got)
	}
	if n != 1 {
		t.Errorf("%d events after restart, want 1 (the session retention kept)", n)
	}
}

// A session idle for the hot period is evicted: its events leave memory; a read pages
// them from the file, a watch brings them back, an append only counts.
func TestJournalEvictsIdleSessions(t *testing.T) {
	var (
		mu  sync.Mutex
		now = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	)
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}
	j, err := OpenJournal(t.TempDir(), WithClock(clock), WithHotFor(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore(t, j)
	ctx := t.Context()
	call := Event{Type: TypeToolCall, Call: &CallRecord{CallID: "c", Name: "grep", Arguments: `{"q":1}`}}
	stored, err := j.Append(ctx, "idle", call, msg("one"))
	if err != nil {
		t.Fatal(err)
	}
	res := Event{Type: TypeToolResult, SourceSeqs: []uint64{stored[0].Seq}, Result: &ResultRecord{CallID: "c", Content: "found"}}
	if _, err := j.Append(ctx, "idle", res); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Append(ctx, "busy", msg("recent")); err != nil {
		t.Fatal(err)
	}
	want, _ := j.Read(ctx, "idle", 1, 0)
	cold := func(id string) bool {
		s := j.mem.sessions.get(id)
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.events.cold
	}
	if n := j.Evict(clock().Add(30 * time.Second)); n != 0 {
		t.Errorf("Evict() within the hot period = %d, want 0", n)
	}
	mu.Lock()
	now = now.Add(time.Hour)
	mu.Unlock()
	if _, err := j.Append(ctx, "busy", msg("now")); err != nil {
		t.Fatal(err)
	}
	if n := j.Evict(clock()); n != 1 || !cold("idle") || cold("busy") {
		t.Fatalf("Evict() = %d, idle cold %v, busy cold %v; want 1, true, false", n, cold("idle"), cold("busy"))
	}
	sum, err := j.Summary(ctx, "idle")
	if err != nil || !sum.Succeeded("grep") {
		t.Errorf("Summary(idle) of a cold session: Succeeded(grep) false, %v", err)
	}
	// An append to a cold session leaves it cold, and so does a read.
	if got, err := j.Append(ctx, "idle", msg("later")); err != nil || got[0].Seq != 4 || !cold("idle") {
		t.Fatalf("Append(idle) while cold = %v, %v, cold %v; want seq 4 and still cold", got, err, cold("idle"))
	}
	got, err := j.Read(ctx, "idle", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got[:3]); diff != "" || len(got) != 4 || !cold("idle") {
		t.Errorf("Read(idle) of a cold session (-before +after):\n%s\n%d events, cold %v", diff, len(got), cold("idle"))
	}
	if page, err := j.Read(ctx, "idle", 2, 2); err != nil || len(page) != 2 || page[0].Seq != 2 || page[1].Seq != 3 {
		t.Errorf("Read(idle, from 2, limit 2) of a cold session = %v, %v, want seqs 2 and 3", page, err)
	}
	// A watch brings the events back, and a watched session is not evicted.
	j.Evict(clock().Add(time.Hour)) // busy too
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	seen := make(chan uint64, 8)
	go func() {
		_ = j.Watch(wctx, "idle", 1, func(ev Event) error { seen <- ev.Seq; return nil })
	}()
	for want := uint64(1); want <= 4; want++ {
		if got := <-seen; got != want {
			t.Fatalf("Watch() delivered seq %d, want %d", got, want)
		}
	}
	if n := j.Evict(clock().Add(2 * time.Hour)); n != 0 || cold("idle") {
		t.Errorf("Evict() of a watched session = %d, cold %v; want 0, false", n, cold("idle"))
	}
}

// A cold session keeps none of its records in memory after a restart: not through its
// id, its open calls or its tool summary.
func TestJournalReplayKeepsNoRecords(t *testing.T) {
	dir := t.TempDir()
	ctx := t.Context()
	j, err := OpenJournal(dir, WithDurability(SyncNone))
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 1<<20)
	for i := range 20 {
		id := fmt.Sprintf("s%d", i)
		call := Event{Type: TypeToolCall, Call: &CallRecord{CallID: "c", Name: "grep", Arguments: `"` + big + `"`}}
		open := Event{Type: TypeToolCall, Call: &CallRecord{CallID: "d", Name: "slow", Arguments: `{}`}}
		if _, err := j.Append(ctx, id, msg(big), call, open); err != nil {
			t.Fatal(err)
		}
		// A second result for c cites a closed call: its name comes back from the file.
		res := Event{Type: TypeToolResult, SourceSeqs: []uint64{2}, Result: &ResultRecord{CallID: "c", Content: "ok"}}
		if _, err := j.Append(ctx, id, res, res); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	before := liveHeap()
	r, err := OpenJournal(dir, WithDurability(SyncNone), WithHotFor(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore(t, r)
	grown := int64(liveHeap()) - int64(before)
	if grown > 8<<20 { // 40 MiB of payload were replayed
		t.Errorf("the heap grew by %d MiB replaying 20 cold sessions of 2 MiB each, want a few hundred KiB", grown>>20)
	}
	sum, err := r.Summary(ctx, "s3")
	if err != nil || !sum.Succeeded("grep") || !sum.Called("slow") {
		t.Errorf("Summary(s3) after restart: Succeeded(grep) %v, Called(slow) %v, %v", sum.Succeeded("grep"), sum.Called("slow"), err)
	}
	runtime.KeepAlive(r)
}

func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// A read that looked a session up before retention deleted it and a rewrite closed the
// file it was in reads nothing, not the closed file.
func TestJournalReadOfDeletedSession(t *testing.T) {
	clock := tickingClock()
	j, err := OpenJournal(t.TempDir(), WithClock(clock), WithCompactBytes(1024), WithRetention(0, 1),
		WithSweepInterval(0), WithHotFor(-1), WithDurability(SyncNone))
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore(t, j)
	done := make(chan struct{}, 1)
	j.rewritten = func() { done <- struct{}{} }
	ctx := t.Context()
	if _, err := j.Append(ctx, "old", msg(strings.Repeat("x", 4096))); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Append(ctx, "new", msg("a")); err != nil {
		t.Fatal(err)
	}
	s := j.mem.sessions.get("old") // what Read looked up
	if n, err := j.Sweep(clock()); err != nil || n != 1 {
		t.Fatalf("Sweep() = %d, %v, want 1", n, err)
	}
	<-done
	if got, err := j.mem.read(s, 1, 0); err != nil || len(got) != 0 {
		t.Errorf("read(deleted session) = %v, %v, want nothing", got, err)
	}
}

// tickingClock is a clock that moves on a second at every reading.
func tickingClock() func() time.Time {
	var (
		mu  sync.Mutex
		now = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	)
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(time.Second)
		return now
	}
}

// journalObs records what a Journal reports to a JournalObserver.
type journalObs struct {
	nopObserver
	mu       sync.Mutex
	bytes    int64
	rewrites int
}

func (o *journalObs) JournalBytes(n int64) { o.mu.Lock(); o.bytes = n; o.mu.Unlock() }

func (o *journalObs) JournalRewritten(time.Duration) { o.mu.Lock(); o.rewrites++; o.mu.Unlock() }

func (o *journalObs) get() (int64, int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.bytes, o.rewrites
}

// The journal reports its file's length after every commit and each rewrite.
func TestJournalReportsFileAndRewrites(t *testing.T) {
	dir := t.TempDir()
	obs := &journalObs{}
	j, err := OpenJournal(dir, WithObserver(obs), WithClock(tickingClock()), WithCompactBytes(4<<10),
		WithRetention(0, 1), WithSweepInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore(t, j)
	size := func() int64 {
		st, err := os.Stat(filepath.Join(dir, JournalFileName))
		if err != nil {
			t.Fatal(err)
		}
		return st.Size()
	}
	if b, _ := obs.get(); b != size() {
		t.Errorf("reported %d bytes at open, file has %d", b, size())
	}
	done := make(chan struct{}, 1)
	j.rewritten = func() { done <- struct{}{} }
	for i := range 8 {
		if _, err := j.Append(t.Context(), fmt.Sprintf("s%d", i), msg(strings.Repeat("z", 1000))); err != nil {
			t.Fatal(err)
		}
	}
	if b, _ := obs.get(); b != size() {
		t.Errorf("reported %d bytes after appends, file has %d", b, size())
	}
	if _, err := j.Sweep(time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	<-done
	if b, n := obs.get(); b != size() || n != 1 {
		t.Errorf("after a rewrite: reported %d bytes and %d rewrites, file has %d, want 1 rewrite", b, n, size())
	}
}

// With no hot period (hot_for 0), a session a watch loads back into memory is made cold
// again when the watch ends: there is no periodic eviction to do it later.
func TestJournalWatchLeavesNoHotSession(t *testing.T) {
	j, err := OpenJournal(t.TempDir(), WithDurability(SyncNone), WithHotFor(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore(t, j)
	ctx := context.Background()
	for i := range 5 {
		if _, err := j.Append(ctx, fmt.Sprint("s", i), Event{Type: TypeUserMessage, Message: &MessageRecord{Content: "hello"}}); err != nil {
			t.Fatal(err)
		}
	}
	stop := errors.New("stop")
	for i := range 5 {
		if err := j.Watch(ctx, fmt.Sprint("s", i), 1, func(Event) error { return stop }); !errors.Is(err, stop) {
			t.Fatalf("Watch(s%d) = %v, want the callback's error", i, err)
		}
	}
	j.mem.sessions.each(func(id string, s *memSession) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if !s.events.cold {
			t.Errorf("session %s keeps its events in memory after its watch ended", id)
		}
	})
}

// Owner records written before claims were timed still parse, with no claim time.
func TestUntimedOwnerRecordsParse(t *testing.T) {
	alice := Owner{Identity: "alice", Scope: "s", ScopeKnown: true}
	legacy, start := beginRecord(nil, recKindOwner, "x")
	legacy = append(appendString(appendString(legacy, alice.Identity), alice.Scope), 1)
	sealRecord(legacy[start:])
	if rec, err := decodeRecord(legacy[recHeaderLen:]); err != nil || rec.owner != alice || !rec.claimed.IsZero() {
		t.Errorf("decodeRecord(untimed owner) = %+v, %v, want alice with no claim time", rec, err)
	}
	v := ownerValue(alice, time.Unix(5, 0))
	if o, claimed, err := parseOwnerValue(v[:len(v)-8]); err != nil || o != alice || !claimed.IsZero() {
		t.Errorf("parseOwnerValue(untimed) = %+v, %v, %v, want alice with no claim time", o, claimed, err)
	}
	if o, claimed, err := parseOwnerValue(v); err != nil || o != alice || !claimed.Equal(time.Unix(5, 0)) {
		t.Errorf("parseOwnerValue(timed) = %+v, %v, %v, want alice claimed at 5s", o, claimed, err)
	}
}

// A watch that is tailing when a failed write stops the journal ends with ErrStopped
// once it has sent what was committed, as a bolt store's does: no commit would wake it
// again, and its client would take the session for idle while every append failed.
func TestJournalStopEndsLiveWatches(t *testing.T) {
	j, err := OpenJournal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = j.Close() }() // fails: the file was closed under the writer
	if _, err := j.Append(t.Context(), "s", msg("kept")); err != nil {
		t.Fatal(err)
	}
	got := make(chan Event, 16)
	done := make(chan error, 1)
	go func() {
		done <- j.Watch(t.Context(), "s", 1, func(ev Event) error { got <- ev; return nil })
	}()
	select {
	case ev := <-got:
		if ev.Message.Content != "kept" {
			t.Fatalf("Watch() sent %+v first, want the kept event", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Watch() replayed nothing within 10s")
	}
	if err := j.f.Close(); err != nil { // the next write fails, as on a full disk
		t.Fatal(err)
	}
	if _, err := j.Append(t.Context(), "s", msg("lost")); err == nil {
		t.Fatal("Append() after the journal's file closed = nil error")
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrStopped) {
			t.Errorf("live Watch() after the failed write = %v, want ErrStopped", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("live Watch() still running 10s after the journal stopped")
	}
	if len(got) != 0 {
		t.Errorf("Watch() sent %d events after the failed write, want none", len(got))
	}
}

// On replay, an owner record that does not take effect (the session has its owner) is
// dead data, as the writer, which never counts it, and a rewrite, which drops it, take
// it: counted live, repeated owner records kept the journal from being rewritten.
func TestJournalReplayCountsOnlyTheOwnerThatTakesEffect(t *testing.T) {
	dir := t.TempDir()
	alice, bob := Owner{Identity: "alice"}, Owner{Identity: "bob"}
	claimed := time.Unix(5, 0)
	head, seed := newJournalHeader()
	group := beginGroup(nil, 1)
	group = appendOwnerRecord(group, "s", alice, claimed)
	first := len(group) - groupHeadLen
	for range 200 { // past the compaction threshold below
		group = appendOwnerRecord(group, "s", bob, claimed)
	}
	sealGroup(group, seed)
	if err := os.WriteFile(filepath.Join(dir, JournalFileName), append(head, group...), 0o600); err != nil {
		t.Fatal(err)
	}

	j, err := OpenJournal(dir, WithCompactBytes(4<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore(t, j)
	if j.live != int64(first) {
		t.Fatalf("live bytes after replay = %d, want %d (alice's owner record alone)", j.live, first)
	}
	if o, ok, err := j.Owner(t.Context(), "s"); err != nil || !ok || o != alice {
		t.Errorf("Owner(s) = %+v, %v, %v, want alice, the first claim", o, ok, err)
	}
	done := make(chan struct{}, 1)
	j.rewritten = func() { done <- struct{}{} }
	if _, err := j.Append(t.Context(), "s", msg("after")); err != nil {
		t.Fatal(err)
	}
	<-done // the commit finds the journal mostly dead and rewrites it
}
