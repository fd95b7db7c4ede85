package session_test

import (
	"errors"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/toolsd/toolsd/internal/session"
)

// A commit that fails in bbolt itself stops the store: what the disk holds after a
// failed write is unknown, and bbolt may already show the failed transaction through
// its mmap. The failure is real: RLIMIT_FSIZE makes the file's next growth fail with
// EFBIG. The limit is the process's, so this test must not run in parallel.
func TestBoltStopsAfterFailedCommit(t *testing.T) {
	dir := t.TempDir()
	core, logs := observer.New(zapcore.ErrorLevel)
	clock := newClock()
	s := openBolt(t, dir, session.WithLogger(zap.New(core)), session.WithClock(clock.Now),
		session.WithRetention(time.Hour, 0), session.WithSweepInterval(0))
	ctx := t.Context()
	mustAppend(t, s, "kept", messageEvent("before", 0))
	if _, err := s.ClaimOwner(ctx, "kept", session.Owner{Identity: "alice"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Stopped():
		t.Fatalf("Stopped() is closed before any failure (StopCause() = %v)", s.StopCause())
	default:
	}
	limitFileSize(t, filepath.Join(dir, session.FileName))

	big := strings.Repeat("x", 4<<10)
	var failed error
	for i := 0; i < 10_000 && failed == nil; i++ {
		_, failed = s.Append(ctx, "grow", messageEvent(big, 0))
	}
	if !errors.Is(failed, session.ErrStopped) || !strings.Contains(failed.Error(), syscall.EFBIG.Error()) {
		t.Fatalf("Append() past RLIMIT_FSIZE = %v, want ErrStopped wrapping %q", failed, syscall.EFBIG.Error())
	}
	restoreFileSize(t)
	// Told without a request too: toolsd's readiness watches this.
	select {
	case <-s.Stopped():
	default:
		t.Error("Stopped() is not closed after the failed commit")
	}
	if err := s.StopCause(); !errors.Is(err, session.ErrStopped) || !strings.Contains(err.Error(), syscall.EFBIG.Error()) {
		t.Errorf("StopCause() = %v, want ErrStopped wrapping %q", err, syscall.EFBIG.Error())
	}

	if _, err := s.Append(ctx, "kept", messageEvent("after", 0)); !errors.Is(err, session.ErrStopped) {
		t.Errorf("Append() after the failed commit = %v, want ErrStopped", err)
	}
	if _, err := s.ClaimOwner(ctx, "new", session.Owner{Identity: "bob"}); !errors.Is(err, session.ErrStopped) {
		t.Errorf("ClaimOwner() after the failed commit = %v, want ErrStopped", err)
	}
	if _, err := s.Sweep(clock.Now().Add(2 * time.Hour)); !errors.Is(err, session.ErrStopped) {
		t.Errorf("Sweep() after the failed commit = %v, want ErrStopped", err)
	}
	// Nor is anything read: a failed commit may already show through bbolt's mmap.
	if evs, err := s.Read(ctx, "kept", 1, 0); !errors.Is(err, session.ErrStopped) {
		t.Errorf("Read(kept) after the failed commit = %d events, %v; want ErrStopped", len(evs), err)
	}
	if o, ok, err := s.Owner(ctx, "kept"); !errors.Is(err, session.ErrStopped) {
		t.Errorf("Owner(kept) after the failed commit = %+v, %v, %v; want ErrStopped", o, ok, err)
	}
	if n := logs.FilterMessageSnippet("stopped").Len(); n != 1 || logs.Len() != 1 {
		t.Errorf("error log lines = %v, want one saying the store stopped", logs.All())
	}
}

// limitFileSize sets RLIMIT_FSIZE to path's current size, so that growing it fails
// with EFBIG (SIGXFSZ ignored); restoreFileSize, also run at cleanup, lifts it.
func limitFileSize(t *testing.T, path string) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Skipf("Getrlimit(RLIMIT_FSIZE) = %v", err)
	}
	signal.Ignore(syscall.SIGXFSZ)
	savedFileSize = &old
	t.Cleanup(func() { restoreFileSize(t); signal.Reset(syscall.SIGXFSZ) })
	lim := old
	lim.Cur = uint64(st.Size())
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		t.Skipf("Setrlimit(RLIMIT_FSIZE) = %v", err)
	}
}

var savedFileSize *syscall.Rlimit

func restoreFileSize(t *testing.T) {
	t.Helper()
	if savedFileSize == nil {
		return
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, savedFileSize); err != nil {
		t.Fatalf("restore RLIMIT_FSIZE: %v", err)
	}
	savedFileSize = nil
}

// A watch that is tailing when a failed commit stops the store ends with ErrStopped,
// as a watch begun afterwards does; it used to wait on for commits that never came,
// so its client took the session for idle while every batch in it failed.
func TestBoltStopEndsLiveWatches(t *testing.T) {
	dir := t.TempDir()
	s := openBolt(t, dir, session.WithLogger(zap.NewNop()))
	ctx := t.Context()
	mustAppend(t, s, "watched", messageEvent("before", 0))
	got := make(chan session.Event, 16)
	done := make(chan error, 1)
	go func() {
		done <- s.Watch(ctx, "watched", 1, func(ev session.Event) error { got <- ev; return nil })
	}()
	select {
	case <-got: // replayed: the watch now tails
	case <-time.After(10 * time.Second):
		t.Fatal("Watch() replayed nothing within 10s")
	}
	limitFileSize(t, filepath.Join(dir, session.FileName))
	big := strings.Repeat("x", 4<<10)
	var failed error
	for i := 0; i < 10_000 && failed == nil; i++ {
		_, failed = s.Append(ctx, "grow", messageEvent(big, 0))
	}
	restoreFileSize(t)
	if !errors.Is(failed, session.ErrStopped) {
		t.Fatalf("Append() past RLIMIT_FSIZE = %v, want ErrStopped", failed)
	}
	select {
	case err := <-done:
		if !errors.Is(err, session.ErrStopped) {
			t.Errorf("live Watch() after the failed commit = %v, want ErrStopped", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("live Watch() still running 10s after the store stopped")
	}
}
