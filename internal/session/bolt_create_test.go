package session

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
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

// TestCreateLogWithoutHardLinks: on a filesystem that refuses hard links (SMB/CIFS
// mounts, vfat, some FUSE filesystems) the log cannot be linked into place; it is
// created in place instead, as it was before the create-then-link, rather than every
// start failing on a data directory there.
func TestCreateLogWithoutHardLinks(t *testing.T) {
	for name, errno := range map[string]syscall.Errno{"EPERM": syscall.EPERM, "EOPNOTSUPP": syscall.EOPNOTSUPP} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			linkFile = func(oldname, newname string) error {
				return &os.LinkError{Op: "link", Old: oldname, New: newname, Err: errno}
			}
			t.Cleanup(func() { linkFile = os.Link })
			b, err := Open(dir)
			if err != nil {
				t.Fatalf("Open() where hard links are refused = %v, want the log created", err)
			}
			if _, err := b.Append(context.Background(), "s", Event{Type: TypeUserMessage, Message: &MessageRecord{Content: "hi"}}); err != nil {
				t.Errorf("Append() = %v", err)
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			b, err = Open(dir)
			if err != nil {
				t.Fatalf("Open() again = %v", err)
			}
			defer closeStore(t, b)
			if got, err := b.Read(context.Background(), "s", 1, 0); err != nil || len(got) != 1 {
				t.Errorf("Read(s) after reopening = %d events, %v; want the one appended", len(got), err)
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
		})
	}
}
