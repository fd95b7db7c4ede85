//go:build unix

package session

import (
	"errors"
	"strings"
	"syscall"
	"testing"
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
