package session

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Six writers append, claim owners and sweep at random over 30 sessions while the
// journal is rewritten again and again (a 16 KiB threshold) and copied as a crash would
// leave it; then every session must read back the same after a restart, the byte
// accounting must equal a fresh replay's, and every crash copy must open.
func TestJournalStressRewrites(t *testing.T) {
	for name, hot := range map[string]time.Duration{"hot": time.Hour, "cold": -1} {
		t.Run(name, func(t *testing.T) { stressRewrites(t, hot, 7) })
	}
}

func stressRewrites(t *testing.T, hot time.Duration, seed uint64) {
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); now = now.Add(time.Millisecond); return now }
	dir := t.TempDir()
	opts := []Option{WithCompactBytes(16 << 10), WithRetention(0, 8), WithSweepInterval(0), WithClock(clock), WithDurability(SyncNone), WithHotFor(hot)}
	j, err := OpenJournal(dir, opts...)
	if err != nil {
		t.Fatal(err)
	}
	var rewrites atomic.Int64
	var crashN atomic.Int64
	crashDirs := make(chan string, 1000)
	crash := func() {
		n := crashN.Add(1)
		if n%3 != 0 {
			return
		}
		cd := filepath.Join(t.TempDir(), "c")
		_ = os.MkdirAll(cd, 0o750)
		b, err := os.ReadFile(filepath.Join(dir, JournalFileName))
		if err == nil {
			_ = os.WriteFile(filepath.Join(cd, JournalFileName), b, 0o600)
			select {
			case crashDirs <- cd:
			default:
			}
		}
	}
	j.snapshotting = func() { crash(); time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond) }
	j.rewritten = func() { rewrites.Add(1); crash() }
	ctx := context.Background()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := 0; w < 6; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(w)))
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("s%d", r.IntN(30))
				switch x := r.IntN(20); {
				case x < 14:
					n := 1 + r.IntN(3)
					evs := make([]Event, n)
					for k := range evs {
						evs[k] = Event{Type: TypeUserMessage, Message: &MessageRecord{Content: strings.Repeat("z", r.IntN(600))}}
					}
					if _, err := j.Append(ctx, id, evs...); err != nil {
						t.Error(err)
						return
					}
				case x < 18:
					if _, err := j.ClaimOwner(ctx, id, Owner{Identity: fmt.Sprintf("w%d-%d", w, i)}); err != nil {
						t.Error(err)
						return
					}
				default:
					if _, err := j.Sweep(clock()); err != nil { //nolint:contextcheck // Sweep takes no context: retention is not a caller's request
						t.Error(err)
						return
					}
				}
			}
		}(w)
	}
	time.Sleep(500 * time.Millisecond)
	close(stop)
	wg.Wait()
	type state struct {
		Events []Event
		Owner  Owner
		HasO   bool
	}
	want := map[string]state{}
	for i := 0; i < 30; i++ {
		id := fmt.Sprintf("s%d", i)
		evs, err := j.Read(ctx, id, 1, 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		o, ok, _ := j.Owner(ctx, id)
		if len(evs) > 0 || ok {
			want[id] = state{evs, o, ok}
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	live, size := j.live, j.size
	bytesOf := map[string]int64{}
	j.mem.sessions.each(func(id string, s *memSession) { bytesOf[id] = s.bytes })
	st, _ := os.Stat(filepath.Join(dir, JournalFileName))
	if st.Size() != size {
		t.Errorf("file %d, j.size %d", st.Size(), size)
	}
	r, err := OpenJournal(dir, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore(t, r)
	got := map[string]state{}
	for i := 0; i < 30; i++ {
		id := fmt.Sprintf("s%d", i)
		evs, err := r.Read(ctx, id, 1, 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		o, ok, _ := r.Owner(ctx, id)
		if len(evs) > 0 || ok {
			got[id] = state{evs, o, ok}
		}
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("after reopen:\n%s", d)
	}
	if r.live != live {
		t.Errorf("live before close %d, after replay %d", live, r.live)
	}
	r.mem.sessions.each(func(id string, s *memSession) {
		if bytesOf[id] != s.bytes {
			t.Errorf("session %s bytes %d, replay %d", id, bytesOf[id], s.bytes)
		}
	})
	if rewrites.Load() == 0 {
		t.Error("no rewrite happened; the test exercised nothing")
	}
	t.Logf("rewrites %d, size %d live %d", rewrites.Load(), size, live)
	close(crashDirs)
	n := 0
	for cd := range crashDirs {
		c, err := OpenJournal(cd, WithRetention(0, 8), WithSweepInterval(0))
		if err != nil {
			t.Errorf("crash copy: %v", err)
			continue
		}
		n++
		closeStore(t, c)
	}
	t.Logf("crash copies opened %d", n)
}
