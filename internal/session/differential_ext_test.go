package session_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolsd/toolsd/internal/session"
)

// diffStore is one store of the differential test; reopen closes and opens it again
// on its directory (nil for the memory store, which keeps nothing).
type diffStore struct {
	name   string
	s      session.Store
	reopen func() session.Store
}

// TestStoresAgree drives the same random operations (appends, reads, watches, owner
// claims, holds, retention sweeps, deletions, reopens, journal rewrites) against every
// store and checks that they answer alike.
func TestStoresAgree(t *testing.T) {
	for seed := range uint64(3) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runDifferential(t, seed) })
	}
}

func runDifferential(t *testing.T, seed uint64) {
	clock := newClock()
	opts := []session.Option{
		session.WithClock(clock.Now), session.WithRetention(20*time.Minute, 3),
		session.WithSweepInterval(0), session.WithDurability(session.SyncNone),
	}
	openBolt := func(dir string) func() session.Store {
		return func() session.Store {
			s, err := session.Open(dir, opts...)
			if err != nil {
				t.Fatalf("Open() = %v", err)
			}
			return s
		}
	}
	openJournal := func(dir string, extra ...session.Option) func() session.Store {
		return func() session.Store {
			s, err := session.OpenJournal(dir, append(append([]session.Option(nil), opts...), extra...)...)
			if err != nil {
				t.Fatalf("OpenJournal() = %v", err)
			}
			return s
		}
	}
	stores := []*diffStore{
		{name: "Memory", s: session.NewMemory(opts...)},
		{name: "Bolt", reopen: openBolt(t.TempDir())},
		{name: "Journal", reopen: openJournal(t.TempDir(), session.WithCompactBytes(1))},
		{name: "JournalCold", reopen: openJournal(t.TempDir(), session.WithHotFor(-1), session.WithCompactBytes(1))},
	}
	for _, d := range stores {
		if d.s == nil {
			d.s = d.reopen()
		}
	}
	t.Cleanup(func() {
		for _, d := range stores {
			closeStore(t, d.s)
		}
	})

	rng := rand.New(rand.NewPCG(seed, 1))
	ids := []string{"a", "b", "c", "d", "e"}
	open := map[string][]uint64{} // each session's open calls, by the memory store
	// epochs are the seq-1 times of every life of every session id.
	epochs := map[string][]time.Time{}
	ctx := t.Context()
	var watches []watchSet
	same := func(op string, got func(s session.Store) any) {
		t.Helper()
		want := got(stores[0].s)
		for _, d := range stores[1:] {
			if diff := cmp.Diff(want, got(d.s)); diff != "" {
				t.Fatalf("seed %d: %s: %s differs from Memory (-Memory +%s):\n%s", seed, op, d.name, d.name, diff)
			}
		}
	}
	for step := range 150 {
		clock.Set(clock.Now().Add(time.Duration(1+rng.IntN(60)) * time.Second))
		id := ids[rng.IntN(len(ids))]
		op := rng.IntN(100)
		switch {
		case op < 40: // an append group
			evs := diffEvents(rng, open[id], step)
			var first []session.Event
			same(fmt.Sprintf("step %d: Append(%s, %d events)", step, id, len(evs)), func(s session.Store) any {
				got, err := s.Append(ctx, id, evs...)
				if err != nil {
					return err.Error()
				}
				first = got
				return got
			})
			for _, ev := range first {
				switch ev.Type {
				case session.TypeToolCall:
					open[id] = append(open[id], ev.Seq)
				case session.TypeToolResult:
					open[id] = removeSeq(open[id], ev.SourceSeqs[0])
				}
				if ev.Seq == 1 {
					epochs[id] = append(epochs[id], ev.Time)
				}
			}
		case op < 60:
			from, limit := uint64(rng.IntN(12)), rng.IntN(8)-1
			same(fmt.Sprintf("step %d: Read(%s, %d, %d)", step, id, from, limit), func(s session.Store) any {
				got, err := s.Read(ctx, id, from, limit)
				if err != nil {
					return err.Error()
				}
				return got
			})
		case op < 70:
			from := uint64(rng.IntN(12))
			same(fmt.Sprintf("step %d: Watch(%s, %d)", step, id, from), func(s session.Store) any {
				return watchStored(t, s, id, from)
			})
		case op < 75:
			same(fmt.Sprintf("step %d: Summary(%s)", step, id), func(s session.Store) any {
				sum, err := s.Summary(ctx, id)
				if err != nil {
					return err.Error()
				}
				var got []string
				for _, name := range []string{"t0", "t1", "t2"} {
					got = append(got, fmt.Sprint(name, sum.Called(name), sum.Succeeded(name)))
				}
				return got
			})
		case op < 82:
			who := session.Owner{Identity: fmt.Sprint("u", rng.IntN(2))}
			same(fmt.Sprintf("step %d: ClaimOwner(%s, %v)", step, id, who), func(s session.Store) any {
				got, err := s.ClaimOwner(ctx, id, who)
				if err != nil {
					return err.Error()
				}
				return got
			})
		case op < 88:
			// Mostly of a session whose calls all have their results: one with a call
			// open is kept (ErrInUse).
			if len(open[id]) > 0 && rng.IntN(4) != 0 {
				var results []session.Event
				for _, seq := range open[id] {
					results = append(results, resultEvent(fmt.Sprint("c", seq), seq, false))
				}
				same(fmt.Sprintf("step %d: Append(%s, results of %v)", step, id, open[id]), func(s session.Store) any {
					got, err := s.Append(ctx, id, results...)
					if err != nil {
						return err.Error()
					}
					return got
				})
				delete(open, id)
				// Every watch has the results before the deletion ends it: one that lags
				// ends without what it had yet to send, and the stores lag alike only
				// by chance.
				for _, w := range watches {
					w.settle(t, stores[0].s, false)
				}
			}
			// The owner the caller saw: the one recorded, or now and then another (or
			// none), which keeps the session (ErrOwnerChanged).
			var seen *session.Owner
			if o, ok, err := stores[0].s.Owner(ctx, id); err != nil {
				t.Fatal(err)
			} else if ok {
				seen = &o
			}
			if rng.IntN(4) == 0 {
				seen = &session.Owner{Identity: fmt.Sprint("u", rng.IntN(3))}
			}
			same(fmt.Sprintf("step %d: Delete(%s, %v)", step, id, seen), func(s session.Store) any {
				n, err := s.Delete(ctx, id, seen, nil)
				return fmt.Sprint(n, " ", errorKind(err))
			})
			if got, _ := stores[0].s.Read(ctx, id, 1, 1); len(got) == 0 {
				delete(open, id)
			}
		case op < 95:
			at := clock.Now().Add(time.Duration(rng.IntN(30)) * time.Minute)
			var held []func()
			holdID := ids[rng.IntN(len(ids))]
			hold := rng.IntN(3) == 0
			same(fmt.Sprintf("step %d: Sweep(+%v)", step, at.Sub(clock.Now())), func(s session.Store) any {
				if hold {
					release, err := s.Hold(ctx, holdID)
					if err != nil {
						t.Fatalf("Hold() = %v", err)
					}
					held = append(held, release)
				}
				n, err := s.(sweeper).Sweep(at)
				if err != nil {
					return err.Error()
				}
				return n
			})
			for _, release := range held {
				release()
			}
			// A deleted session has no calls open (retention keeps those).
			for _, id := range ids {
				if got, _ := stores[0].s.Read(ctx, id, 1, 1); len(got) == 0 {
					delete(open, id)
				}
			}
		default: // a restart: the memory store keeps nothing, so it is given the results recovery wrote
			if openSessions(open) > 1 {
				continue // recovery would stamp them alike: which of them retention takes first is left open
			}
			stopWatches(t, seed, watches)
			watches = nil
			for _, d := range stores {
				if d.reopen == nil {
					continue
				}
				closeStore(t, d.s)
				d.s = d.reopen()
			}
			for _, id := range ids {
				have, _ := stores[0].s.Read(ctx, id, 1, 1<<20)
				recovered, _ := stores[1].s.Read(ctx, id, uint64(len(have))+1, 1<<20)
				if len(recovered) == 0 {
					continue
				}
				for i := range recovered {
					recovered[i].Seq, recovered[i].Time = 0, time.Time{}
				}
				if _, err := stores[0].s.Append(ctx, id, recovered...); err != nil {
					t.Fatal(err)
				}
				delete(open, id)
			}
		}
		// A watch starts from an event that is stored, so that it is known to be
		// watching once it has sent that event (one that had yet to start could see a
		// session recreated after a deletion the others ended with).
		if n := storedCount(t, stores[0].s, id); n > 0 && rng.IntN(10) == 0 {
			from := 1 + uint64(rng.IntN(n))
			w := watchSet{id: id, from: from}
			for _, d := range stores {
				w.w = append(w.w, startWatch(t, d.s, id, from))
			}
			watches = append(watches, w)
		}
		for _, w := range watches {
			w.settle(t, stores[0].s, storedCount(t, stores[0].s, w.id) == 0)
		}
		if len(watches) > 0 && rng.IntN(8) == 0 {
			stopWatches(t, seed, watches[:1])
			watches = watches[1:]
		}
	}
	stopWatches(t, seed, watches)
	for id, times := range epochs {
		seen := map[time.Time]bool{}
		for _, at := range times {
			if seen[at] {
				t.Errorf("seed %d: two lives of session %s began at %v", seed, id, at)
			}
			seen[at] = true
		}
	}
}

// diffEvents makes one append group: new calls, results of open calls, messages.
func diffEvents(rng *rand.Rand, open []uint64, step int) []session.Event {
	var evs []session.Event
	for i := range 1 + rng.IntN(3) {
		switch k := rng.IntN(3); {
		case k == 1 && len(open) > 0:
			seq := open[rng.IntN(len(open))]
			open = removeSeq(open, seq)
			evs = append(evs, resultEvent(fmt.Sprint("c", seq), seq, rng.IntN(2) == 0))
		case k == 2:
			evs = append(evs, messageEvent(fmt.Sprint("m", step, i), 0))
		default:
			evs = append(evs, callEvent(fmt.Sprint("c", step, i), fmt.Sprint("t", rng.IntN(3)), `{"x":1}`))
		}
	}
	return evs
}

func removeSeq(seqs []uint64, seq uint64) []uint64 {
	out := make([]uint64, 0, len(seqs))
	for _, s := range seqs {
		if s != seq {
			out = append(out, s)
		}
	}
	return out
}

func openSessions(open map[string][]uint64) int {
	n := 0
	for _, seqs := range open {
		if len(seqs) > 0 {
			n++
		}
	}
	return n
}

// errStored ends a watch once it has sent every stored event.
var errStored = errors.New("every stored event sent")

// watchStored watches id from from until it has sent the events stored now, and
// returns them (and how the watch ended).
func watchStored(t *testing.T, s session.Store, id string, from uint64) any {
	t.Helper()
	stored, err := s.Read(t.Context(), id, 1, 1<<20)
	if err != nil {
		return err.Error()
	}
	want := 0
	if n := uint64(len(stored)); max(from, 1) <= n {
		want = int(n - max(from, 1) + 1)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var got []session.Event
	if want == 0 {
		cancel() // nothing stored to send: the watch would wait
	}
	err = s.Watch(ctx, id, from, func(ev session.Event) error {
		got = append(got, ev)
		if len(got) == want {
			return errStored
		}
		return nil
	})
	return []any{got, fmt.Sprint(err)}
}

// liveWatch is one store's watch that runs across the test's operations.
type liveWatch struct {
	cancel context.CancelFunc
	evs    chan session.Event
	done   chan error
	got    []session.Event
	err    error
	ended  bool
}

func startWatch(t *testing.T, s session.Store, id string, from uint64) *liveWatch {
	ctx, cancel := context.WithCancel(t.Context())
	w := &liveWatch{cancel: cancel, evs: make(chan session.Event, 1<<16), done: make(chan error, 1)}
	go func() {
		w.done <- s.Watch(ctx, id, from, func(ev session.Event) error {
			w.evs <- ev
			return nil
		})
	}()
	return w
}

// watchSet is one watch on every store.
type watchSet struct {
	id   string
	from uint64
	w    []*liveWatch
}

// settle waits until every watch has sent the events model (the memory store) holds
// now from its seq on, or has ended; once retention has deleted the session (deleted),
// until every watch has ended.
func (ws watchSet) settle(t *testing.T, model session.Store, deleted bool) {
	t.Helper()
	stored, err := model.Read(t.Context(), ws.id, max(ws.from, 1), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for _, w := range ws.w {
		for !w.ended && (deleted || len(w.got) < len(stored) || (len(stored) > 0 && w.got[len(w.got)-1].Seq != stored[len(stored)-1].Seq)) {
			select {
			case ev := <-w.evs:
				w.got = append(w.got, ev)
			case w.err = <-w.done:
				w.ended = true
			case <-deadline.C:
				t.Fatalf("Watch(%s, %d) sent %d events, want %d", ws.id, ws.from, len(w.got), len(stored))
			}
		}
	}
}

// stopWatches ends the watches and checks that each store's sent the same.
func stopWatches(t *testing.T, seed uint64, sets []watchSet) {
	t.Helper()
	for _, ws := range sets {
		var results []any
		for _, w := range ws.w {
			w.cancel()
			if !w.ended {
				w.err = <-w.done
			}
		drain:
			for {
				select {
				case ev := <-w.evs:
					w.got = append(w.got, ev)
				default:
					break drain
				}
			}
			results = append(results, []any{w.got, fmt.Sprint(w.err)})
		}
		for i := range results[1:] {
			if diff := cmp.Diff(results[0], results[i+1]); diff != "" {
				t.Fatalf("seed %d: Watch(%s, %d): store %d differs from Memory (-Memory +got):\n%s", seed, ws.id, ws.from, i+1, diff)
			}
		}
	}
}

// storedCount is how many events s holds for id.
func storedCount(t *testing.T, s session.Store, id string) int {
	t.Helper()
	evs, err := s.Read(t.Context(), id, 1, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	return len(evs)
}

// errorKind is which of the package's errors err is, for stores whose messages differ.
func errorKind(err error) string {
	for _, e := range []error{session.ErrNotFound, session.ErrInUse, session.ErrOwnerChanged} {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	if err != nil {
		return err.Error()
	}
	return "ok"
}
