package session

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A failed write stops the journal: the failing append and every later change report
// it, nothing half-written is applied, and reads go on.
func TestJournalStopsAfterFailedWrite(t *testing.T) {
	dir := t.TempDir()
	j, err := OpenJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Append(t.Context(), "s", msg("kept")); err != nil {
		t.Fatal(err)
	}
	// The writer is idle between groups; a closed descriptor fails its next write as a
	// full disk or an I/O error would.
	if err := j.f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Append(t.Context(), "s", msg("lost")); err == nil || !strings.Contains(err.Error(), "write the journal") {
		t.Errorf("Append() after a failed write = %v, want the write error", err)
	}
	if _, err := j.Append(t.Context(), "s", msg("later")); err == nil || !strings.Contains(err.Error(), "stopped") {
		t.Errorf("later Append() = %v, want the journal stopped", err)
	}
	if _, err := j.ClaimOwner(t.Context(), "s", Owner{Identity: "a"}); err == nil {
		t.Error("ClaimOwner() after a failed write = nil error")
	}
	got, err := j.Read(t.Context(), "s", 1, 0)
	if err != nil || len(got) != 1 || got[0].Message.Content != "kept" {
		t.Errorf("Read() after a failed write = %v, %v, want only the kept event", got, err)
	}
	if err := j.Close(); err == nil {
		t.Error("Close() = nil, want the close error of the already-closed file")
	}
	r, err := OpenJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore(t, r)
	if got, _ := r.Read(t.Context(), "s", 1, 0); len(got) != 1 {
		t.Errorf("Read() after restart = %d events, want 1", len(got))
	}
}

// Arbitrary bytes after a valid header either open (as a journal whose torn tail was
// cut) or fail with ErrCorrupt; they never panic, and an opened journal takes appends.
func FuzzJournalOpen(f *testing.F) {
	seed := t0Journal()
	f.Add(seed)
	f.Add(seed[:len(seed)-1])
	f.Add([]byte{0, 0, 0, 1, 0, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, records []byte) {
		dir := t.TempDir()
		content := append([]byte(journalMagic), records...)
		if err := os.WriteFile(filepath.Join(dir, JournalFileName), content, 0o600); err != nil {
			t.Fatal(err)
		}
		j, err := OpenJournal(dir)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("OpenJournal() = %v, want nil or ErrCorrupt", err)
			}
			return
		}
		defer closeStore(t, j)
		if _, err := j.Append(t.Context(), "fuzz", msg("after")); err != nil {
			t.Fatalf("Append() on an opened journal = %v", err)
		}
	})
}

// t0Journal returns the groups of a small journal with every kind of record.
func t0Journal() []byte {
	b := beginGroup(nil, 1)
	call := Event{Type: TypeToolCall, Call: &CallRecord{CallID: "1", Name: "n", Arguments: []byte(`{}`)}, Seq: 1}
	b = appendStoredEvents(b, "s", []Event{call})
	b = appendOwnerRecord(b, "s", Owner{Identity: "id", Scope: "x", ScopeKnown: true})
	sealGroup(b)
	second := len(b)
	b = beginGroup(b, 2)
	b = appendStoredEvents(b, "t", []Event{{Type: TypeUserMessage, Message: &MessageRecord{Content: "m"}, Seq: 1}})
	b = appendDeleteRecord(b, "t")
	sealGroup(b[second:])
	return b
}
