package session_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolsd/toolsd/internal/session"
)

var benchArgs = `{"path":"/src/internal/session/bolt.go","pattern":"func \\(b \\*Bolt\\)","context_lines":3,"max_results":50,"case_sensitive":true,"include":["*.go","*.md"]}`

func benchEvent() session.Event {
	return session.Event{Type: session.TypeToolCall, BatchID: "batch-0001", Turn: 3, Step: 7,
		Call: &session.CallRecord{CallID: "call_01HZX3K9Q", Name: "grep", Arguments: benchArgs}}
}

// benchPair returns a call and its result: appended alternately, like a real session.
func benchPair() [2]session.Event {
	res := session.Event{Type: session.TypeToolResult, BatchID: "batch-0001", Turn: 3, Step: 7,
		Result: &session.ResultRecord{CallID: "call_01HZX3K9Q", Content: "internal/session/bolt.go:42: func (b *Bolt) Read(...)"}}
	return [2]session.Event{benchEvent(), res}
}

// nextPairEvent returns the next event of the alternating call/result sequence.
func nextPairEvent(pair *[2]session.Event, i *uint64) session.Event {
	ev := pair[*i%2]
	if *i%2 == 1 {
		ev.SourceSeqs = []uint64{*i} // the call appended just before
	}
	*i++
	return ev
}

type commitCounter struct{ commits atomic.Int64 }

func (c *commitCounter) AppendDone(int, time.Duration) {}
func (c *commitCounter) SyncDone(time.Duration)        { c.commits.Add(1) }

func benchStores() map[string]func(b *testing.B, obs session.Observer) session.Store {
	bolt := func(mode session.Mode) func(*testing.B, session.Observer) session.Store {
		return func(b *testing.B, obs session.Observer) session.Store {
			s, err := session.Open(b.TempDir(), session.WithDurability(mode), session.WithObserver(obs))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { closeStore(b, s) })
			return s
		}
	}
	journal := func(mode session.Mode) func(*testing.B, session.Observer) session.Store {
		return func(b *testing.B, obs session.Observer) session.Store {
			s, err := session.OpenJournal(b.TempDir(), session.WithDurability(mode), session.WithObserver(obs))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { closeStore(b, s) })
			return s
		}
	}
	return map[string]func(*testing.B, session.Observer) session.Store{
		"Memory": func(b *testing.B, obs session.Observer) session.Store {
			s := session.NewMemory(session.WithObserver(obs))
			b.Cleanup(func() { closeStore(b, s) })
			return s
		},
		"BoltSyncNone":      bolt(session.SyncNone),
		"BoltSyncAlways":    bolt(session.SyncAlways),
		"JournalSyncNone":   journal(session.SyncNone),
		"JournalSyncAlways": journal(session.SyncAlways),
	}
}

// BenchmarkAppend measures one-event appends of alternating calls and results: serial
// (one caller, one session) and parallel (64 callers per core, each on its own
// session), where group commit lets concurrent callers share a transaction and its
// fsync.
func BenchmarkAppend(b *testing.B) {
	for name, open := range benchStores() {
		b.Run(name+"/Serial", func(b *testing.B) {
			obs := &commitCounter{}
			s := open(b, obs)
			pair, i := benchPair(), uint64(0)
			ctx := b.Context()
			for b.Loop() {
				if _, err := s.Append(ctx, "bench", nextPairEvent(&pair, &i)); err != nil {
					b.Fatal(err)
				}
			}
			report(b, obs)
		})
		b.Run(name+"/Parallel", func(b *testing.B) {
			obs := &commitCounter{}
			s := open(b, obs)
			var ids atomic.Int64
			ctx := b.Context()
			b.SetParallelism(64)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				id := fmt.Sprintf("session-%d", ids.Add(1))
				pair, i := benchPair(), uint64(0)
				for pb.Next() {
					if _, err := s.Append(ctx, id, nextPairEvent(&pair, &i)); err != nil {
						b.Error(err)
						return
					}
				}
			})
			report(b, obs)
		})
	}
}

func report(b *testing.B, obs *commitCounter) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	if n := obs.commits.Load(); n > 0 {
		b.ReportMetric(float64(b.N)/float64(n), "events/commit")
	}
}

// BenchmarkRead measures reading a 100-event page of a 1000-event session.
func BenchmarkRead(b *testing.B) {
	for name, open := range benchStores() {
		b.Run(name, func(b *testing.B) {
			s := open(b, nil)
			evs := make([]session.Event, 100)
			for i := range evs {
				evs[i] = benchEvent()
			}
			for range 10 {
				if _, err := s.Append(b.Context(), "r", evs...); err != nil {
					b.Fatal(err)
				}
			}
			var from uint64
			for b.Loop() {
				got, err := s.Read(b.Context(), "r", from%900+1, 100)
				if err != nil || len(got) != 100 {
					b.Fatalf("Read() = %d, %v", len(got), err)
				}
				from += 100
			}
			b.ReportMetric(float64(b.N*100)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkColdPage measures a cold journal page of 2 events from one append of 128
// calls of 64 KiB (an 8 MiB record): B/op is what the page costs beyond its 128 KiB.
func BenchmarkColdPage(b *testing.B) {
	s, err := session.OpenJournal(b.TempDir(), session.WithDurability(session.SyncNone), session.WithHotFor(-1))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { closeStore(b, s) })
	args := `"` + strings.Repeat("x", 64<<10) + `"`
	evs := make([]session.Event, 128)
	for i := range evs {
		evs[i] = session.Event{Type: session.TypeToolCall, Call: &session.CallRecord{CallID: fmt.Sprint("c", i), Name: "write", Arguments: args}}
	}
	if _, err := s.Append(b.Context(), "plan", evs...); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if got, err := s.Read(b.Context(), "plan", 64, 2); err != nil || len(got) != 2 {
			b.Fatalf("Read() = %d, %v", len(got), err)
		}
	}
}

// BenchmarkWatchFanout measures the latency from Append to delivery with 8 watchers.
func BenchmarkWatchFanout(b *testing.B) {
	for name, open := range benchStores() {
		b.Run(name, func(b *testing.B) {
			s := open(b, nil)
			ctx, cancel := context.WithCancel(b.Context())
			const watchers = 8
			var wg sync.WaitGroup
			got := make([]chan uint64, watchers)
			for i := range got {
				got[i] = make(chan uint64, 1)
				wg.Go(func() {
					_ = s.Watch(ctx, "w", 1, func(ev session.Event) error {
						select {
						case got[i] <- ev.Seq:
							return nil
						case <-ctx.Done():
							return ctx.Err()
						}
					})
				})
			}
			ev := benchEvent()
			for b.Loop() {
				if _, err := s.Append(ctx, "w", ev); err != nil {
					b.Fatal(err)
				}
				for _, ch := range got {
					<-ch
				}
			}
			cancel()
			wg.Wait()
		})
	}
}
