//go:build unix

package app_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolsd/toolsd/internal/app"
)

// TestPinFileThatIsAPipeRefusesStart: a named pipe in the pin file's place is refused
// naming it, as any file toolsd cannot read whole is; opening it to read held the start
// until something opened it to write.
func TestPinFileThatIsAPipeRefusesStart(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "pins.json")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		a, err := app.New(durableConfig(t, dir, "registry: {pinning: refuse}\n"))
		if err == nil {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			_ = a.Run(ctx)
		}
		done <- err
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		// Let the start go on (the pipe opened for writing, then closed: empty), so that
		// no goroutine outlives the test.
		if w, err := os.OpenFile(path, os.O_RDWR, 0); err == nil {
			_ = w.Close()
		}
		t.Fatalf("app.New() still opening the pipe after a minute (then: %v), want it refused", <-done)
	}
	if err == nil || !strings.Contains(err.Error(), "pins.json") || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("app.New() = %v, want it to refuse pins.json as not a regular file", err)
	}
}
