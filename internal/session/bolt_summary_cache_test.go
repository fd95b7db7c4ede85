package session

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// entries counts the map's entries.
func (s *shardMap[T, P]) entries() int {
	n := 0
	s.each(func(string, P) { n++ })
	return n
}

// TestBoltSummaryCacheIsBounded: the summaries Bolt keeps in memory, one per session a
// conditional tool set was resolved for, are bounded. They were kept until retention
// deleted their session, so with retention off (or the default 30 days) every session
// ever resolved grew memory; past the cap, unheld summaries are dropped and read back
// from the log when asked for again, and a watched session's entry stays.
func TestBoltSummaryCacheIsBounded(t *testing.T) {
	ctx := context.Background()
	b, err := Open(t.TempDir(), WithDurability(SyncNone))
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore(t, b)
	b.summaryCap = 2 * shardCount

	watchCtx, stopWatch := context.WithCancel(ctx)
	watched := make(chan Event, 16)
	watchDone := make(chan error, 1)
	go func() {
		watchDone <- b.Watch(watchCtx, "watched", 1, func(ev Event) error { watched <- ev; return nil })
	}()
	defer func() {
		stopWatch()
		if err := <-watchDone; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Watch(watched) = %v, want it ended by its context", err)
		}
	}()
	call := func(name string) Event {
		return Event{Type: TypeToolCall, Call: &CallRecord{CallID: "c", Name: name, Arguments: `{}`}}
	}
	if _, err := b.Append(ctx, "watched", call("first")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-watched:
	case <-time.After(10 * time.Second):
		t.Fatal("the watch did not deliver the first event")
	}
	if sum, err := b.Summary(ctx, "watched"); err != nil || !sum.Called("first") {
		t.Fatalf("Summary(watched) = %v, %v; want first called", sum, err)
	}

	const sessions = 2000
	for i := range sessions {
		id := fmt.Sprintf("s-%d", i)
		if _, err := b.Append(ctx, id, call(fmt.Sprintf("tool_%d", i))); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Summary(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if n := b.live.entries(); n > b.summaryCap+1 {
		t.Errorf("after %d sessions summarized, %d are kept in memory, want at most %d (+1 watched)", sessions, n, b.summaryCap)
	}
	// A summary dropped from memory is read back whole.
	for _, i := range []int{0, sessions / 2, sessions - 1} {
		id := fmt.Sprintf("s-%d", i)
		if sum, err := b.Summary(ctx, id); err != nil || !sum.Called(fmt.Sprintf("tool_%d", i)) {
			t.Errorf("Summary(%s).Called(tool_%d) = false (err %v), want true", id, i, err)
		}
	}
	// The watched session kept its entry: its watch goes on, and its summary follows
	// the appends.
	if _, err := b.Append(ctx, "watched", call("second")); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-watched:
		if ev.Seq != 2 {
			t.Errorf("watch delivered seq %d, want 2", ev.Seq)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the watch did not deliver the second event")
	}
	if sum, err := b.Summary(ctx, "watched"); err != nil || !sum.Called("first") || !sum.Called("second") {
		t.Errorf("Summary(watched) misses first or second (err %v)", err)
	}
}
