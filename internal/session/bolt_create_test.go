package session

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestOpenAfterCrashWhileCreatingTheLog: a first start killed after the log's file was
// created but before bbolt wrote its first pages must not leave a file the next start
// refuses as truncated.
func TestOpenAfterCrashWhileCreatingTheLog(t *testing.T) {
	dir := t.TempDir()
	errCrash := errors.New("killed")
	openFile = func(name string, flag int, perm os.FileMode) (*os.File, error) {
		f, err := os.OpenFile(name, flag, perm)
		if err != nil {
			return nil, err
		}
		_ = f.Close()
		return nil, errCrash // as if killed here: the file exists, bbolt wrote nothing
	}
	_, err := Open(dir)
	openFile = os.OpenFile
	if !errors.Is(err, errCrash) {
		t.Fatalf("Open() with the crash = %v, want it", err)
	}
	// What a crash during the rest of the creation leaves.
	if err := os.WriteFile(filepath.Join(dir, FileName+createSuffix+"123"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := Open(dir)
	if err != nil {
		t.Fatalf("Open() after a crash while creating the log = %v, want it to start", err)
	}
	if _, err := b.Append(context.Background(), "s", Event{Type: TypeUserMessage, Message: &MessageRecord{Content: "hi"}}); err != nil {
		t.Errorf("Append() = %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != FileName {
			t.Errorf("data directory holds %s besides %s", e.Name(), FileName)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, FileName)); err != nil {
		t.Error(err)
	}
}
