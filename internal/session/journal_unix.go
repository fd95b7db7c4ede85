//go:build unix

package session

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// lockFile opens path and takes an exclusive flock on it, waiting up to timeout for
// another process to release it. Closing the file releases the lock.
func lockFile(path string, timeout time.Duration) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("session: open lock file: %w", err)
	}
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			_ = f.Close()
			return nil, lockError(path, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// lockError says why path could not be locked: held by another process, or a failure of
// the lock itself (ENOLCK on a network file system that does not support flock).
func lockError(path string, err error) error {
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return fmt.Errorf("session: %s is locked by another process (is another toolsd running?): %w", path, err)
	}
	return fmt.Errorf("session: cannot lock %s: %w", path, err)
}
