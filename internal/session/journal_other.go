//go:build !unix

package session

import (
	"fmt"
	"os"
	"time"
)

// lockFile opens path; without flock, nothing stops a second process.
func lockFile(path string, _ time.Duration) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("session: open lock file: %w", err)
	}
	return f, nil
}
