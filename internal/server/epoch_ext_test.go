package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/session"
)

// epochStore is a store that retention can be made to delete a session of, on a clock
// the test moves; reopen returns it as after a restart (a journal's sessions are cold
// then: their events are read back from the file).
type epochStore struct {
	name   string
	open   func(t *testing.T, dir string, opts ...session.Option) sweepStore
	reopen bool
}

// sweepStore is a store whose retention a test runs.
type sweepStore interface {
	session.Store
	Sweep(now time.Time) (int, error)
}

// testClock is a store clock that moves only when told.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Add(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

var epochStores = []epochStore{
	{name: "memory", open: func(_ *testing.T, _ string, opts ...session.Option) sweepStore {
		return session.NewMemory(opts...)
	}},
	{name: "journal", reopen: true, open: func(t *testing.T, dir string, opts ...session.Option) sweepStore {
		j, err := session.OpenJournal(dir, append(opts, session.WithDurability(session.SyncNone))...)
		if err != nil {
			t.Fatal(err)
		}
		return j
	}},
}

// readAll is what ReadSession answers req with: its messages, then its error (nil at
// the stream's end).
func readAll(t *testing.T, tools toolsdv1.ToolServiceClient, req *toolsdv1.ReadSessionRequest) ([]*toolsdv1.ReadSessionResponse, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	stream, err := tools.ReadSession(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	var out []*toolsdv1.ReadSessionResponse
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, m)
	}
}

// epochOfRead reads session s from from_seq and returns its events' epoch, checking
// that the read sends want events (seqs from from_seq on), all of one epoch.
func epochOfRead(t *testing.T, tools toolsdv1.ToolServiceClient, req *toolsdv1.ReadSessionRequest, want int) uint64 {
	t.Helper()
	got, err := readAll(t, tools, req)
	if err != nil {
		t.Fatalf("ReadSession(%v) = %v", req, err)
	}
	if len(got) != want {
		t.Fatalf("ReadSession(%v) sent %d events, want %d", req, len(got), want)
	}
	var epoch uint64
	for i, m := range got {
		if seq := m.GetEvent().GetSeq(); seq != max(req.GetFromSeq(), 1)+uint64(i) {
			t.Fatalf("ReadSession(%v) sent seq %d as event %d", req, seq, i)
		}
		if i == 0 {
			epoch = m.GetEpoch()
		}
		if m.GetEpoch() != epoch || epoch == 0 {
			t.Fatalf("ReadSession(%v): event %d has epoch %d, event 1 %d; want one nonzero epoch", req, m.GetEvent().GetSeq(), m.GetEpoch(), epoch)
		}
	}
	return epoch
}

// watchFirst returns the first event a WatchSession for req sends, or its error.
func watchFirst(t *testing.T, tools toolsdv1.ToolServiceClient, req *toolsdv1.WatchSessionRequest) (*toolsdv1.WatchSessionResponse, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	w, err := tools.WatchSession(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	return w.Recv()
}

func isRecreated(err error) bool {
	return status.Code(err) == codes.FailedPrecondition && reason(err) == "SESSION_RECREATED"
}

func appendMessages(t *testing.T, store session.Store, id string, n int) {
	t.Helper()
	evs := make([]session.Event, n)
	for i := range evs {
		evs[i] = session.Event{Type: session.TypeUserMessage, Message: &session.MessageRecord{Content: "ctx"}}
	}
	if _, err := store.Append(t.Context(), id, evs...); err != nil {
		t.Fatal(err)
	}
}

// TestSessionEpochTellsARecreatedSession: a client resuming ReadSession or WatchSession
// with from_seq after retention deleted the session and the id was created again got
// the new session's events (seqs restart at 1) as if they continued the old one, or,
// past its end, nothing. Every event now carries its session's epoch, and a request
// that sends the epoch it saw as expect_epoch fails with FAILED_PRECONDITION
// (SESSION_RECREATED) instead; 0 does not check, and a session that does not exist
// reads as empty, as before. For a journal, whose sessions are cold after a restart,
// too.
func TestSessionEpochTellsARecreatedSession(t *testing.T) {
	for _, st := range epochStores {
		t.Run(st.name, func(t *testing.T) {
			dir := t.TempDir()
			clock := &testClock{now: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)}
			opts := []session.Option{session.WithRetention(time.Hour, 0), session.WithSweepInterval(0), session.WithClock(clock.Now)}
			store := st.open(t, dir, opts...)
			defer func() { _ = store.Close() }()
			restart := func() {
				if !st.reopen {
					return
				}
				if err := store.Close(); err != nil {
					t.Fatal(err)
				}
				store = st.open(t, dir, opts...)
			}
			appendMessages(t, store, "s", 2)
			clock.Add(time.Second)
			appendMessages(t, store, "s", 3) // another append time: the epoch is seq 1's
			restart()
			_, tools := serveTools(t, store)

			old := epochOfRead(t, tools, &toolsdv1.ReadSessionRequest{SessionId: "s"}, 5)
			if got := epochOfRead(t, tools, &toolsdv1.ReadSessionRequest{SessionId: "s", FromSeq: 3, ExpectEpoch: old}, 3); got != old {
				t.Errorf("ReadSession(from 3, expect %d) has epoch %d", old, got)
			}
			if m, err := watchFirst(t, tools, &toolsdv1.WatchSessionRequest{SessionId: "s", FromSeq: 4, ExpectEpoch: old}); err != nil || m.GetEvent().GetSeq() != 4 || m.GetEpoch() != old {
				t.Errorf("WatchSession(from 4, expect %d) = seq %d epoch %d, %v; want seq 4 epoch %d", old, m.GetEvent().GetSeq(), m.GetEpoch(), err, old)
			}

			// Retention deletes the session; the id is created again with 2 events.
			if n, err := store.Sweep(clock.Add(2 * time.Hour)); err != nil || n != 1 {
				t.Fatalf("Sweep() = %d, %v; want 1 session deleted", n, err)
			}
			clock.Add(time.Second)
			appendMessages(t, store, "s", 2)
			restart()
			_, tools = serveTools(t, store)

			cur := epochOfRead(t, tools, &toolsdv1.ReadSessionRequest{SessionId: "s"}, 2)
			if cur == old {
				t.Fatalf("the session created again has the deleted one's epoch %d", old)
			}
			for _, from := range []uint64{0, 2, 6} {
				req := &toolsdv1.ReadSessionRequest{SessionId: "s", FromSeq: from, ExpectEpoch: old}
				if got, err := readAll(t, tools, req); !isRecreated(err) || len(got) != 0 {
					t.Errorf("ReadSession(from %d, expect the deleted session's epoch) = %d events, %v; want FailedPrecondition (SESSION_RECREATED) and none", from, len(got), err)
				}
				wreq := &toolsdv1.WatchSessionRequest{SessionId: "s", FromSeq: from, ExpectEpoch: old}
				if m, err := watchFirst(t, tools, wreq); !isRecreated(err) {
					t.Errorf("WatchSession(from %d, expect the deleted session's epoch) = seq %d, %v; want FailedPrecondition (SESSION_RECREATED)", from, m.GetEvent().GetSeq(), err)
				}
			}
			if got := epochOfRead(t, tools, &toolsdv1.ReadSessionRequest{SessionId: "s", FromSeq: 2, ExpectEpoch: cur}, 1); got != cur {
				t.Errorf("ReadSession(from 2, expect %d) has epoch %d", cur, got)
			}
			if got := epochOfRead(t, tools, &toolsdv1.ReadSessionRequest{SessionId: "s", FromSeq: 2}, 1); got != cur {
				t.Errorf("ReadSession(from 2, no epoch expected) has epoch %d, want %d", got, cur)
			}
			if m, err := watchFirst(t, tools, &toolsdv1.WatchSessionRequest{SessionId: "s", FromSeq: 2, ExpectEpoch: cur}); err != nil || m.GetEvent().GetSeq() != 2 || m.GetEpoch() != cur {
				t.Errorf("WatchSession(from 2, expect %d) = seq %d epoch %d, %v; want seq 2 epoch %d", cur, m.GetEvent().GetSeq(), m.GetEpoch(), err, cur)
			}
			if got, err := readAll(t, tools, &toolsdv1.ReadSessionRequest{SessionId: "unknown", FromSeq: 3, ExpectEpoch: old}); err != nil || len(got) != 0 {
				t.Errorf("ReadSession(unknown session, expect an epoch) = %d events, %v; want none, as without one", len(got), err)
			}
		})
	}
}

// watchStarts is a store that reports each Watch as it begins.
type watchStarts struct {
	sweepStore
	started chan struct{}
}

func (w *watchStarts) Watch(ctx context.Context, id string, from uint64, fn func(session.Event) error) error {
	w.started <- struct{}{}
	return w.sweepStore.Watch(ctx, id, from, fn)
}

// watchedThreeEvents serves a store of st that holds session "s" with three events,
// under retention of an hour by a test clock that only moves when told, with every
// watch's start signalled; old is the session's epoch as ReadSession reports it.
func watchedThreeEvents(t *testing.T, st epochStore) (clock *testClock, store *watchStarts, tools toolsdv1.ToolServiceClient, old uint64) {
	t.Helper()
	clock = &testClock{now: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)}
	mem := st.open(t, t.TempDir(), session.WithRetention(time.Hour, 0), session.WithSweepInterval(0), session.WithClock(clock.Now))
	t.Cleanup(func() { _ = mem.Close() })
	store = &watchStarts{sweepStore: mem, started: make(chan struct{}, 1)}
	appendMessages(t, store, "s", 3)
	_, tools = serveTools(t, store)
	return clock, store, tools, epochOfRead(t, tools, &toolsdv1.ReadSessionRequest{SessionId: "s"}, 3)
}

// TestWatchOfADeletedSessionExpectingItsEpochFailsWhenTheIdIsReused: a watch that
// began after retention deleted its session waited for the id's next session and then
// sent its events as if they continued the deleted one. With the deleted session's
// epoch as expect_epoch it fails once that session's first event arrives, before it
// sends any; a watch that runs as its session is deleted ends with NOT_FOUND
// (SESSION_DELETED), as it did.
func TestWatchOfADeletedSessionExpectingItsEpochFailsWhenTheIdIsReused(t *testing.T) {
	for _, st := range epochStores {
		t.Run(st.name, func(t *testing.T) {
			clock, store, tools, old := watchedThreeEvents(t, st)

			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			running, err := tools.WatchSession(ctx, &toolsdv1.WatchSessionRequest{SessionId: "s", FromSeq: 3, ExpectEpoch: old})
			if err != nil {
				t.Fatal(err)
			}
			if m, err := running.Recv(); err != nil || m.GetEpoch() != old {
				t.Fatalf("WatchSession(s).Recv() = epoch %d, %v; want epoch %d", m.GetEpoch(), err, old)
			}
			<-store.started
			if n, err := store.Sweep(clock.Add(2 * time.Hour)); err != nil || n != 1 {
				t.Fatalf("Sweep() = %d, %v; want 1 session deleted", n, err)
			}
			if m, err := running.Recv(); status.Code(err) != codes.NotFound || reason(err) != "SESSION_DELETED" {
				t.Errorf("WatchSession(s) running as its session is deleted: Recv() = seq %d, %v; want NotFound (SESSION_DELETED)", m.GetEvent().GetSeq(), err)
			}

			w, err := tools.WatchSession(ctx, &toolsdv1.WatchSessionRequest{SessionId: "s", FromSeq: 2, ExpectEpoch: old})
			if err != nil {
				t.Fatal(err)
			}
			<-store.started // the watch found no session to check, and waits for one
			clock.Add(time.Second)
			appendMessages(t, store, "s", 3)
			if m, err := w.Recv(); !isRecreated(err) {
				t.Errorf("WatchSession(deleted session, expect its epoch) once the id is reused: Recv() = seq %d epoch %d, %v; want FailedPrecondition (SESSION_RECREATED)", m.GetEvent().GetSeq(), m.GetEpoch(), err)
			}
		})
	}
}

// TestWatchResumedPastADeletedSessionFailsAtTheNextSessionsFirstEvent: a watch resumed
// as a client does, from the seq after the last event it got with that event's epoch,
// on a session that retention had deleted waited until the id's next session reached
// from_seq, and said nothing of the new session until then. It fails with
// FAILED_PRECONDITION (SESSION_RECREATED) once that session appends its first event.
func TestWatchResumedPastADeletedSessionFailsAtTheNextSessionsFirstEvent(t *testing.T) {
	for _, st := range epochStores {
		t.Run(st.name, func(t *testing.T) {
			clock, store, tools, old := watchedThreeEvents(t, st)
			if n, err := store.Sweep(clock.Add(2 * time.Hour)); err != nil || n != 1 {
				t.Fatalf("Sweep() = %d, %v; want 1 session deleted", n, err)
			}

			// A safety net only: a watch that waits on fails on its missing reason.
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			w, err := tools.WatchSession(ctx, &toolsdv1.WatchSessionRequest{SessionId: "s", FromSeq: 4, ExpectEpoch: old})
			if err != nil {
				t.Fatal(err)
			}
			<-store.started
			clock.Add(time.Second)
			appendMessages(t, store, "s", 1)
			if m, err := w.Recv(); !isRecreated(err) {
				t.Errorf("WatchSession(from 4, expect the deleted session's epoch) once the id's next session has 1 event: Recv() = seq %d epoch %d, %v; want FailedPrecondition (SESSION_RECREATED)", m.GetEvent().GetSeq(), m.GetEpoch(), err)
			}
		})
	}
}

// sweptAtWatch is a store whose first watch finds its session "s" deleted by retention,
// and, when recreate is set, the id's next session holding recreate events: the
// deletion lands after WatchSession checked expect_epoch, before the store's watch
// attached.
type sweptAtWatch struct {
	sweepStore
	clock    *testClock
	recreate int
	once     sync.Once
	swept    error
}

func (w *sweptAtWatch) sweep(ctx context.Context) error {
	w.once.Do(func() {
		n, err := w.Sweep(w.clock.Add(2 * time.Hour))
		if err == nil && n != 1 {
			err = fmt.Errorf("Sweep() deleted %d sessions, want 1", n)
		}
		if err == nil && w.recreate > 0 {
			w.clock.Add(time.Second)
			evs := make([]session.Event, w.recreate)
			for i := range evs {
				evs[i] = session.Event{Type: session.TypeUserMessage, Message: &session.MessageRecord{Content: "ctx"}}
			}
			_, err = w.Append(ctx, "s", evs...)
		}
		w.swept = err
	})
	return w.swept
}

func (w *sweptAtWatch) Watch(ctx context.Context, id string, from uint64, fn func(session.Event) error) error {
	if err := w.sweep(ctx); err != nil {
		return err
	}
	return w.sweepStore.Watch(ctx, id, from, fn)
}

func (w *sweptAtWatch) WatchAttached(ctx context.Context, id string, from uint64, attached func() error, fn func(session.Event) error) error {
	if err := w.sweep(ctx); err != nil {
		return err
	}
	return session.WatchAttached(ctx, w.sweepStore, id, from, attached, fn)
}

// TestWatchExpectingAnEpochFailsWhenItsSessionIsDeletedBeforeTheWatchAttaches: a
// watch resumed with expect_epoch checks the session's epoch, then attaches the store's
// watch; a session deleted between the two left the store watching the id's next
// session from from_seq, silent until that one got there. The epoch is checked again
// once the store's watch is attached: the watch fails with SESSION_RECREATED when the
// id names another session, and ends with SESSION_DELETED, as when the deletion comes
// after it attached, when it names none.
func TestWatchExpectingAnEpochFailsWhenItsSessionIsDeletedBeforeTheWatchAttaches(t *testing.T) {
	for _, st := range epochStores {
		for name, tc := range map[string]struct {
			recreate int
			want     func(error) bool
			wantText string
		}{
			"recreated": {recreate: 1, want: isRecreated, wantText: "FailedPrecondition (SESSION_RECREATED)"},
			"deleted": {want: func(err error) bool {
				return status.Code(err) == codes.NotFound && reason(err) == "SESSION_DELETED"
			}, wantText: "NotFound (SESSION_DELETED)"},
		} {
			t.Run(st.name+"/"+name, func(t *testing.T) {
				clock := &testClock{now: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)}
				mem := st.open(t, t.TempDir(), session.WithRetention(time.Hour, 0), session.WithSweepInterval(0), session.WithClock(clock.Now))
				t.Cleanup(func() { _ = mem.Close() })
				appendMessages(t, mem, "s", 3)
				store := &sweptAtWatch{sweepStore: mem, clock: clock, recreate: tc.recreate}
				_, tools := serveTools(t, store)
				old := epochOfRead(t, tools, &toolsdv1.ReadSessionRequest{SessionId: "s"}, 3)

				// A safety net only: a watch that waits on fails on its missing error.
				ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
				defer cancel()
				w, err := tools.WatchSession(ctx, &toolsdv1.WatchSessionRequest{SessionId: "s", FromSeq: 4, ExpectEpoch: old})
				if err != nil {
					t.Fatal(err)
				}
				m, err := w.Recv()
				if err := store.sweep(ctx); err != nil { // what the watch's sweep got
					t.Fatal(err)
				}
				if !tc.want(err) {
					t.Errorf("WatchSession(from 4, expect %d) deleted as it attached: Recv() = seq %d epoch %d, %v; want %s", old, m.GetEvent().GetSeq(), m.GetEpoch(), err, tc.wantText)
				}
			})
		}
	}
}
