package session

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// gate is an Observer whose first SyncDone blocks until released: it holds the writer
// inside a commit so that later appends queue up behind it.
type gate struct {
	entered, release chan struct{}
	once             sync.Once
	mu               sync.Mutex
	syncs            int
}

func newGate() *gate { return &gate{entered: make(chan struct{}), release: make(chan struct{})} }

func (g *gate) AppendDone(int, time.Duration) {}

func (g *gate) SyncDone(time.Duration) {
	g.mu.Lock()
	g.syncs++
	g.mu.Unlock()
	g.once.Do(func() {
		close(g.entered)
		<-g.release
	})
}

func (g *gate) commits() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.syncs
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func msg(text string) Event {
	return Event{Type: TypeUserMessage, Message: &MessageRecord{Content: text}}
}

// writers opens each store that commits through a writer goroutine.
func writers() map[string]func(dir string, opts ...Option) (Store, error) {
	return map[string]func(dir string, opts ...Option) (Store, error){
		"Bolt":    func(dir string, opts ...Option) (Store, error) { return Open(dir, opts...) },
		"Journal": func(dir string, opts ...Option) (Store, error) { return OpenJournal(dir, opts...) },
	}
}

// queued is the length of a store's writer queue.
func queued(s Store) int {
	switch s := s.(type) {
	case *Bolt:
		return len(s.queue)
	case *Journal:
		return len(s.queue)
	}
	panic("no writer")
}

func closing(s Store) func() bool {
	switch s := s.(type) {
	case *Bolt:
		return s.closed.Load
	case *Journal:
		return s.closed.Load
	}
	panic("no writer")
}

// holdWriter opens a store and parks its writer inside the first commit.
func holdWriter(t *testing.T, open func(string, ...Option) (Store, error), opts ...Option) (Store, *gate, chan error) {
	t.Helper()
	g := newGate()
	b, err := open(t.TempDir(), append(opts, WithObserver(g))...)
	if err != nil {
		t.Fatalf("open() = %v", err)
	}
	t.Cleanup(func() { closeStore(t, b) })
	first := make(chan error, 1)
	go func() {
		_, err := b.Append(t.Context(), "s", msg("first"))
		first <- err
	}()
	<-g.entered
	return b, g, first
}

// appendAsync starts n appends to distinct sessions and returns their errors' channel.
func appendAsync(t *testing.T, b Store, n int) chan error {
	errs := make(chan error, n)
	for i := range n {
		go func() {
			_, err := b.Append(t.Context(), string(rune('a'+i)), msg("queued"))
			errs <- err
		}()
	}
	return errs
}

func TestGroupCommitSharesOneWrite(t *testing.T) {
	for name, open := range writers() {
		t.Run(name, func(t *testing.T) {
			b, g, first := holdWriter(t, open)
			errs := appendAsync(t, b, 8)
			waitFor(t, "8 queued appends", func() bool { return queued(b) == 8 })
			close(g.release)
			if err := <-first; err != nil {
				t.Fatalf("first Append() = %v", err)
			}
			for range 8 {
				if err := <-errs; err != nil {
					t.Fatalf("queued Append() = %v", err)
				}
			}
			if got := g.commits(); got != 2 {
				t.Errorf("commits = %d, want 2 (the first append, then all 8 queued ones together)", got)
			}
		})
	}
}

func TestCloseFailsQueuedAppends(t *testing.T) {
	for name, open := range writers() {
		t.Run(name, func(t *testing.T) {
			b, g, first := holdWriter(t, open)
			errs := appendAsync(t, b, 5)
			waitFor(t, "5 queued appends", func() bool { return queued(b) == 5 })
			closed := make(chan error, 1)
			go func() { closed <- b.Close() }()
			waitFor(t, "Close to start", closing(b))
			close(g.release)
			if err := <-first; err != nil {
				t.Errorf("in-flight Append() = %v, want success", err)
			}
			for range 5 {
				if err := <-errs; !errors.Is(err, ErrClosed) {
					t.Errorf("queued Append() = %v, want ErrClosed", err)
				}
			}
			if err := <-closed; err != nil {
				t.Errorf("Close() = %v", err)
			}
			if _, err := b.Append(t.Context(), "s", msg("late")); !errors.Is(err, ErrClosed) {
				t.Errorf("Append() after Close = %v, want ErrClosed", err)
			}
		})
	}
}

func TestFullQueueHonoursContext(t *testing.T) {
	for name, open := range writers() {
		t.Run(name, func(t *testing.T) {
			b, g, first := holdWriter(t, open, WithQueueSize(1))
			errs := appendAsync(t, b, 1)
			waitFor(t, "a queued append", func() bool { return queued(b) == 1 })
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
			defer cancel()
			if _, err := b.Append(ctx, "s", msg("no room")); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Append() with a full queue = %v, want context.DeadlineExceeded", err)
			}
			close(g.release)
			if err := <-first; err != nil {
				t.Errorf("first Append() = %v", err)
			}
			if err := <-errs; err != nil {
				t.Errorf("queued Append() = %v", err)
			}
			got, err := b.Read(t.Context(), "s", 1, 0)
			if err != nil || len(got) != 1 {
				t.Errorf("Read(s) = %d events, %v, want only the first (the timed-out append is not stored)", len(got), err)
			}
		})
	}
}

// A summary loaded from the log while a commit lands after the scan's snapshot must
// still include that commit.
func TestBoltSummaryLoadRacingACommit(t *testing.T) {
	b, err := Open(t.TempDir())
	if err != nil {
		t.Fatalf("Open() = %v", err)
	}
	t.Cleanup(func() { closeStore(t, b) })
	ctx := t.Context()
	call := Event{Type: TypeToolCall, Call: &CallRecord{CallID: "1", Name: "late"}}
	c, err := b.Append(ctx, "s", call)
	if err != nil {
		t.Fatalf("Append() = %v", err)
	}
	scan := b.scan
	b.scan = func(id string) (*toolSummary, bool, error) {
		sum, exists, err := scan(id)
		// The result commits after the scan's snapshot, before Summary installs it.
		res := Event{Type: TypeToolResult, SourceSeqs: []uint64{c[0].Seq}, Result: &ResultRecord{CallID: "1"}}
		if _, err := b.Append(ctx, "s", res); err != nil {
			t.Errorf("Append() = %v", err)
		}
		return sum, exists, err
	}
	sum, err := b.Summary(ctx, "s")
	if err != nil {
		t.Fatalf("Summary() = %v", err)
	}
	if !sum.Succeeded("late") {
		t.Errorf("Summary().Succeeded(late) = false, want true (committed during the load)")
	}
	b.scan = scan
	if sum, _ := b.Summary(ctx, "s"); !sum.Succeeded("late") {
		t.Errorf("cached Summary().Succeeded(late) = false, want true")
	}
}

// An error of toolsd's own inside a write transaction rolls back that transaction only:
// the store does not stop, as it does after a commit that fails in bbolt.
func TestBoltUpdateErrorDoesNotStop(t *testing.T) {
	b, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore(t, b)
	mine := errors.New("refused by the closure")
	if err := b.update(func(*bolt.Tx) error { return mine }); !errors.Is(err, mine) || errors.Is(err, ErrStopped) {
		t.Fatalf("update(failing closure) = %v, want its own error", err)
	}
	ev := Event{Type: TypeUserMessage, Message: &MessageRecord{Content: "after"}}
	if _, err := b.Append(t.Context(), "s", ev); err != nil {
		t.Errorf("Append() after a closure error = %v, want nil", err)
	}
}

// A run that crashed after creating its log file (or after a journal rewrite renamed
// its file over the old one) but before it fsynced the directory leaves a file whose
// name may not survive a power loss. The next Open finds the file and must make the
// name durable before it acknowledges an append.
func TestOpenSyncsTheDirectoryOfAnExistingLog(t *testing.T) {
	for name, open := range writers() {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := open(dir)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			synced := recordSyncs(t)
			s, err = open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = s.Close() }()
			if got := synced(); !slices.Contains(got, dir) {
				t.Errorf("Open of an existing log synced directories %q, want %q among them", got, dir)
			}
		})
	}
}

// recordSyncs makes syncDir record the directories it syncs, for the rest of the test.
func recordSyncs(t *testing.T) func() []string {
	var mu sync.Mutex
	var synced []string
	orig := syncDir
	syncDir = func(d string) error {
		mu.Lock()
		synced = append(synced, d)
		mu.Unlock()
		return orig(d)
	}
	t.Cleanup(func() { syncDir = orig })
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(synced)
	}
}

// Open makes the data directory durable in its parent, and every level above it: the
// levels it creates, and the levels a run that crashed before syncing them created
// (which the next run finds and cannot tell from older ones). Otherwise a power loss
// could take the directory with the log whose appends were acknowledged.
func TestOpenSyncsTheDataDirectoryChain(t *testing.T) {
	for name, open := range writers() {
		for _, existing := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/existing=%v", name, existing), func(t *testing.T) {
				root := t.TempDir()
				dir := filepath.Join(root, "a", "b", "data")
				if existing { // made by a run that crashed before it synced anything
					if err := os.MkdirAll(dir, 0o750); err != nil {
						t.Fatal(err)
					}
				}
				synced := recordSyncs(t)
				s, err := open(dir)
				if err != nil {
					t.Fatal(err)
				}
				defer closeStore(t, s)
				got := synced()
				for _, want := range []string{root, filepath.Join(root, "a"), filepath.Join(root, "a", "b"), dir} {
					if !slices.Contains(got, want) {
						t.Errorf("Open synced %q, want %q among them", got, want)
					}
				}
				if st, err := os.Stat(dir); err != nil || !st.IsDir() {
					t.Errorf("Stat(%s) = %v, want the data directory", dir, err)
				}
			})
		}
	}
}

// A level above the data directory that this run did not create may be one toolsd
// cannot sync (a directory it may not read): it is skipped. A level it created, or a
// failing sync of any level, fails Open.
func TestOpenDataDirectorySyncFailures(t *testing.T) {
	tests := []struct {
		name     string
		existing bool  // a/data exists before Open
		err      error // what syncing root (a's parent) returns
		ok       bool
	}{
		{"found, unreadable", true, &os.PathError{Op: "open", Path: "root", Err: syscall.EACCES}, true},
		{"found, I/O error", true, &os.PathError{Op: "sync", Path: "root", Err: syscall.EIO}, false},
		{"created, unreadable", false, &os.PathError{Op: "open", Path: "root", Err: syscall.EACCES}, false},
	}
	for name, open := range writers() {
		for _, tt := range tests {
			t.Run(name+"/"+tt.name, func(t *testing.T) {
				root := t.TempDir()
				dir := filepath.Join(root, "a", "data")
				if tt.existing {
					if err := os.MkdirAll(dir, 0o750); err != nil {
						t.Fatal(err)
					}
				}
				orig := syncDir
				syncDir = func(d string) error {
					if d == root {
						return tt.err
					}
					return orig(d)
				}
				t.Cleanup(func() { syncDir = orig })
				s, err := open(dir)
				if err == nil {
					closeStore(t, s)
				}
				if (err == nil) != tt.ok {
					t.Errorf("Open() = %v, want success %v", err, tt.ok)
				}
				if err != nil && !errors.Is(err, tt.err) {
					t.Errorf("Open() = %v, want it to wrap %v", err, tt.err)
				}
			})
		}
	}
}

// damagedBolt writes a bbolt log in dir with one event in each of sessions (opened
// with opts), then puts key = value into damaged's bucket behind the store's back.
func damagedBolt(t *testing.T, dir string, opts []Option, sessions []string, damaged string, key, value []byte) {
	t.Helper()
	b, err := Open(dir, opts...)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range sessions {
		if _, err := b.Append(t.Context(), id, msg("before")); err != nil {
			t.Fatal(err)
		}
	}
	closeStore(t, b)
	db, err := bolt.Open(filepath.Join(dir, FileName), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketSessions).Bucket([]byte(damaged)).Put(key, value)
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
}

// A session whose log is damaged fails its own appends only: an append to another
// session that the writer grouped into the same commit is stored and acknowledged.
func TestBoltDamagedSessionFailsOnlyItsOwnAppend(t *testing.T) {
	dir := t.TempDir()
	damagedBolt(t, dir, nil, []string{"bad"}, "bad", []byte("not a seq"), []byte("x"))

	g := newGate()
	s, err := Open(dir, WithObserver(g))
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore(t, s)
	first := make(chan error, 1)
	go func() {
		_, err := s.Append(t.Context(), "s", msg("first"))
		first <- err
	}()
	<-g.entered
	bad, good := make(chan error, 1), make(chan error, 1)
	go func() {
		_, err := s.Append(t.Context(), "bad", msg("to the damaged session"))
		bad <- err
	}()
	waitFor(t, "the damaged session's append to queue", func() bool { return queued(s) == 1 })
	go func() {
		_, err := s.Append(t.Context(), "good", msg("to a sound session"))
		good <- err
	}()
	waitFor(t, "both appends to queue", func() bool { return queued(s) == 2 })
	close(g.release)
	if err := <-first; err != nil {
		t.Fatalf("first Append() = %v", err)
	}
	if err := <-bad; !errors.Is(err, ErrCorrupt) {
		t.Errorf("Append(bad) = %v, want ErrCorrupt", err)
	}
	if err := <-good; err != nil {
		t.Errorf("Append(good) grouped with a damaged session's = %v, want nil", err)
	}
	got, err := s.Read(t.Context(), "good", 1, 0)
	if err != nil || len(got) != 1 || got[0].Seq != 1 {
		t.Errorf("Read(good) = %v, %v, want its one event at seq 1", got, err)
	}
}

// A session whose last event is damaged is kept by retention, which goes on deleting
// the other sessions its limits select; the damage failed every sweep, so that no
// session was ever deleted again.
func TestBoltSweepSkipsADamagedSession(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return t0 }
	damagedBolt(t, dir, []Option{WithClock(clock)}, []string{"bad", "old"}, "bad", seqKey(2), []byte("damaged"))

	s, err := Open(dir, WithClock(clock), WithRetention(time.Hour, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore(t, s)
	if removed, err := s.Sweep(t0.Add(2 * time.Hour)); err != nil || removed != 1 {
		t.Errorf("Sweep(+2h) = %d, %v, want 1 (old), the damaged session kept", removed, err)
	}
	if got, err := s.Read(t.Context(), "old", 1, 0); err != nil || len(got) != 0 {
		t.Errorf("Read(old) after the sweep = %d events, %v, want none", len(got), err)
	}
	if _, err := s.Read(t.Context(), "bad", 1, 0); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Read(bad) = %v, want ErrCorrupt (kept, still damaged)", err)
	}
}

// syncCounter counts the group commits a store reports.
type syncCounter struct {
	mu    sync.Mutex
	syncs int
}

func (c *syncCounter) AppendDone(int, time.Duration) {}

func (c *syncCounter) SyncDone(time.Duration) {
	c.mu.Lock()
	c.syncs++
	c.mu.Unlock()
}

// A bbolt transaction that rolls back (an append to a damaged session) wrote and
// synced nothing: it is no group commit, and its time is not a sync's (the journal
// reports only the groups it wrote). Else every failed append adds a sync of a few
// microseconds, pulling toolsd_session_sync_duration_seconds' quantiles down.
func TestBoltRolledBackCommitIsNoSync(t *testing.T) {
	dir := t.TempDir()
	damagedBolt(t, dir, nil, []string{"bad"}, "bad", []byte("not a seq"), []byte("x"))

	c := &syncCounter{}
	s, err := Open(dir, WithObserver(c))
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore(t, s)
	if _, err := s.Append(t.Context(), "bad", msg("to the damaged session")); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Append(bad) = %v, want ErrCorrupt", err)
	}
	if _, err := s.Append(t.Context(), "good", msg("to a sound session")); err != nil {
		t.Fatalf("Append(good) = %v", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.syncs != 1 {
		t.Errorf("SyncDone calls = %d, want 1 (the sound session's commit only)", c.syncs)
	}
}

// zeroPage overwrites with zeros the page of the bbolt log in dir that pick names (a
// page id), so that bbolt panics when it reads it: the page no longer carries its id.
func zeroPage(t *testing.T, dir string, pick func(tx *bolt.Tx, pageSize int) uint64) {
	t.Helper()
	path := filepath.Join(dir, FileName)
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	pageSize := db.Info().PageSize
	var id uint64
	err = db.View(func(tx *bolt.Tx) error {
		id = pick(tx, pageSize)
		return nil
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteAt(make([]byte, pageSize), int64(id)*int64(pageSize))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
}

// A session whose pages are damaged so that bbolt panics, rather than fails, as the
// sweep reads its age or deletes it is kept by retention, which goes on deleting the
// other sessions its limits select; the panic rolled back the sweep's transaction and
// failed every sweep, so that no session was ever deleted again.
func TestBoltSweepSkipsASessionThatPanicsBbolt(t *testing.T) {
	for name, pick := range map[string]func(root []byte) uint64{
		// The root page: reading the session's last event panics.
		"root": func(root []byte) uint64 { return binary.NativeEndian.Uint64(root[:8]) },
		// The first leaf of a branch root: the last event reads, deleting the session panics.
		"first leaf": func(root []byte) uint64 { return binary.NativeEndian.Uint64(root[16+8:]) },
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
			clock := func() time.Time { return t0 }
			b, err := Open(dir, WithClock(clock))
			if err != nil {
				t.Fatal(err)
			}
			for range 40 { // past one leaf page: "bad" has a branch root
				if _, err := b.Append(t.Context(), "bad", msg(string(make([]byte, 2000)))); err != nil {
					t.Fatal(err)
				}
			}
			for _, id := range []string{"old", "older"} {
				if _, err := b.Append(t.Context(), id, msg("before")); err != nil {
					t.Fatal(err)
				}
			}
			closeStore(t, b)
			zeroPage(t, dir, func(tx *bolt.Tx, pageSize int) uint64 {
				root := uint64(tx.Bucket(bucketSessions).Bucket([]byte("bad")).RootPage())
				if info, err := tx.Page(int(root)); err != nil || info.Type != "branch" {
					t.Fatalf("bad's root page = %+v, %v, want a branch", info, err)
				}
				raw := make([]byte, pageSize)
				f, err := os.Open(filepath.Join(dir, FileName))
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				if _, err := f.ReadAt(raw, int64(root)*int64(pageSize)); err != nil {
					t.Fatal(err)
				}
				return pick(raw)
			})

			s, err := Open(dir, WithClock(clock), WithRetention(time.Hour, 0))
			if err != nil {
				t.Fatal(err)
			}
			defer closeStore(t, s)
			if removed, err := s.Sweep(t0.Add(2 * time.Hour)); err != nil || removed != 2 {
				t.Errorf("Sweep(+2h) = %d, %v, want 2 (old, older), the damaged session kept", removed, err)
			}
			for _, id := range []string{"old", "older"} {
				if got, err := s.Read(t.Context(), id, 1, 0); err != nil || len(got) != 0 {
					t.Errorf("Read(%s) after the sweep = %d events, %v, want none", id, len(got), err)
				}
			}
			if _, err := s.Read(t.Context(), "bad", 1, 0); !errors.Is(err, ErrCorrupt) {
				t.Errorf("Read(bad) = %v, want ErrCorrupt (kept, still damaged)", err)
			}
			if removed, err := s.Sweep(t0.Add(2 * time.Hour)); err != nil || removed != 0 {
				t.Errorf("second Sweep(+2h) = %d, %v, want 0 (the damaged session kept again)", removed, err)
			}
			if _, err := s.Append(t.Context(), "new", msg("after")); err != nil {
				t.Errorf("Append(new) after the sweeps = %v", err)
			}
		})
	}
}

// An append that finds its session's records damaged fails with ErrCorrupt naming the
// store's file and the session, as the reads do, in its error (which toolsd logs as
// "session log damaged") and in the writer's own line: both named only the record.
func TestBoltAppendToDamagedSessionNamesItsFile(t *testing.T) {
	dir := t.TempDir()
	damagedBolt(t, dir, nil, []string{"bad"}, "bad", []byte("not a seq"), []byte("x"))
	core, logs := observer.New(zap.ErrorLevel)
	s, err := Open(dir, WithLogger(zap.New(core)))
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore(t, s)
	path := filepath.Join(dir, FileName)
	_, err = s.Append(t.Context(), "bad", msg("to the damaged session"))
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Append(bad) = %v, want ErrCorrupt", err)
	}
	lines := logs.FilterMessage("session commit failed").All()
	if len(lines) != 1 {
		t.Fatalf("%q logged %d times, want once", "session commit failed", len(lines))
	}
	logged, _ := lines[0].ContextMap()["error"].(string)
	for _, want := range []string{path, `session "bad"`, "event key"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Append(bad) = %q, want it to name %q", err, want)
		}
		if !strings.Contains(logged, want) {
			t.Errorf("session commit failed: error = %q, want it to name %q", logged, want)
		}
	}
}
