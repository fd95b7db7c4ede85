package session_test

import (
	"sync"
	"testing"
	"time"

	"github.com/toolsd/toolsd/internal/session"
	"github.com/toolsd/toolsd/internal/tool"
)

// opener makes a fresh store of one kind; the store is closed at cleanup.
type opener func(t testing.TB, opts ...session.Option) session.Store

// kinds are the stores the contract suite runs against.
func kinds() map[string]opener {
	return map[string]opener{
		"Memory": func(t testing.TB, opts ...session.Option) session.Store {
			s := session.NewMemory(opts...)
			t.Cleanup(func() { closeStore(t, s) })
			return s
		},
		"BoltSyncAlways":  boltOpener(session.SyncAlways),
		"BoltSyncNone":    boltOpener(session.SyncNone),
		"Journal":         journalOpener(session.SyncAlways),
		"JournalSyncNone": journalOpener(session.SyncNone),
		// Every session cold after each commit: reads come back from the file.
		"JournalCold": journalOpener(session.SyncNone, session.WithHotFor(-1)),
	}
}

func journalOpener(mode session.Mode, extra ...session.Option) opener {
	return func(t testing.TB, opts ...session.Option) session.Store {
		t.Helper()
		s, err := session.OpenJournal(t.TempDir(), append(append([]session.Option{session.WithDurability(mode)}, extra...), opts...)...)
		if err != nil {
			t.Fatalf("OpenJournal() = %v", err)
		}
		t.Cleanup(func() { closeStore(t, s) })
		return s
	}
}

func boltOpener(mode session.Mode) opener {
	return func(t testing.TB, opts ...session.Option) session.Store {
		t.Helper()
		s, err := session.Open(t.TempDir(), append([]session.Option{session.WithDurability(mode)}, opts...)...)
		if err != nil {
			t.Fatalf("Open() = %v", err)
		}
		t.Cleanup(func() { closeStore(t, s) })
		return s
	}
}

// fakeClock is a settable clock for WithClock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

func callEvent(callID, name, args string) session.Event {
	return session.Event{
		Type: session.TypeToolCall, BatchID: "b1", Turn: 1, Step: 2,
		Call: &session.CallRecord{CallID: callID, Name: name, Arguments: args},
	}
}

func resultEvent(callID string, callSeq uint64, isError bool) session.Event {
	r := &session.ResultRecord{CallID: callID, Content: "ok"}
	if isError {
		r.Content, r.IsError = "Error: boom", true
		r.Error = &tool.Error{Code: tool.CodeToolError, Message: "boom"}
	}
	return session.Event{Type: session.TypeToolResult, BatchID: "b1", Turn: 1, Step: 2,
		SourceSeqs: []uint64{callSeq}, Result: r}
}

func messageEvent(text string, source uint64) session.Event {
	return session.Event{Type: session.TypeUserMessage, BatchID: "b1", Turn: 1, Step: 2,
		SourceSeqs: []uint64{source}, Message: &session.MessageRecord{Content: text}}
}

// seqsOf returns the events' seqs.
func seqsOf(evs []session.Event) []uint64 {
	var out []uint64
	for _, ev := range evs {
		out = append(out, ev.Seq)
	}
	return out
}

// upTo returns 1..n.
func upTo(from, n uint64) []uint64 {
	var out []uint64
	for s := from; s <= n; s++ {
		out = append(out, s)
	}
	return out
}

// closeStore closes s at the end of a test and reports a failing close.
func closeStore(tb testing.TB, s interface{ Close() error }) {
	if err := s.Close(); err != nil {
		tb.Errorf("Close() = %v", err)
	}
}
