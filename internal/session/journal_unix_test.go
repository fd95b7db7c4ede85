//go:build unix

package session

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestLockErrorSaysWhy: only a lock another process holds is reported as one; a lock
// the file system cannot take (ENOLCK on some network file systems) says so.
func TestLockErrorSaysWhy(t *testing.T) {
	for _, tc := range []struct {
		err       error
		want, not string
	}{
		{syscall.EWOULDBLOCK, "/d/toolsd.lock is locked by another process", "cannot lock"},
		{syscall.ENOLCK, "cannot lock /d/toolsd.lock", "another process"},
	} {
		err := lockError("/d/toolsd.lock", tc.err)
		if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), tc.not) {
			t.Errorf("lockError(%v) = %v, want it to wrap the errno, say %q and not %q", tc.err, err, tc.want, tc.not)
		}
	}
}

// TestLogThatIsNotAFileIsRefused: a named pipe where a store's log file should be is
// refused at Open, naming it, before it is read: bbolt's check of its meta pages
// opened it to read, which held Open until something opened the pipe to write.
func TestLogThatIsNotAFileIsRefused(t *testing.T) {
	for name, open := range writers() {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			file := map[string]string{"Bolt": FileName, "Journal": JournalFileName}[name]
			path := filepath.Join(dir, file)
			if err := syscall.Mkfifo(path, 0o600); err != nil {
				t.Skipf("mkfifo: %v", err)
			}
			done := make(chan error, 1)
			go func() {
				s, err := open(dir, WithLockTimeout(time.Second))
				if err == nil {
					_ = s.Close()
				}
				done <- err
			}()
			var err error
			select {
			case err = <-done:
			case <-time.After(time.Minute):
				// Let Open go on (the pipe opened to write, then closed), so that no
				// goroutine outlives the test.
				if w, err := os.OpenFile(path, os.O_RDWR, 0); err == nil {
					_ = w.Close()
				}
				t.Fatalf("Open() still opening the pipe after a minute (then: %v), want it refused", <-done)
			}
			if err == nil || !strings.Contains(err.Error(), path+" is not a regular file") {
				t.Errorf("Open() = %v, want it to refuse %s as not a regular file", err, file)
			}
		})
	}
}
