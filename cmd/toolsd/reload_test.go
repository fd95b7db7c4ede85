package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestSIGHUPDuringDrain: a SIGHUP that arrives while toolsd drains (a reload sent by
// a config manager as the service stops) must not kill the process: the drain goes on,
// the blocked call gets its result, and toolsd exits 0 as after SIGTERM alone.
func TestSIGHUPDuringDrain(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "toolsd.yaml")
	if err := os.WriteFile(cfg, []byte("timeouts: {shutdown: 1s}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	led := newLedger()
	view := newClientView()
	d := startDaemon(t, "-config", cfg, "-ephemeral")
	c := dial(t, d.addr)
	stop := runProvider(t, d.addr, led.tools()...)
	defer stop()
	r := view.run(c, batch("hup", 1, 0, "block:b"))
	waitFor(t, "the blocking call", func() bool { return led.isBlocked("hup/b") })

	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the drain to begin", func() bool { return len(d.logged("shutting down")) == 1 })
	if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	d.wait(t)
	if d.err != nil || d.cmd.ProcessState.ExitCode() != 0 {
		t.Errorf("toolsd after SIGTERM, then SIGHUP while draining, exited with %v (code %d), want 0", d.err, d.cmd.ProcessState.ExitCode())
	}
	if !waitDone(r) {
		t.Errorf("batch during shutdown ended with %v (settled %v), want settled", r.err, r.settled)
	}
	if len(d.logged("stopped")) != 1 {
		t.Error(`toolsd did not log "stopped"`)
	}
}
