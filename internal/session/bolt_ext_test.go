package session_test

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	bolt "go.etcd.io/bbolt"

	"github.com/toolsd/toolsd/internal/session"
	"github.com/toolsd/toolsd/internal/tool"
)

func openBolt(t *testing.T, dir string, opts ...session.Option) durable {
	t.Helper()
	return durableKinds()["Bolt"].openT(t, dir, opts...)
}

// durable is a store that survives a restart.
type durable interface {
	session.Store
	session.Stopper
	Recovered() int
	Sweep(now time.Time) (int, error)
}

// durableKind opens one kind of durable store; file is its log file in the directory.
type durableKind struct {
	file string
	open func(dir string, opts ...session.Option) (durable, error)
}

func durableKinds() map[string]durableKind {
	return map[string]durableKind{
		"Bolt": {session.FileName, func(dir string, opts ...session.Option) (durable, error) {
			s, err := session.Open(dir, opts...)
			if err != nil {
				return nil, err
			}
			return s, nil
		}},
		"Journal": {session.JournalFileName, func(dir string, opts ...session.Option) (durable, error) {
			s, err := session.OpenJournal(dir, opts...)
			if err != nil {
				return nil, err
			}
			return s, nil
		}},
	}
}

func (k durableKind) openT(t *testing.T, dir string, opts ...session.Option) durable {
	t.Helper()
	s, err := k.open(dir, opts...)
	if err != nil {
		t.Fatalf("open(%s) = %v", dir, err)
	}
	t.Cleanup(func() { closeStore(t, s) })
	return s
}

func readAll(t *testing.T, s session.Store, id string) []session.Event {
	t.Helper()
	got, err := s.Read(t.Context(), id, 1, 1<<20)
	if err != nil {
		t.Fatalf("Read(%s) = %v", id, err)
	}
	return got
}

func TestDurableReopenKeepsEverything(t *testing.T) {
	for name, k := range durableKinds() {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s := k.openT(t, dir)
			c := mustAppend(t, s, "a", callEvent("c1", "read", `{"bad json`))
			mustAppend(t, s, "a", resultEvent("c1", c[0].Seq, false), messageEvent("ctx", 2))
			mustAppend(t, s, "b", callEvent("c9", "grep", `{}`), resultEvent("c9", 1, true))
			want := map[string][]session.Event{"a": readAll(t, s, "a"), "b": readAll(t, s, "b")}
			owner := session.Owner{Identity: "spiffe://t/agent", Scope: "a/b", ScopeKnown: true}
			if _, err := s.ClaimOwner(t.Context(), "a", owner); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatalf("Close() = %v", err)
			}

			s2 := k.openT(t, dir)
			if n := s2.Recovered(); n != 0 {
				t.Errorf("Recovered() = %d, want 0 after a clean close", n)
			}
			for id, evs := range want {
				if diff := cmp.Diff(evs, readAll(t, s2, id)); diff != "" {
					t.Errorf("Read(%s) after reopen (-before +after):\n%s", id, diff)
				}
			}
			if got, ok, err := s2.Owner(t.Context(), "a"); !ok || err != nil || got != owner {
				t.Errorf("Owner(a) after reopen = %+v, %v, %v, want %+v", got, ok, err, owner)
			}
			if got := mustAppend(t, s2, "a", messageEvent("next", 0)); got[0].Seq != 4 {
				t.Errorf("Append() after reopen seq = %d, want 4", got[0].Seq)
			}
			sum, err := s2.Summary(t.Context(), "a")
			if err != nil || !sum.Succeeded("read") {
				t.Errorf("Summary(a) after reopen: Succeeded(read) false, err %v", err)
			}
			sum, err = s2.Summary(t.Context(), "b")
			if err != nil || !sum.Called("grep") || sum.Succeeded("grep") {
				t.Errorf("Summary(b) after reopen = Called %v Succeeded %v, want true false", sum.Called("grep"), sum.Succeeded("grep"))
			}
		})
	}
}

// crashCopy copies a live store's file into a new directory, as a kill -9 would leave it
// (an Append that returned is in the file).
func crashCopy(t *testing.T, dir, file string) string {
	t.Helper()
	src, err := os.Open(filepath.Join(dir, file))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	out := t.TempDir()
	dst, err := os.Create(filepath.Join(out, file))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestDurableRecoversInterruptedCallsOnce(t *testing.T) {
	for name, k := range durableKinds() {
		t.Run(name, func(t *testing.T) {
			clock := newClock()
			dir := t.TempDir()
			s := k.openT(t, dir, session.WithClock(clock.Now))
			// Session a: c1 finished, c2 and c3 were running. Session b: c4 was running.
			calls := mustAppend(t, s, "a", callEvent("c1", "read", `{}`), callEvent("c2", "write", `{"x":`), callEvent("c3", "read", `{}`))
			mustAppend(t, s, "a", resultEvent("c1", calls[0].Seq, false))
			mustAppend(t, s, "b", messageEvent("m", 0), callEvent("c4", "shell", `{}`))
			mustAppend(t, s, "c", callEvent("c5", "t", `{}`), resultEvent("c5", 1, true))
			crashed := crashCopy(t, dir, k.file) // s is abandoned, not closed

			clock.Set(clock.Now().Add(time.Hour))
			r := k.openT(t, crashed, session.WithClock(clock.Now))
			if n := r.Recovered(); n != 3 {
				t.Fatalf("Recovered() = %d, want 3", n)
			}
			synthetic := func(callID, name string, callSeq, seq uint64, batch string) session.Event {
				return session.Event{
					SessionID: "", Seq: seq, Type: session.TypeToolResult, Time: clock.Now(), BatchID: batch,
					Turn: 1, Step: 2, SourceSeqs: []uint64{callSeq},
					Result: &session.ResultRecord{CallID: callID, Content: "Error: " + session.InterruptedMessage,
						IsError: true, Recovered: true,
						Error: &tool.Error{Code: tool.CodeAborted, Message: session.InterruptedMessage, Tool: name}},
				}
			}
			wantA := []session.Event{synthetic("c2", "write", 2, 5, "b1"), synthetic("c3", "read", 3, 6, "b1")}
			wantA[0].SessionID, wantA[1].SessionID = "a", "a"
			wantB := []session.Event{synthetic("c4", "shell", 2, 3, "b1")}
			wantB[0].SessionID = "b"
			check := func(s session.Store) {
				t.Helper()
				if diff := cmp.Diff(wantA, readAll(t, s, "a")[4:6]); diff != "" {
					t.Errorf("session a synthetic results (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(wantB, readAll(t, s, "b")[2:3]); diff != "" {
					t.Errorf("session b synthetic results (-want +got):\n%s", diff)
				}
				if got := len(readAll(t, s, "c")); got != 2 {
					t.Errorf("session c has %d events, want 2 (nothing was open)", got)
				}
			}
			check(r)
			sum, err := r.Summary(t.Context(), "a")
			if err != nil || sum.Succeeded("write") || !sum.Succeeded("read") {
				t.Errorf("Summary(a) after recovery: Succeeded(write)=%v Succeeded(read)=%v, %v", sum.Succeeded("write"), sum.Succeeded("read"), err)
			}
			// The recovered session goes on at the next seq; its calls are closed for good.
			if got := mustAppend(t, r, "a", messageEvent("after", 0)); got[0].Seq != 7 {
				t.Errorf("Append(a) after recovery seq = %d, want 7", got[0].Seq)
			}
			if err := r.Close(); err != nil {
				t.Fatalf("Close() = %v", err)
			}

			// Crash again right after recovery, then reopen twice: still one result per orphan.
			for range 2 {
				again := k.openT(t, crashed)
				if n := again.Recovered(); n != 0 {
					t.Errorf("Recovered() on reopen = %d, want 0", n)
				}
				check(again)
				if err := again.Close(); err != nil {
					t.Fatalf("Close() = %v", err)
				}
			}
		})
	}
}

func TestDurableRecoversAfterCrashMidBatch(t *testing.T) {
	for name, k := range durableKinds() {
		t.Run(name, func(t *testing.T) {
			// A batch logged all its calls, committed some results, then died.
			dir := t.TempDir()
			s := k.openT(t, dir)
			calls := mustAppend(t, s, "s", callEvent("1", "a", `{}`), callEvent("2", "b", `{}`), callEvent("3", "c", `{}`))
			mustAppend(t, s, "s", resultEvent("2", calls[1].Seq, false))
			crashed := crashCopy(t, dir, k.file)
			r := k.openT(t, crashed)
			evs := readAll(t, r, "s")
			var recovered []uint64
			for _, ev := range evs {
				if ev.Result != nil && ev.Result.Recovered {
					recovered = append(recovered, ev.SourceSeqs[0])
				}
			}
			if diff := cmp.Diff([]uint64{1, 3}, recovered); diff != "" {
				t.Errorf("recovered calls (-want +got):\n%s", diff)
			}
		})
	}
}

// The synthetic result that closes an interrupted call carries the call's id and tool
// name and a fixed message, so it can be larger than the call itself: a call near the
// event cap leaves an orphan whose result is over it. Recovery writes it all the same
// (the cap bounds what callers append, not what the store writes for itself); a store
// that refused it would refuse to open at every later start.
func TestDurableRecoversCallNearEventLimit(t *testing.T) {
	const limit = 1000
	for name, k := range durableKinds() {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s := k.openT(t, dir, session.WithMaxEventBytes(limit))
			call := callEvent("", "t", `{}`)
			call.BatchID = "b"
			call.Call.CallID = strings.Repeat("c", limit-len(session.TypeToolCall)-len("b")-len("t")-len("{}"))
			calls := mustAppend(t, s, "s", call, callEvent("small", "t", `{}`))
			crashed := crashCopy(t, dir, k.file) // s is abandoned, not closed

			r, err := k.open(crashed, session.WithMaxEventBytes(limit))
			if err != nil {
				t.Fatalf("open after a crash with an open call at the event cap = %v", err)
			}
			defer closeStore(t, r)
			if n := r.Recovered(); n != 2 {
				t.Errorf("Recovered() = %d, want 2", n)
			}
			evs := readAll(t, r, "s")
			if len(evs) != 4 {
				t.Fatalf("Read(s) = %d events, want 2 calls and 2 synthetic results", len(evs))
			}
			for i, ev := range evs[2:] {
				if ev.Result == nil || !ev.Result.Recovered || !cmp.Equal(ev.SourceSeqs, []uint64{calls[i].Seq}) ||
					ev.Result.CallID != calls[i].Call.CallID {
					t.Errorf("event %d = %+v, want the recovered result of call seq %d", ev.Seq, ev, calls[i].Seq)
				}
			}
		})
	}
}

// TestDurableRecoveredResultQuotesTheToolNameCut: the synthetic result of an
// interrupted call names its tool as every failure toolsd gives a call does
// (tool.NamedInResult, cut at 128 bytes), also for a call naming a tool that does not
// exist with megabytes of text: the name is in the log once already, in the call.
func TestDurableRecoveredResultQuotesTheToolNameCut(t *testing.T) {
	name := strings.Repeat("n", 1<<20)
	for kind, k := range durableKinds() {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			s := k.openT(t, dir)
			mustAppend(t, s, "s", callEvent("c", name, `{}`))
			r := k.openT(t, crashCopy(t, dir, k.file)) // s is abandoned, not closed
			evs := readAll(t, r, "s")
			if len(evs) != 2 || evs[1].Result == nil || evs[1].Result.Error == nil {
				t.Fatalf("Read(s) after recovery = %d events, want the call and its synthetic result", len(evs))
			}
			if got, want := evs[1].Result.Error.Tool, tool.NamedInResult(name); got != want {
				t.Errorf("recovered result's error.tool is %d bytes, want %d (%q)", len(got), len(want), want)
			}
		})
	}
}

func TestBoltCorruptFile(t *testing.T) {
	// A real database with enough pages to truncate.
	good := t.TempDir()
	s := openBolt(t, good)
	for i := range 40 {
		mustAppend(t, s, "s", messageEvent(strings.Repeat("x", 2000)+string(rune('a'+i%26)), 0))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	valid, err := os.ReadFile(filepath.Join(good, session.FileName))
	if err != nil {
		t.Fatal(err)
	}
	pageSize := os.Getpagesize()
	tests := map[string]func() []byte{
		"empty":          func() []byte { return nil },
		"tiny":           func() []byte { return []byte("not a database") },
		"random garbage": func() []byte { return randomBytes(64 << 10) },
		"truncated":      func() []byte { return bytes.Clone(valid[:len(valid)/2]) },
		"zeroed meta pages": func() []byte {
			b := bytes.Clone(valid)
			clear(b[:2*pageSize])
			return b
		},
		"garbage data pages": func() []byte {
			b := bytes.Clone(valid)
			copy(b[2*pageSize:], randomBytes(len(b)-2*pageSize))
			return b
		},
		"foreign bbolt file": func() []byte { return foreignDB(t) },
	}
	for name, content := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, session.FileName), content(), 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := session.Open(dir, session.WithLockTimeout(100*time.Millisecond))
			if err == nil {
				_ = s.Close()
				t.Fatal("Open() = nil error, want ErrCorrupt")
			}
			t.Logf("Open() = %v", err)
			if !errors.Is(err, session.ErrCorrupt) {
				t.Errorf("Open() = %v, want ErrCorrupt", err)
			}
			if !strings.HasPrefix(err.Error(), "session: ") {
				t.Errorf("Open() error %q lacks the package prefix", err)
			}
		})
	}
}

func randomBytes(n int) []byte {
	r := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func foreignDB(t *testing.T) []byte {
	path := filepath.Join(t.TempDir(), "other.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucket([]byte("someone-else"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDurableLockedByAnotherStore(t *testing.T) {
	for name, k := range durableKinds() {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			k.openT(t, dir)
			_, err := k.open(dir, session.WithLockTimeout(50*time.Millisecond))
			if err == nil || !strings.Contains(err.Error(), "locked") || errors.Is(err, session.ErrCorrupt) {
				t.Errorf("second open() = %v, want a lock error", err)
			}
		})
	}
}

// A data directory holding one durable store's log is not silently started as an
// empty log of the other.
func TestDurableRefusesTheOtherStoresDirectory(t *testing.T) {
	for name, k := range durableKinds() {
		t.Run(name, func(t *testing.T) {
			for other, o := range durableKinds() {
				if other == name {
					continue
				}
				dir := t.TempDir()
				closeStore(t, o.openT(t, dir))
				want := "session.store: " + strings.ToLower(other)
				if _, err := k.open(dir); err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("open(%s directory) = %v, want an error naming %s", other, err, want)
				}
			}
		})
	}
}

// A log written before owners were recorded (no owners bucket) opens, keeps its
// events, and records owners from then on.
func TestBoltOpensLogWithoutOwners(t *testing.T) {
	dir := t.TempDir()
	s := openBolt(t, dir)
	mustAppend(t, s, "a", messageEvent("kept", 0))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(filepath.Join(dir, session.FileName), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { return tx.DeleteBucket([]byte("owners")) }); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := openBolt(t, dir)
	if got := readAll(t, s2, "a"); len(got) != 1 {
		t.Errorf("Read(a) = %d events, want 1", len(got))
	}
	if _, err := s2.ClaimOwner(t.Context(), "a", session.Owner{Identity: "alice"}); err != nil {
		t.Errorf("ClaimOwner() on an upgraded log = %v", err)
	}
}

// A claim's time is stored with it: a session claimed and never appended to is still
// idle since its claim after a restart.
func TestDurableClaimAgesAcrossRestart(t *testing.T) {
	for name, k := range durableKinds() {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			clock := newClock()
			t0 := clock.Now()
			opts := []session.Option{session.WithClock(clock.Now), session.WithRetention(time.Hour, 0), session.WithSweepInterval(0)}
			s := k.openT(t, dir, opts...)
			if _, err := s.ClaimOwner(t.Context(), "claimed", session.Owner{Identity: "alice"}); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			clock.Set(t0.Add(2 * time.Hour))
			s2 := k.openT(t, dir, opts...)
			if removed, err := s2.Sweep(clock.Now()); err != nil || removed != 1 {
				t.Errorf("Sweep(claim+2h) after a restart = %d, %v, want 1", removed, err)
			}
		})
	}
}
