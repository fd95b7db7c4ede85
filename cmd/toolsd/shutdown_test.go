package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestSIGTERMDrainsAndExitsZero sends SIGTERM to the real binary while a call blocks:
// the call is aborted at the shutdown deadline and its result reaches the client and the
// log, the process exits 0, and a restart finds nothing to recover.
func TestSIGTERMDrainsAndExitsZero(t *testing.T) {
	cfg, dataDir := shutdownConfig(t, "300ms")
	led := newLedger()
	view := newClientView()

	d := startDaemon(t, "-config", cfg, "-data-dir", dataDir)
	c := dial(t, d.addr)
	stop := runProvider(t, d.addr, led.tools()...)
	r := view.run(c, batch("term", 1, 0, "fast:a", "block:b"))
	waitFor(t, "the blocking call", func() bool { return view.received("term", "a") && led.isBlocked("term/b") })

	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	d.wait(t)
	if d.err != nil || d.cmd.ProcessState.ExitCode() != 0 {
		t.Errorf("toolsd after SIGTERM exited with %v (code %d), want 0", d.err, d.cmd.ProcessState.ExitCode())
	}
	if !waitAbortedByShutdown(r) {
		t.Errorf("batch during shutdown ended with %v (settled %v), want settled, then UNAVAILABLE / SHUTTING_DOWN", r.err, r.settled)
	}
	if got := view.results["term"]["b"].GetError().GetCode(); got != "ABORTED" {
		t.Errorf("blocking call's result code = %q, want ABORTED", got)
	}
	if len(d.logged("stopped")) != 1 {
		t.Error(`toolsd did not log "stopped"`)
	}
	stop()
	view.wg.Wait()

	d2 := startDaemon(t, "-config", cfg, "-data-dir", dataDir)
	if n := recoveredLogged(t, d2); n != 0 {
		t.Errorf("restart after SIGTERM recovered %d calls, want 0 (a clean shutdown closes every call)", n)
	}
	c2 := dial(t, d2.addr)
	recovered := verifyLog(t, c2, view, led, led.snapshot())
	if len(recovered) != 0 {
		t.Errorf("recovered results after a clean shutdown: %v, want none", recovered)
	}
	if err := d2.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	d2.wait(t)
	if code := d2.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("idle toolsd after SIGTERM exited with code %d, want 0", code)
	}
}

// TestSecondSignalExitsAtOnce: a second SIGTERM while toolsd drains ends the process at
// once (exit code 128+15) instead of waiting out the shutdown timeout; as after a
// crash, the next start gives the call that was still running its result.
func TestSecondSignalExitsAtOnce(t *testing.T) {
	cfg, dataDir := shutdownConfig(t, "1h")
	led := newLedger()
	view := newClientView()

	d := startDaemon(t, "-config", cfg, "-data-dir", dataDir)
	c := dial(t, d.addr)
	stop := runProvider(t, d.addr, led.tools()...)
	defer stop()
	view.run(c, batch("twice", 1, 0, "block:b"))
	waitFor(t, "the blocking call", func() bool { return led.isBlocked("twice/b") })

	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the drain to begin", func() bool { return len(d.logged("shutting down")) == 1 })
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	d.wait(t)
	if code := d.cmd.ProcessState.ExitCode(); code != 128+int(syscall.SIGTERM) {
		t.Errorf("toolsd after a second SIGTERM exited with code %d, want %d", code, 128+int(syscall.SIGTERM))
	}
	if len(d.logged("second signal: exiting without finishing the drain")) != 1 {
		t.Error("toolsd did not say why it exited")
	}
	stop()
	view.wg.Wait()

	d2 := startDaemon(t, "-config", cfg, "-data-dir", dataDir)
	if n := recoveredLogged(t, d2); n != 1 {
		t.Errorf("restart recovered %d calls, want the 1 that was running", n)
	}
	if err := d2.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	d2.wait(t)
}

// shutdownConfig writes a config file with the shutdown timeout d and returns its path
// and a data directory beside it.
func shutdownConfig(t *testing.T, d string) (cfg, dataDir string) {
	t.Helper()
	dir := t.TempDir()
	cfg = filepath.Join(dir, "toolsd.yaml")
	if err := os.WriteFile(cfg, []byte("timeouts: {shutdown: "+d+"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg, filepath.Join(dir, "data")
}
