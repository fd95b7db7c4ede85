package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/toolsd/toolsd/internal/session"
	"github.com/toolsd/toolsd/internal/tool"
)

// TestContract runs the behavioural suite every Store must pass against each store.
func TestContract(t *testing.T) {
	tests := map[string]func(t *testing.T, open opener){
		"AppendAssignsSeqsAndTime":     testAppendAssigns,
		"RoundTripKeepsEveryField":     testRoundTrip,
		"AppendDoesNotAliasCaller":     testNoAlias,
		"DenseSeqsOneSession":          testDenseOneSession,
		"DenseSeqsManySessions":        testDenseManySessions,
		"MultiEventAppendIsAtomic":     testAtomicAppend,
		"InvalidAppends":               testInvalidAppends,
		"ReadPaging":                   testReadPaging,
		"ReadPagesAreBoundedInBytes":   testReadPageBytes,
		"WatchReplaysThenTails":        testWatchReplayTail,
		"WatchStopsOnFnError":          testWatchFnError,
		"WatchStopsOnCancel":           testWatchCancel,
		"WatchStopsOnClose":            testWatchClose,
		"Summary":                      testSummary,
		"ClosedStoreFails":             testClosed,
		"RetentionByAge":               testRetentionAge,
		"RetentionByCount":             testRetentionCount,
		"RetentionByCountSkipsKept":    testRetentionCountSkipsKept,
		"BackgroundSweeper":            testBackgroundSweeper,
		"RetentionRunsSwept":           testRetentionRunsSwept,
		"CallbackPanicIsRecovered":     testCallbackPanicIsRecovered,
		"ObserverSeesAppends":          testObserver,
		"EmptyAppendIsNoop":            testEmptyAppend,
		"WatchFromSeqZeroStartsAtOne":  testWatchFromZero,
		"WatchPagesThroughLongLogs":    testWatchLongLog,
		"WatchPagesThroughLargeEvents": testWatchLargeEvents,
		"SummaryWhileAppending":        testSummaryWhileAppending,
		"OwnerFirstClaimWins":          testOwnerFirstClaimWins,
		"OwnerOutlivesAWatch":          testOwnerOutlivesWatch,
		"RetentionRemovesOwner":        testRetentionRemovesOwner,
		"RetentionRemovesClaimOnly":    testRetentionRemovesClaimOnly,
		"WatchEndsWhenDeleted":         testWatchEndsWhenDeleted,
		"WatchIsAttachedAtAttached":    testWatchAttached,
		"HeldSessionIsKept":            testHeldSessionIsKept,
		"DeleteRemovesSession":         testDeleteRemovesSession,
		"DeleteKeepsSessionInUse":      testDeleteKeepsSessionInUse,
		"DeleteEndsWatch":              testDeleteEndsWatch,
	}
	for kind, open := range kinds() {
		t.Run(kind, func(t *testing.T) {
			for name, test := range tests {
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					test(t, open)
				})
			}
		})
	}
}

func testAppendAssigns(t *testing.T, open opener) {
	clock := newClock()
	s := open(t, session.WithClock(clock.Now))
	ctx := t.Context()
	got, err := s.Append(ctx, "s1", callEvent("c1", "read", `{}`), callEvent("c2", "read", `{}`))
	if err != nil {
		t.Fatalf("Append() = %v", err)
	}
	if diff := cmp.Diff([]uint64{1, 2}, seqsOf(got)); diff != "" {
		t.Errorf("Append() seqs (-want +got):\n%s", diff)
	}
	for _, ev := range got {
		if ev.SessionID != "s1" || !ev.Time.Equal(clock.Now()) {
			t.Errorf("Append() event = {SessionID: %q, Time: %v}, want {s1, %v}", ev.SessionID, ev.Time, clock.Now())
		}
	}
	clock.Set(clock.Now().Add(time.Second))
	got, err = s.Append(ctx, "s1", resultEvent("c1", 1, false))
	if err != nil || len(got) != 1 || got[0].Seq != 3 || !got[0].Time.Equal(clock.Now()) {
		t.Fatalf("Append() = %+v, %v, want seq 3 at %v", got, err, clock.Now())
	}
	other, err := s.Append(ctx, "s2", messageEvent("hi", 0))
	if err != nil || other[0].Seq != 1 {
		t.Fatalf("Append(s2) = %+v, %v, want seq 1", other, err)
	}
}

func testRoundTrip(t *testing.T, open opener) {
	s := open(t)
	in := []session.Event{
		{Type: session.TypeToolCall, BatchID: "batch-7", Turn: 3, Step: 9,
			Call: &session.CallRecord{CallID: "call_1", Name: "write", Arguments: `{"path": "a", "x":`}},
		{Type: session.TypeToolCall, Call: &session.CallRecord{CallID: "call_2", Name: "noargs"}},
		{Type: session.TypeToolCall, Call: &session.CallRecord{CallID: "call_3", Name: "empty", Arguments: `{}`}},
		{Type: session.TypeToolResult, BatchID: "batch-7", Turn: 3, Step: 9, SourceSeqs: []uint64{1},
			Result: &session.ResultRecord{CallID: "call_1", Content: "Error: nope", IsError: true,
				Error: &tool.Error{Code: tool.CodeDenied, Message: "nope", Reason: "policy p1", Tool: "write"},
				Meta:  json.RawMessage(`{"k":[1,2]}`), ConcludesTurn: true, Recovered: true}},
		{Type: session.TypeToolResult, SourceSeqs: []uint64{2, 1 << 60},
			Result: &session.ResultRecord{CallID: "call_2", Content: "héllo\x00\xff"}},
		{Type: session.TypeUserMessage, SourceSeqs: []uint64{4}, Message: &session.MessageRecord{Content: "more context"}},
		{Type: "custom/kind", BatchID: "x"},
	}
	appended, err := s.Append(t.Context(), "sess", in...)
	if err != nil {
		t.Fatalf("Append() = %v", err)
	}
	want := make([]session.Event, len(in))
	for i, ev := range in {
		ev.SessionID, ev.Seq, ev.Time = "sess", uint64(i+1), appended[0].Time
		want[i] = ev
	}
	if diff := cmp.Diff(want, appended); diff != "" {
		t.Errorf("Append() (-want +got):\n%s", diff)
	}
	got, err := s.Read(t.Context(), "sess", 1, 0)
	if err != nil {
		t.Fatalf("Read() = %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Read() (-want +got):\n%s", diff)
	}
}

func testNoAlias(t *testing.T, open opener) {
	s := open(t)
	ev := callEvent("c1", "t", "")
	ev.Call.Arguments = `{"a":1}`
	ev.SourceSeqs = []uint64{7}
	if _, err := s.Append(t.Context(), "s", ev); err != nil {
		t.Fatalf("Append() = %v", err)
	}
	ev.Call.Arguments = `{"a":2}`
	ev.SourceSeqs[0] = 8
	ev.Call.Name = "changed"
	got, err := s.Read(t.Context(), "s", 1, 1)
	if err != nil || len(got) != 1 {
		t.Fatalf("Read() = %v, %v", got, err)
	}
	if got[0].Call.Arguments != `{"a":1}` || got[0].SourceSeqs[0] != 7 || got[0].Call.Name != "t" {
		t.Errorf("Read() = %s %v %q, want the event as appended", got[0].Call.Arguments, got[0].SourceSeqs, got[0].Call.Name)
	}
}

// appendConcurrently runs workers goroutines, each appending perWorker batches of 1 to
// 3 events to the session sessionOf(worker) picks, and returns every returned batch.
func appendConcurrently(t *testing.T, s session.Store, workers, perWorker int, sessionOf func(int) string) [][]session.Event {
	t.Helper()
	var (
		mu      sync.Mutex
		batches [][]session.Event
		wg      sync.WaitGroup
	)
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				evs := make([]session.Event, 1+(w+i)%3)
				for j := range evs {
					evs[j] = messageEvent(fmt.Sprintf("w%d-%d-%d", w, i, j), 0)
				}
				got, err := s.Append(t.Context(), sessionOf(w), evs...)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				batches = append(batches, got)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Append() = %v", err)
	}
	return batches
}

// checkDense verifies that a session's batches hold contiguous seqs, together 1..n, and
// that the log reads back in that order with the same contents.
func checkDense(t *testing.T, s session.Store, id string, batches [][]session.Event) {
	t.Helper()
	var all []uint64
	byContent := map[string]uint64{}
	for _, b := range batches {
		for i, ev := range b {
			if ev.Seq != b[0].Seq+uint64(i) {
				t.Errorf("Append() batch seqs = %v, want contiguous", seqsOf(b))
			}
			all = append(all, ev.Seq)
			byContent[ev.Message.Content] = ev.Seq
		}
	}
	slices.Sort(all)
	if diff := cmp.Diff(upTo(1, uint64(len(all))), all); diff != "" {
		t.Errorf("session %s seqs (-want +got):\n%s", id, diff)
	}
	got, err := s.Read(t.Context(), id, 1, len(all)+10)
	if err != nil {
		t.Fatalf("Read() = %v", err)
	}
	if diff := cmp.Diff(upTo(1, uint64(len(all))), seqsOf(got)); diff != "" {
		t.Errorf("Read(%s) seqs (-want +got):\n%s", id, diff)
	}
	for _, ev := range got {
		if byContent[ev.Message.Content] != ev.Seq {
			t.Errorf("Read(%s) seq %d holds %q, appended as seq %d", id, ev.Seq, ev.Message.Content, byContent[ev.Message.Content])
		}
	}
}

func testDenseOneSession(t *testing.T, open opener) {
	s := open(t)
	batches := appendConcurrently(t, s, 8, 40, func(int) string { return "one" })
	checkDense(t, s, "one", batches)
}

func testDenseManySessions(t *testing.T, open opener) {
	s := open(t)
	id := func(w int) string { return fmt.Sprintf("s%d", w%5) }
	batches := appendConcurrently(t, s, 16, 25, id)
	per := map[string][][]session.Event{}
	for _, b := range batches {
		per[b[0].SessionID] = append(per[b[0].SessionID], b)
	}
	if len(per) != 5 {
		t.Fatalf("sessions = %d, want 5", len(per))
	}
	for sid, bs := range per {
		checkDense(t, s, sid, bs)
	}
}

func testAtomicAppend(t *testing.T, open opener) {
	s := open(t, session.WithMaxEventBytes(100))
	ctx := t.Context()
	big := callEvent("c2", "t", `"`+strings.Repeat("x", 200)+`"`)
	_, err := s.Append(ctx, "s", callEvent("c1", "t", `{}`), big)
	if !errors.Is(err, session.ErrTooLarge) {
		t.Fatalf("Append(too large) = %v, want ErrTooLarge", err)
	}
	if got, err := s.Read(ctx, "s", 1, 0); err != nil || len(got) != 0 {
		t.Fatalf("Read() after failed Append = %d events, %v, want none", len(got), err)
	}
	got, err := s.Append(ctx, "s", callEvent("c1", "t", `{}`), callEvent("c3", "t", `{}`))
	if err != nil || !slices.Equal(seqsOf(got), []uint64{1, 2}) {
		t.Fatalf("Append() = %v, %v, want seqs [1 2]", seqsOf(got), err)
	}
	sum, err := s.Summary(ctx, "s")
	if err != nil || sum.Called("c2") || !sum.Called("t") {
		t.Errorf("Summary() after failed append = %v", err)
	}
}

func testInvalidAppends(t *testing.T, open opener) {
	s := open(t)
	tests := map[string]struct {
		id  string
		evs []session.Event
	}{
		"empty session id":      {"", []session.Event{messageEvent("x", 0)}},
		"session id too long":   {strings.Repeat("s", session.MaxSessionIDBytes+1), []session.Event{messageEvent("x", 0)}},
		"other session":         {"a", []session.Event{messageEvent("x", 0), {SessionID: "b", Type: session.TypeUserMessage, Message: &session.MessageRecord{}}}},
		"no type":               {"a", []session.Event{{Message: &session.MessageRecord{}}}},
		"call without record":   {"a", []session.Event{{Type: session.TypeToolCall}}},
		"result without record": {"a", []session.Event{{Type: session.TypeToolResult}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := s.Append(t.Context(), tc.id, tc.evs...); !errors.Is(err, session.ErrInvalid) {
				t.Errorf("Append() = %v, want ErrInvalid", err)
			}
		})
	}
	if got, _ := s.Read(t.Context(), "a", 1, 0); len(got) != 0 {
		t.Errorf("Read(a) = %d events, want none", len(got))
	}
}

func testReadPaging(t *testing.T, open opener) {
	s := open(t)
	ctx := t.Context()
	for i := range 25 {
		if _, err := s.Append(ctx, "p", messageEvent(fmt.Sprint(i), 0)); err != nil {
			t.Fatalf("Append() = %v", err)
		}
	}
	tests := map[string]struct {
		from  uint64
		limit int
		want  []uint64
	}{
		"first page":       {1, 10, upTo(1, 10)},
		"second page":      {11, 10, upTo(11, 20)},
		"short last page":  {21, 10, upTo(21, 25)},
		"past the end":     {26, 10, nil},
		"from zero":        {0, 3, upTo(1, 3)},
		"default limit":    {1, 0, upTo(1, 25)},
		"negative limit":   {5, -1, upTo(5, 25)},
		"single from last": {25, 1, []uint64{25}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := s.Read(ctx, "p", tc.from, tc.limit)
			if err != nil {
				t.Fatalf("Read() = %v", err)
			}
			if diff := cmp.Diff(tc.want, seqsOf(got)); diff != "" {
				t.Errorf("Read(p, %d, %d) seqs (-want +got):\n%s", tc.from, tc.limit, diff)
			}
		})
	}
	if got, err := s.Read(ctx, "unknown", 1, 0); err != nil || len(got) != 0 {
		t.Errorf("Read(unknown) = %d events, %v, want none", len(got), err)
	}
}

// A page stops at about PageBytes however many events it was asked for, with the
// event that takes it there or past, and holds two events at least (a reader that
// repeats the last event of its previous page must still advance); More tells such a
// page from the session's last one.
func testReadPageBytes(t *testing.T, open opener) {
	s := open(t)
	const n, size = 12, 3 << 20 // 36 MiB: a page holds 3 of them
	text := strings.Repeat("x", size)
	for range n / 2 {
		mustAppend(t, s, "big", messageEvent(text, 0), messageEvent(text, 0))
	}
	var seqs []uint64
	for from := uint64(1); ; {
		page, err := s.Read(t.Context(), "big", from, 1000)
		if err != nil {
			t.Fatalf("Read(big, %d) = %v", from, err)
		}
		bytes := 0
		for _, ev := range page {
			bytes += len(ev.Message.Content)
		}
		if bytes-size >= session.PageBytes && len(page) > 2 {
			t.Fatalf("Read(big, %d) = %d events of %d bytes, want a page to end once it holds %d", from, len(page), bytes, session.PageBytes)
		}
		seqs = append(seqs, seqsOf(page)...)
		if !session.More(page, 1000) {
			break
		}
		from = page[len(page)-1].Seq + 1
	}
	if diff := cmp.Diff(upTo(1, n), seqs); diff != "" {
		t.Errorf("paging with More seqs (-want +got):\n%s", diff)
	}
	if page, err := s.Read(t.Context(), "big", n-1, 1000); err != nil || len(page) != 2 || session.More(page, 1000) {
		t.Errorf("Read(big, %d) = %d events (More %v), %v, want the last 2 and no more", n-1, len(page), session.More(page, 1000), err)
	}
	if page, err := s.Read(t.Context(), "big", n, 1); err != nil || len(page) != 1 || !session.More(page, 1) {
		t.Errorf("Read(big, %d, 1) = %d events (More %v), %v, want 1 and More (a full page)", n, len(page), session.More(page, 1), err)
	}
}

// watchInto runs Watch in a goroutine, sending every event to the returned channel;
// the returned function cancels the watch and returns Watch's error.
func watchInto(t *testing.T, s session.Store, id string, from uint64) (<-chan session.Event, func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	out := make(chan session.Event, 4096)
	done := make(chan error, 1)
	go func() {
		done <- s.Watch(ctx, id, from, func(ev session.Event) error {
			out <- ev
			return nil
		})
	}()
	stop := sync.OnceValue(func() error {
		cancel()
		return <-done
	})
	t.Cleanup(func() { _ = stop() })
	return out, stop
}

// receive reads n events or fails after a deadline.
func receive(t *testing.T, ch <-chan session.Event, n int) []session.Event {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	var got []session.Event
	for len(got) < n {
		select {
		case ev := <-ch:
			got = append(got, ev)
		case <-deadline.C:
			t.Fatalf("received %d of %d events before the deadline", len(got), n)
		}
	}
	return got
}

func testWatchReplayTail(t *testing.T, open opener) {
	s := open(t)
	ctx := t.Context()
	for i := range 5 {
		if _, err := s.Append(ctx, "w", messageEvent(fmt.Sprint(i), 0)); err != nil {
			t.Fatalf("Append() = %v", err)
		}
	}
	ch, stop := watchInto(t, s, "w", 3)
	appendConcurrently(t, s, 4, 30, func(int) string { return "w" })
	var total int
	evs, _ := s.Read(ctx, "w", 1, 100000)
	total = len(evs)
	got := receive(t, ch, total-2)
	if diff := cmp.Diff(upTo(3, uint64(total)), seqsOf(got)); diff != "" {
		t.Errorf("Watch() seqs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(evs[2:], got); diff != "" {
		t.Errorf("Watch() events differ from Read() (-read +watch):\n%s", diff)
	}
	if _, err := s.Append(ctx, "w", messageEvent("late", 0)); err != nil {
		t.Fatalf("Append() = %v", err)
	}
	if late := receive(t, ch, 1); late[0].Seq != uint64(total+1) || late[0].Message.Content != "late" {
		t.Errorf("Watch() tail = seq %d %q, want seq %d late", late[0].Seq, late[0].Message.Content, total+1)
	}
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Errorf("Watch() after cancel = %v, want context.Canceled", err)
	}
	select {
	case ev := <-ch:
		t.Errorf("Watch() delivered seq %d after the last append", ev.Seq)
	default:
	}
}

func testWatchFnError(t *testing.T, open opener) {
	s := open(t)
	for i := range 4 {
		if _, err := s.Append(t.Context(), "w", messageEvent(fmt.Sprint(i), 0)); err != nil {
			t.Fatalf("Append() = %v", err)
		}
	}
	errStop := errors.New("stop")
	var seen []uint64
	err := s.Watch(t.Context(), "w", 1, func(ev session.Event) error {
		seen = append(seen, ev.Seq)
		if len(seen) == 2 {
			return errStop
		}
		return nil
	})
	if !errors.Is(err, errStop) || !slices.Equal(seen, []uint64{1, 2}) {
		t.Errorf("Watch() = %v after %v, want errStop after [1 2]", err, seen)
	}
}

func testWatchCancel(t *testing.T, open opener) {
	s := open(t)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Watch(ctx, "nobody", 1, func(session.Event) error { return nil }) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Watch() = %v, want context.Canceled", err)
	}
	// A watch that times out while waiting returns the deadline error.
	ctx, cancel = context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if err := s.Watch(ctx, "nobody", 1, func(session.Event) error { return nil }); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Watch() = %v, want context.DeadlineExceeded", err)
	}
}

func testWatchClose(t *testing.T, open opener) {
	s := open(t)
	if _, err := s.Append(t.Context(), "w", messageEvent("a", 0)); err != nil {
		t.Fatalf("Append() = %v", err)
	}
	got := make(chan session.Event, 1)
	done := make(chan error, 1)
	go func() {
		done <- s.Watch(t.Context(), "w", 1, func(ev session.Event) error { got <- ev; return nil })
	}()
	<-got // the watcher is running; it may or may not be waiting yet
	if err := s.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	if err := <-done; !errors.Is(err, session.ErrClosed) {
		t.Errorf("Watch() after Close = %v, want ErrClosed", err)
	}
}

func testWatchFromZero(t *testing.T, open opener) {
	s := open(t)
	if _, err := s.Append(t.Context(), "z", messageEvent("a", 0), messageEvent("b", 0)); err != nil {
		t.Fatalf("Append() = %v", err)
	}
	ch, _ := watchInto(t, s, "z", 0)
	if got := receive(t, ch, 2); !slices.Equal(seqsOf(got), []uint64{1, 2}) {
		t.Errorf("Watch(from 0) seqs = %v, want [1 2]", seqsOf(got))
	}
}

func testSummary(t *testing.T, open opener) {
	s := open(t)
	ctx := t.Context()
	calls, err := s.Append(ctx, "s", callEvent("1", "read", `{}`), callEvent("2", "write", `{}`),
		callEvent("3", "grep", `{}`), callEvent("4", "edit", `{}`))
	if err != nil {
		t.Fatalf("Append() = %v", err)
	}
	// read succeeds; write fails; grep is still running; edit succeeds without citing.
	uncited := resultEvent("4", 0, false)
	uncited.SourceSeqs = nil
	if _, err := s.Append(ctx, "s", resultEvent("1", calls[0].Seq, false), resultEvent("2", calls[1].Seq, true), uncited); err != nil {
		t.Fatalf("Append() = %v", err)
	}
	sum, err := s.Summary(ctx, "s")
	if err != nil {
		t.Fatalf("Summary() = %v", err)
	}
	tests := map[string]struct{ called, succeeded bool }{
		"read": {true, true}, "write": {true, false}, "grep": {true, false},
		"edit": {true, true}, "missing": {false, false},
	}
	check := func(sum session.Summary, name string, called, succeeded bool) {
		t.Helper()
		if got := sum.Called(name); got != called {
			t.Errorf("Called(%s) = %v, want %v", name, got, called)
		}
		if got := sum.Succeeded(name); got != succeeded {
			t.Errorf("Succeeded(%s) = %v, want %v", name, got, succeeded)
		}
	}
	for name, tc := range tests {
		check(sum, name, tc.called, tc.succeeded)
	}
	// Later appends show in later summaries, including a retry of a failed tool.
	retry, err := s.Append(ctx, "s", callEvent("5", "write", `{}`), callEvent("6", "new", `{}`))
	if err != nil {
		t.Fatalf("Append() = %v", err)
	}
	if _, err := s.Append(ctx, "s", resultEvent("5", retry[0].Seq, false), resultEvent("3", calls[2].Seq, false)); err != nil {
		t.Fatalf("Append() = %v", err)
	}
	sum2, err := s.Summary(ctx, "s")
	if err != nil {
		t.Fatalf("Summary() = %v", err)
	}
	check(sum2, "write", true, true)
	check(sum2, "grep", true, true)
	check(sum2, "new", true, false)
	check(sum, "new", false, false) // a snapshot does not change
	empty, err := s.Summary(ctx, "unknown")
	if err != nil || empty.Called("read") {
		t.Errorf("Summary(unknown) = %v, want empty", err)
	}
}

func testClosed(t *testing.T, open opener) {
	s := open(t)
	if err := s.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	ctx := t.Context()
	if _, err := s.Append(ctx, "s", messageEvent("x", 0)); !errors.Is(err, session.ErrClosed) {
		t.Errorf("Append() after Close = %v, want ErrClosed", err)
	}
	if _, err := s.Read(ctx, "s", 1, 0); !errors.Is(err, session.ErrClosed) {
		t.Errorf("Read() after Close = %v, want ErrClosed", err)
	}
	if _, err := s.Summary(ctx, "s"); !errors.Is(err, session.ErrClosed) {
		t.Errorf("Summary() after Close = %v, want ErrClosed", err)
	}
	if err := s.Watch(ctx, "s", 1, func(session.Event) error { return nil }); !errors.Is(err, session.ErrClosed) {
		t.Errorf("Watch() after Close = %v, want ErrClosed", err)
	}
	if _, err := s.ClaimOwner(ctx, "s", session.Owner{Identity: "a"}); !errors.Is(err, session.ErrClosed) {
		t.Errorf("ClaimOwner() after Close = %v, want ErrClosed", err)
	}
	if _, _, err := s.Owner(ctx, "s"); !errors.Is(err, session.ErrClosed) {
		t.Errorf("Owner() after Close = %v, want ErrClosed", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close() = %v, want nil", err)
	}
}

// sweeper is the retention entry point both stores expose.
type sweeper interface {
	Sweep(now time.Time) (int, error)
}

func testRetentionAge(t *testing.T, open opener) {
	clock := newClock()
	t0 := clock.Now()
	s := open(t, session.WithClock(clock.Now), session.WithRetention(time.Hour, 0), session.WithSweepInterval(0))
	ctx := t.Context()
	mustAppend(t, s, "old", messageEvent("a", 0))
	mustAppend(t, s, "busy", callEvent("c1", "slow", `{}`)) // open call: never swept
	clock.Set(t0.Add(50 * time.Minute))
	mustAppend(t, s, "young", messageEvent("a", 0))
	mustAppend(t, s, "revived", messageEvent("a", 0))

	removed, err := s.(sweeper).Sweep(t0.Add(90 * time.Minute))
	if err != nil || removed != 1 {
		t.Fatalf("Sweep(+90m) = %d, %v, want 1", removed, err)
	}
	for id, want := range map[string]int{"old": 0, "busy": 1, "young": 1, "revived": 1} {
		if got, err := s.Read(ctx, id, 1, 0); err != nil || len(got) != want {
			t.Errorf("Read(%s) = %d events, %v, want %d", id, len(got), err, want)
		}
	}
	if sum, _ := s.Summary(ctx, "old"); sum.Called("x") {
		t.Errorf("Summary(old) after sweep is not empty")
	}
	// A swept session starts again at seq 1.
	if got := mustAppend(t, s, "old", messageEvent("b", 0)); got[0].Seq != 1 {
		t.Errorf("Append(old) after sweep seq = %d, want 1", got[0].Seq)
	}
	// Once its call has a result the busy session ages like any other.
	clock.Set(t0.Add(2 * time.Hour))
	mustAppend(t, s, "busy", resultEvent("c1", 1, false))
	removed, err = s.(sweeper).Sweep(t0.Add(3*time.Hour + time.Minute))
	if err != nil || removed != 4 {
		t.Errorf("Sweep(+3h1m) = %d, %v, want 4 (old, young, revived, busy)", removed, err)
	}
}

func testRetentionCount(t *testing.T, open opener) {
	clock := newClock()
	t0 := clock.Now()
	s := open(t, session.WithClock(clock.Now), session.WithRetention(0, 2), session.WithSweepInterval(0))
	for i, id := range []string{"a", "b", "c", "d"} {
		clock.Set(t0.Add(time.Duration(i) * time.Minute))
		mustAppend(t, s, id, messageEvent("x", 0))
	}
	clock.Set(t0.Add(10 * time.Minute))
	mustAppend(t, s, "a", messageEvent("y", 0)) // a is now the newest
	removed, err := s.(sweeper).Sweep(clock.Now())
	if err != nil || removed != 2 {
		t.Fatalf("Sweep() = %d, %v, want 2", removed, err)
	}
	for id, want := range map[string]int{"a": 2, "b": 0, "c": 0, "d": 1} {
		if got, err := s.Read(t.Context(), id, 1, 0); err != nil || len(got) != want {
			t.Errorf("Read(%s) = %d events, %v, want %d", id, len(got), err, want)
		}
	}
}

// A session retention must keep (an open call, a hold) still counts toward the count
// limit: the longest idle session that can be deleted goes in its place.
func testRetentionCountSkipsKept(t *testing.T, open opener) {
	clock := newClock()
	t0 := clock.Now()
	s := open(t, session.WithClock(clock.Now), session.WithRetention(0, 2), session.WithSweepInterval(0))
	ctx := t.Context()
	mustAppend(t, s, "busy", callEvent("c1", "slow", `{}`))
	clock.Set(t0.Add(time.Minute))
	mustAppend(t, s, "middle", messageEvent("a", 0))
	clock.Set(t0.Add(2 * time.Minute))
	mustAppend(t, s, "held", messageEvent("a", 0))
	if removed, err := s.(sweeper).Sweep(clock.Now()); err != nil || removed != 1 {
		t.Fatalf("Sweep(busy, middle, held) = %d, %v, want 1 (middle)", removed, err)
	}

	clock.Set(t0.Add(3 * time.Minute))
	mustAppend(t, s, "busy", resultEvent("c1", 1, false))
	release, err := s.Hold(ctx, "held")
	if err != nil {
		t.Fatalf("Hold(held) = %v", err)
	}
	defer release()
	clock.Set(t0.Add(4 * time.Minute))
	mustAppend(t, s, "young", messageEvent("a", 0))
	if removed, err := s.(sweeper).Sweep(clock.Now()); err != nil || removed != 1 {
		t.Fatalf("Sweep(held, busy, young) = %d, %v, want 1 (busy)", removed, err)
	}
	for id, want := range map[string]int{"busy": 0, "middle": 0, "held": 1, "young": 1} {
		if got, err := s.Read(ctx, id, 1, 0); err != nil || len(got) != want {
			t.Errorf("Read(%s) = %d events, %v, want %d", id, len(got), err, want)
		}
	}

	// So does one kept past the age limit.
	clock.Set(t0)
	a := open(t, session.WithClock(clock.Now), session.WithRetention(time.Hour, 2), session.WithSweepInterval(0))
	mustAppend(t, a, "busy", callEvent("c1", "slow", `{}`))
	for i, id := range []string{"older", "newer"} {
		clock.Set(t0.Add(2*time.Hour + time.Duration(i)*time.Minute))
		mustAppend(t, a, id, messageEvent("a", 0))
	}
	if removed, err := a.(sweeper).Sweep(clock.Now()); err != nil || removed != 1 {
		t.Fatalf("Sweep(busy past max_age, older, newer) = %d, %v, want 1 (older)", removed, err)
	}
	for id, want := range map[string]int{"busy": 1, "older": 0, "newer": 1} {
		if got, err := a.Read(ctx, id, 1, 0); err != nil || len(got) != want {
			t.Errorf("Read(%s) = %d events, %v, want %d", id, len(got), err, want)
		}
	}
}

// The WithSwept hook runs once for each session retention deletes, claimed only or
// appended to, before the id may be held again, and for none it keeps (young, held,
// with a call open) nor for one Delete deletes (its then is Delete's own).
func testRetentionRunsSwept(t *testing.T, open opener) {
	clock := newClock()
	t0 := clock.Now()
	var (
		s     session.Store
		swept []string
	)
	ctx := t.Context()
	hook := func(id string) {
		swept = append(swept, id)
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		if release, err := s.Hold(cancelled, id); err == nil {
			release()
			t.Errorf("Hold(%s) in the swept hook succeeded, want it to wait until the sweep is done", id)
		}
	}
	s = open(t, session.WithClock(clock.Now), session.WithRetention(time.Hour, 0), session.WithSweepInterval(0),
		session.WithSwept(hook))
	mustAppend(t, s, "old", messageEvent("a", 0))
	mustAppend(t, s, "busy", callEvent("c1", "slow", `{}`))
	mustAppend(t, s, "held", messageEvent("a", 0))
	if _, err := s.ClaimOwner(ctx, "claim-only", session.Owner{Identity: "alice"}); err != nil {
		t.Fatal(err)
	}
	release, err := s.Hold(ctx, "held")
	if err != nil {
		t.Fatalf("Hold(held) = %v", err)
	}
	defer release()
	clock.Set(t0.Add(50 * time.Minute))
	mustAppend(t, s, "young", messageEvent("a", 0))

	if removed, err := s.(sweeper).Sweep(t0.Add(90 * time.Minute)); err != nil || removed != 2 {
		t.Fatalf("Sweep(+90m) = %d, %v, want 2 (old, claim-only)", removed, err)
	}
	slices.Sort(swept)
	if want := []string{"claim-only", "old"}; !slices.Equal(swept, want) {
		t.Errorf("swept hook ran for %q, want %q, once each", swept, want)
	}
	swept = nil
	if _, err := s.Delete(ctx, "young", nil, nil); err != nil {
		t.Fatalf("Delete(young) = %v", err)
	}
	if len(swept) != 0 {
		t.Errorf("swept hook ran for %q on Delete, want it for retention's deletions only", swept)
	}
}

// panicCounter counts what a store reports to a [session.PanicObserver].
type panicCounter struct {
	countingObserver
	panics int
}

func (o *panicCounter) Panicked() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.panics++
}

func (o *panicCounter) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.panics
}

// testCallbackPanicIsRecovered: a Delete's then or a WithSwept hook that panics is
// recovered where the store runs it (bbolt's and the journal's writer, memory's sweep),
// reported once to the observer and logged, and the store serves on: the deletion
// happened and later appends and reads succeed.
func testCallbackPanicIsRecovered(t *testing.T, open opener) {
	clock := newClock()
	t0 := clock.Now()
	obs := &panicCounter{}
	core, logs := observer.New(zap.ErrorLevel)
	s := open(t, session.WithClock(clock.Now), session.WithRetention(time.Hour, 0), session.WithSweepInterval(0),
		session.WithObserver(obs), session.WithLogger(zap.New(core)),
		session.WithSwept(func(id string) { panic("swept " + id) }))
	ctx := t.Context()
	mustAppend(t, s, "old", messageEvent("a", 0))
	mustAppend(t, s, "gone", messageEvent("a", 0))

	if n, err := s.Delete(ctx, "gone", nil, func() { panic("then") }); err != nil || n != 1 {
		t.Fatalf("Delete(gone) with a panicking then = %d, %v, want 1, nil", n, err)
	}
	if got := obs.count(); got != 1 {
		t.Errorf("after Delete, observer saw %d panics, want 1", got)
	}
	clock.Set(t0.Add(50 * time.Minute))
	mustAppend(t, s, "young", messageEvent("a", 0))
	if removed, err := s.(sweeper).Sweep(t0.Add(90 * time.Minute)); err != nil || removed != 1 {
		t.Fatalf("Sweep(+90m) with a panicking swept hook = %d, %v, want 1 (old)", removed, err)
	}
	if got := obs.count(); got != 2 {
		t.Errorf("after Sweep, observer saw %d panics, want 2", got)
	}
	for _, id := range []string{"gone", "old"} {
		if got, err := s.Read(ctx, id, 1, 0); err != nil || len(got) != 0 {
			t.Errorf("Read(%s) after its deletion = %d events, %v, want none", id, len(got), err)
		}
	}
	mustAppend(t, s, "young", messageEvent("b", 0))
	if got, err := s.Read(ctx, "young", 1, 0); err != nil || len(got) != 2 {
		t.Errorf("Read(young) = %d events, %v, want 2", len(got), err)
	}
	release, err := s.Hold(ctx, "old")
	if err != nil {
		t.Fatalf("Hold(old) after the sweep = %v", err)
	}
	release()
	if n := logs.FilterFieldKey("stack").Len(); n != 2 {
		t.Errorf("logged %d errors with a stack, want 2 (one per panic): %v", n, logs.All())
	}
}

func testBackgroundSweeper(t *testing.T, open opener) {
	clock := newClock()
	s := open(t, session.WithClock(clock.Now), session.WithRetention(time.Minute, 0),
		session.WithSweepInterval(time.Millisecond))
	mustAppend(t, s, "old", messageEvent("a", 0))
	clock.Set(clock.Now().Add(time.Hour))
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := s.Read(t.Context(), "old", 1, 0)
		if err != nil {
			t.Fatalf("Read() = %v", err)
		}
		if len(got) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the background sweeper did not remove an expired session")
		}
		time.Sleep(time.Millisecond)
	}
}

func mustAppend(t *testing.T, s session.Store, id string, evs ...session.Event) []session.Event {
	t.Helper()
	got, err := s.Append(t.Context(), id, evs...)
	if err != nil {
		t.Fatalf("Append(%s) = %v", id, err)
	}
	return got
}

type countingObserver struct {
	mu            sync.Mutex
	appends, evts int
	syncs         int
}

func (o *countingObserver) AppendDone(events int, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.appends++
	o.evts += events
}

func (o *countingObserver) SyncDone(time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.syncs++
}

func testObserver(t *testing.T, open opener) {
	obs := &countingObserver{}
	s := open(t, session.WithObserver(obs))
	mustAppend(t, s, "o", messageEvent("a", 0), messageEvent("b", 0))
	mustAppend(t, s, "o", messageEvent("c", 0))
	if _, err := s.Append(t.Context(), "", messageEvent("bad", 0)); err == nil {
		t.Fatal("Append(no session) = nil, want an error")
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if obs.appends != 2 || obs.evts != 3 {
		t.Errorf("observer saw %d appends of %d events, want 2 of 3", obs.appends, obs.evts)
	}
	if _, durable := s.(*session.Bolt); durable && obs.syncs < 1 {
		t.Errorf("observer saw %d commits, want at least 1", obs.syncs)
	}
}

func testEmptyAppend(t *testing.T, open opener) {
	s := open(t)
	got, err := s.Append(t.Context(), "e")
	if err != nil || len(got) != 0 {
		t.Errorf("Append() = %v, %v, want nothing", got, err)
	}
	if got := mustAppend(t, s, "e", messageEvent("a", 0)); got[0].Seq != 1 {
		t.Errorf("Append() after empty append seq = %d, want 1", got[0].Seq)
	}
}

func testWatchLongLog(t *testing.T, open opener) {
	s := open(t)
	const n = 2*session.DefaultPageSize + 123
	evs := make([]session.Event, n)
	for i := range evs {
		evs[i] = messageEvent(fmt.Sprint(i), 0)
	}
	mustAppend(t, s, "long", evs...)
	ch, _ := watchInto(t, s, "long", 1)
	if diff := cmp.Diff(upTo(1, n), seqsOf(receive(t, ch, n))); diff != "" {
		t.Errorf("Watch() seqs (-want +got):\n%s", diff)
	}
}

// testWatchLargeEvents: a watch over events of hundreds of kilobytes each (read in pages
// sized by their size, where the store pages) delivers every one, whole and in order,
// also those committed while it watches.
func testWatchLargeEvents(t *testing.T, open opener) {
	s := open(t)
	const n, size = 30, 700 << 10
	text := func(i int) string { return fmt.Sprintf("%03d", i) + strings.Repeat("x", size) }
	for i := range n / 2 {
		mustAppend(t, s, "large", messageEvent(text(i), 0))
	}
	ch, _ := watchInto(t, s, "large", 1)
	for i := n / 2; i < n; i++ {
		mustAppend(t, s, "large", messageEvent(text(i), 0))
	}
	got := receive(t, ch, n)
	if diff := cmp.Diff(upTo(1, n), seqsOf(got)); diff != "" {
		t.Errorf("Watch() seqs (-want +got):\n%s", diff)
	}
	for i, ev := range got {
		if ev.Message == nil || ev.Message.Content != text(i) {
			t.Errorf("event %d is not the one appended", i+1)
		}
	}
}

// testSummaryWhileAppending checks that summaries loaded while appends commit miss none
// of them: many sessions, each summarized while its calls and results are appended.
func testSummaryWhileAppending(t *testing.T, open opener) {
	s := open(t)
	ctx := t.Context()
	const sessions, tools = 40, 15
	var wg sync.WaitGroup
	for n := range sessions {
		id := fmt.Sprintf("busy%d", n)
		done := make(chan struct{})
		wg.Go(func() {
			defer close(done)
			for i := range tools {
				name := fmt.Sprintf("tool%d", i)
				c, err := s.Append(ctx, id, callEvent(name, name, `{}`))
				if err == nil {
					_, err = s.Append(ctx, id, resultEvent(name, c[0].Seq, false))
				}
				if err != nil {
					t.Errorf("Append() = %v", err)
					return
				}
			}
		})
		wg.Go(func() {
			for {
				if _, err := s.Summary(ctx, id); err != nil {
					t.Errorf("Summary() = %v", err)
					return
				}
				select {
				case <-done:
					return
				default:
					runtime.Gosched()
				}
			}
		})
	}
	wg.Wait()
	for n := range sessions {
		id := fmt.Sprintf("busy%d", n)
		sum, err := s.Summary(ctx, id)
		if err != nil {
			t.Fatalf("Summary() = %v", err)
		}
		for i := range tools {
			if name := fmt.Sprintf("tool%d", i); !sum.Succeeded(name) {
				t.Errorf("Summary(%s).Succeeded(%s) = false, want true", id, name)
			}
		}
	}
}

func testOwnerFirstClaimWins(t *testing.T, open opener) {
	s := open(t)
	ctx := t.Context()
	if _, ok, err := s.Owner(ctx, "s"); ok || err != nil {
		t.Fatalf("Owner(unclaimed) = ok %v, %v, want none", ok, err)
	}
	alice := session.Owner{Identity: "alice", Scope: "team/a", ScopeKnown: true}
	if got, err := s.ClaimOwner(ctx, "s", alice); err != nil || got != alice {
		t.Fatalf("ClaimOwner(alice) = %+v, %v, want alice", got, err)
	}
	if got, err := s.ClaimOwner(ctx, "s", session.Owner{Identity: "bob"}); err != nil || got != alice {
		t.Errorf("ClaimOwner(bob) = %+v, %v, want the recorded alice", got, err)
	}
	if got, ok, err := s.Owner(ctx, "s"); !ok || err != nil || got != alice {
		t.Errorf("Owner(s) = %+v, %v, %v, want alice", got, ok, err)
	}
	if _, ok, _ := s.Owner(ctx, "other"); ok {
		t.Errorf("Owner(other) found an owner, want none")
	}
	for _, id := range []string{"", strings.Repeat("x", session.MaxSessionIDBytes+1)} {
		if _, err := s.ClaimOwner(ctx, id, alice); !errors.Is(err, session.ErrInvalid) {
			t.Errorf("ClaimOwner(%d-byte id) = %v, want ErrInvalid", len(id), err)
		}
	}
}

// A session that has an owner and no events yet keeps its owner when a Watch on it ends.
func testOwnerOutlivesWatch(t *testing.T, open opener) {
	s := open(t)
	ctx := t.Context()
	alice := session.Owner{Identity: "alice"}
	if _, err := s.ClaimOwner(ctx, "claimed", alice); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	watching := make(chan error, 1)
	go func() { watching <- s.Watch(wctx, "claimed", 1, func(session.Event) error { return nil }) }()
	cancel()
	if err := <-watching; !errors.Is(err, context.Canceled) {
		t.Fatalf("Watch() = %v, want context.Canceled", err)
	}
	if got, err := s.ClaimOwner(ctx, "claimed", session.Owner{Identity: "mallory"}); err != nil || got != alice {
		t.Errorf("ClaimOwner(mallory) after a Watch = %+v, %v, want the recorded alice", got, err)
	}
	if got, ok, err := s.Owner(ctx, "claimed"); !ok || err != nil || got != alice {
		t.Errorf("Owner() after a Watch = %+v, %v, %v, want alice", got, ok, err)
	}
}

func testRetentionRemovesOwner(t *testing.T, open opener) {
	clock := newClock()
	t0 := clock.Now()
	s := open(t, session.WithClock(clock.Now), session.WithRetention(time.Hour, 0), session.WithSweepInterval(0))
	ctx := t.Context()
	mustAppend(t, s, "old", messageEvent("a", 0))
	if _, err := s.ClaimOwner(ctx, "old", session.Owner{Identity: "alice"}); err != nil {
		t.Fatal(err)
	}
	if removed, err := s.(sweeper).Sweep(t0.Add(2 * time.Hour)); err != nil || removed != 1 {
		t.Fatalf("Sweep(+2h) = %d, %v, want 1", removed, err)
	}
	if o, ok, err := s.Owner(ctx, "old"); ok || err != nil {
		t.Errorf("Owner(old) after the sweep = %+v, %v, %v, want none", o, ok, err)
	}
	if got, err := s.ClaimOwner(ctx, "old", session.Owner{Identity: "bob"}); err != nil || got.Identity != "bob" {
		t.Errorf("ClaimOwner(bob) after the sweep = %+v, %v, want bob", got, err)
	}
}

// A session that was claimed and never appended to is idle since its claim: retention
// removes it, and its owner, like any other session.
func testRetentionRemovesClaimOnly(t *testing.T, open opener) {
	clock := newClock()
	t0 := clock.Now()
	s := open(t, session.WithClock(clock.Now), session.WithRetention(time.Hour, 0), session.WithSweepInterval(0))
	ctx := t.Context()
	alice := session.Owner{Identity: "alice"}
	for _, id := range []string{"idle", "used"} {
		if _, err := s.ClaimOwner(ctx, id, alice); err != nil {
			t.Fatal(err)
		}
	}
	clock.Set(t0.Add(50 * time.Minute))
	if _, err := s.ClaimOwner(ctx, "fresh", alice); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, "used", messageEvent("a", 0))

	if removed, err := s.(sweeper).Sweep(t0.Add(90 * time.Minute)); err != nil || removed != 1 {
		t.Fatalf("Sweep(+90m) = %d, %v, want 1 (idle)", removed, err)
	}
	for id, want := range map[string]bool{"idle": false, "fresh": true, "used": true} {
		if _, ok, err := s.Owner(ctx, id); ok != want || err != nil {
			t.Errorf("Owner(%s) after the sweep = ok %v, %v, want ok %v", id, ok, err, want)
		}
	}
	if got, err := s.ClaimOwner(ctx, "idle", session.Owner{Identity: "bob"}); err != nil || got.Identity != "bob" {
		t.Errorf("ClaimOwner(bob) after the sweep = %+v, %v, want bob", got, err)
	}

	// Counted against max_sessions too, oldest (by its claim) first.
	clock.Set(t0)
	c := open(t, session.WithClock(clock.Now), session.WithRetention(0, 1), session.WithSweepInterval(0))
	if _, err := c.ClaimOwner(ctx, "claimed", alice); err != nil {
		t.Fatal(err)
	}
	clock.Set(t0.Add(time.Minute))
	mustAppend(t, c, "appended", messageEvent("a", 0))
	if removed, err := c.(sweeper).Sweep(clock.Now()); err != nil || removed != 1 {
		t.Fatalf("Sweep(max 1 session) = %d, %v, want 1 (claimed)", removed, err)
	}
	if _, ok, err := c.Owner(ctx, "claimed"); ok || err != nil {
		t.Errorf("Owner(claimed) after the sweep = ok %v, %v, want none", ok, err)
	}
}

// A watched session that retention deletes ends the watch: the id's next appends start
// again at seq 1, and delivering them after the old ones would skip their first seqs.
func testWatchEndsWhenDeleted(t *testing.T, open opener) {
	clock := newClock()
	t0 := clock.Now()
	s := open(t, session.WithClock(clock.Now), session.WithRetention(time.Hour, 0), session.WithSweepInterval(0))
	for range 3 {
		mustAppend(t, s, "w", messageEvent("old", 0))
	}
	got := make(chan session.Event, 16)
	done := make(chan error, 1)
	go func() {
		done <- s.Watch(t.Context(), "w", 1, func(ev session.Event) error { got <- ev; return nil })
	}()
	receive(t, got, 3)
	clock.Set(t0.Add(2 * time.Hour))
	if n, err := s.(sweeper).Sweep(clock.Now()); err != nil || n != 1 {
		t.Fatalf("Sweep() = %d, %v, want 1", n, err)
	}
	for range 4 {
		mustAppend(t, s, "w", messageEvent("new", 0))
	}
	select {
	case err := <-done:
		if !errors.Is(err, session.ErrDeleted) {
			t.Errorf("Watch() of a deleted session = %v, want ErrDeleted", err)
		}
	case ev := <-got:
		t.Fatalf("Watch() delivered seq %d %q after its session was deleted", ev.Seq, ev.Message.Content)
	case <-time.After(10 * time.Second):
		t.Fatal("Watch() of a deleted session did not return")
	}
	if len(got) > 0 {
		ev := <-got
		t.Errorf("Watch() delivered seq %d %q after its session was deleted", ev.Seq, ev.Message.Content)
	}
}

// A watch is attached when WatchAttached calls attached: a deletion from then on ends it
// with ErrDeleted, though it comes before the watch read anything and the id's next
// session reaches the watch's from seq; before, the watch would have followed that
// session. An error from attached ends the watch with it, and nothing is delivered.
func testWatchAttached(t *testing.T, open opener) {
	clock := newClock()
	s := open(t, session.WithClock(clock.Now), session.WithRetention(time.Hour, 0), session.WithSweepInterval(0))
	for range 3 {
		mustAppend(t, s, "w", messageEvent("old", 0))
	}
	w, ok := s.(session.AttachWatcher)
	if !ok {
		t.Fatalf("%T is not a session.AttachWatcher", s)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a safety net only
	defer cancel()
	var got []session.Event
	deliver := func(ev session.Event) error { got = append(got, ev); return nil }
	deleted := func() error {
		clock.Set(clock.Now().Add(2 * time.Hour))
		if n, err := s.(sweeper).Sweep(clock.Now()); err != nil || n != 1 {
			return fmt.Errorf("Sweep() = %d, %w, want 1", n, err)
		}
		for range 5 {
			if _, err := s.Append(ctx, "w", messageEvent("new", 0)); err != nil {
				return err
			}
		}
		return nil
	}
	if err := w.WatchAttached(ctx, "w", 4, deleted, deliver); !errors.Is(err, session.ErrDeleted) || len(got) > 0 {
		t.Errorf("WatchAttached(w, from 4) deleted once attached = %d events, %v; want none, ErrDeleted", len(got), err)
	}
	refused := errors.New("refused")
	if err := w.WatchAttached(ctx, "w", 1, func() error { return refused }, deliver); !errors.Is(err, refused) || len(got) > 0 {
		t.Errorf("WatchAttached(w) with attached failing = %d events, %v; want none, attached's error", len(got), err)
	}
}

// A held session is not deleted by retention, whether it is past the age limit or beyond
// the count limit, claimed only or appended to: a batch holds its session from before
// its claim to its last append. Released (once per hold), it is deleted like any other.
func testHeldSessionIsKept(t *testing.T, open opener) {
	clock := newClock()
	t0 := clock.Now()
	s := open(t, session.WithClock(clock.Now), session.WithRetention(time.Hour, 1), session.WithSweepInterval(0))
	ctx := t.Context()
	alice := session.Owner{Identity: "alice"}
	for _, id := range []string{"claimed", "free"} {
		if _, err := s.ClaimOwner(ctx, id, alice); err != nil {
			t.Fatal(err)
		}
	}
	mustAppend(t, s, "appended", messageEvent("a", 0))
	hold := func(id string) func() {
		t.Helper()
		release, err := s.Hold(ctx, id)
		if err != nil {
			t.Fatalf("Hold(%s) = %v", id, err)
		}
		return release
	}
	releaseClaimed := hold("claimed")
	releaseAppended, again := hold("appended"), hold("appended")

	if removed, err := s.(sweeper).Sweep(t0.Add(2 * time.Hour)); err != nil || removed != 1 {
		t.Fatalf("Sweep(+2h) = %d, %v, want 1 (free)", removed, err)
	}
	if o, ok, err := s.Owner(ctx, "claimed"); err != nil || !ok || o != alice {
		t.Errorf("Owner(claimed) held through a sweep = %+v, %v, %v, want alice", o, ok, err)
	}
	if evs, err := s.Read(ctx, "appended", 1, 0); err != nil || len(evs) != 1 {
		t.Errorf("Read(appended) held through a sweep = %d events, %v, want 1", len(evs), err)
	}

	releaseClaimed()
	releaseAppended()
	releaseAppended() // a second call releases nothing more: "appended" is held once still
	if removed, err := s.(sweeper).Sweep(t0.Add(3 * time.Hour)); err != nil || removed != 1 {
		t.Fatalf("Sweep(+3h) = %d, %v, want 1 (claimed, released)", removed, err)
	}
	if evs, err := s.Read(ctx, "appended", 1, 0); err != nil || len(evs) != 1 {
		t.Errorf("Read(appended) still held = %d events, %v, want 1", len(evs), err)
	}
	again()
	if removed, err := s.(sweeper).Sweep(t0.Add(4 * time.Hour)); err != nil || removed != 1 {
		t.Fatalf("Sweep(+4h) = %d, %v, want 1 (appended, released)", removed, err)
	}
	if _, err := s.Append(ctx, "appended", messageEvent("b", 0)); err != nil {
		t.Fatal(err)
	}
	if evs, err := s.Read(ctx, "appended", 1, 0); err != nil || !slices.Equal(seqsOf(evs), []uint64{1}) {
		t.Errorf("Read(appended) after its deletion and a new append = seqs %v, %v, want [1]", seqsOf(evs), err)
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Hold(ctx, "claimed"); !errors.Is(err, session.ErrClosed) {
		t.Errorf("Hold() on a closed store = %v, want ErrClosed", err)
	}
}
