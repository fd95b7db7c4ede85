package session

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A watch of a cold journal session reads the whole session back from the file. The
// journal's writer applies each commit to its sessions under their locks: were the
// load to hold the session's lock, an append to the session committed meanwhile would
// stop the writer, and with it every other session's appends, until the load ended.
func TestJournalColdLoadDoesNotHoldUpOtherSessions(t *testing.T) {
	j, err := OpenJournal(t.TempDir(), WithHotFor(-1), WithDurability(SyncNone))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := j.Close(); err != nil {
			t.Error(err)
		}
	}()
	ctx := t.Context()
	msg := func(text string) Event {
		return Event{Type: TypeUserMessage, Message: &MessageRecord{Content: text}}
	}
	for i := range 3 {
		if _, err := j.Append(ctx, "a", msg(string(rune('0'+i)))); err != nil {
			t.Fatal(err)
		}
	}
	loading, resume := make(chan struct{}), make(chan struct{})
	warmHook = func() {
		close(loading)
		<-resume
	}
	defer func() { warmHook = func() {} }()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	got := make(chan Event, 8)
	watched := make(chan error, 1)
	go func() {
		watched <- j.Watch(wctx, "a", 1, func(ev Event) error {
			got <- ev
			return nil
		})
	}()
	<-loading
	appendedA := make(chan error, 1)
	go func() {
		_, err := j.Append(context.Background(), "a", msg("3"))
		appendedA <- err
	}()
	// The append to b queues behind a's; it must not wait for a's load. (An append
	// that is queued waits for the writer whatever its context says.)
	appendedB := make(chan error, 1)
	go func() {
		_, err := j.Append(context.Background(), "b", msg("b"))
		appendedB <- err
	}()
	waited := time.NewTimer(10 * time.Second)
	defer waited.Stop()
	select {
	case err := <-appendedB:
		close(resume)
		if err != nil {
			t.Fatalf("Append(b) = %v", err)
		}
	case <-waited.C:
		close(resume)
		t.Fatalf("Append(b) was still waiting after 10s of a's events being read back (then %v)", <-appendedB)
	}
	if err := <-appendedA; err != nil {
		t.Fatalf("Append(a) = %v", err)
	}
	// The watch sends every event of a, the one appended during its load too.
	for want := uint64(1); want <= 4; want++ {
		select {
		case ev := <-got:
			if ev.Seq != want {
				t.Fatalf("Watch(a) sent seq %d, want %d", ev.Seq, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("Watch(a) sent no seq %d", want)
		}
	}
	cancel()
	if err := <-watched; !errors.Is(err, context.Canceled) {
		t.Errorf("Watch(a) = %v, want context.Canceled", err)
	}
}

// A session deleted while a watch reads it back from the file ends the watch with
// ErrDeleted, and the deletion does not wait for the read.
func TestJournalColdLoadOfADeletedSession(t *testing.T) {
	j, err := OpenJournal(t.TempDir(), WithHotFor(-1), WithDurability(SyncNone))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := j.Close(); err != nil {
			t.Error(err)
		}
	}()
	if _, err := j.Append(t.Context(), "a", Event{Type: TypeUserMessage, Message: &MessageRecord{Content: "m"}}); err != nil {
		t.Fatal(err)
	}
	loading, resume := make(chan struct{}), make(chan struct{})
	warmHook = func() {
		close(loading)
		<-resume
	}
	defer func() { warmHook = func() {} }()
	watched := make(chan error, 1)
	go func() {
		watched <- j.Watch(t.Context(), "a", 1, func(Event) error {
			return errors.New("an event of the deleted session was sent")
		})
	}()
	<-loading
	n, err := j.Delete(t.Context(), "a", nil, nil)
	close(resume)
	if err != nil || n != 1 {
		t.Fatalf("Delete(a) during its read back = %d, %v, want 1 event removed", n, err)
	}
	if err := <-watched; !errors.Is(err, ErrDeleted) {
		t.Errorf("Watch(a) = %v, want ErrDeleted", err)
	}
}
