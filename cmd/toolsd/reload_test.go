package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/app"
	"github.com/toolsd/toolsd/internal/config"
)

// TestSIGHUPDuringDrain: a SIGHUP that arrives while toolsd drains (a reload sent by
// a config manager as the service stops) must not kill the process: the drain goes on,
// the blocked call gets its result, and toolsd exits 0 as after SIGTERM alone. The
// signal is logged as ignored, not reloaded.
func TestSIGHUPDuringDrain(t *testing.T) {
	cfg, _ := shutdownConfig(t, "1s")
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
	if !waitAbortedByShutdown(r) {
		t.Errorf("batch during shutdown ended with %v (settled %v), want settled, then UNAVAILABLE / SHUTTING_DOWN", r.err, r.settled)
	}
	if len(d.logged("stopped")) != 1 {
		t.Error(`toolsd did not log "stopped"`)
	}
	if n := len(d.logged("config reload ignored: SIGHUP arrived during shutdown")); n != 1 {
		t.Errorf("toolsd logged the SIGHUP it ignored while draining %d times, want once", n)
	}
}

// TestSIGHUPReloadsThePolicy: SIGHUP swaps the policy and names the other keys that
// changed; a bad file is refused, said so, and the running policy stays.
func TestSIGHUPReloadsThePolicy(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "toolsd.yaml")
	write := func(text string) {
		t.Helper()
		if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	hup := func(d *daemon) {
		t.Helper()
		if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	code := func(c toolsdv1.ToolServiceClient, session string) string {
		t.Helper()
		view := newClientView()
		r := view.run(c, batch(session, 1, 0, "fast:x"))
		if !waitDone(r) {
			t.Fatalf("batch %s = %v, want settled", session, r.err)
		}
		return view.results[session]["x"].GetError().GetCode()
	}
	write("policy:\n  rules:\n    - {tool: fast, decision: deny, reason: not today}\n")
	d := startDaemon(t, "-config", cfg, "-ephemeral")
	c := dial(t, d.addr)
	defer runProvider(t, d.addr, newLedger().tools()...)()
	if got := code(c, "before"); got != "DENIED" {
		t.Fatalf("fast before reload = %q, want DENIED", got)
	}

	write("policy:\n  rules:\n    - {tool: fast, decision: maybe}\n")
	hup(d)
	waitFor(t, "the refused reload", func() bool {
		return len(d.logged("config reload failed; keeping the running policy and credentials")) == 1
	})
	if got := code(c, "refused"); got != "DENIED" {
		t.Errorf("fast after a refused reload = %q, want DENIED (the old policy)", got)
	}

	write("scheduler: {max_parallel: 3}\n")
	hup(d)
	waitFor(t, "the reload", func() bool { return len(d.logged("policy reloaded")) == 1 })
	if got := code(c, "after"); got != "" {
		t.Errorf("fast after reload = %q, want success", got)
	}
	warned := d.logged("config keys a reload does not apply changed; they take effect at the next start")
	if len(warned) != 1 || fmt.Sprint(warned[0]["keys"]) != "[scheduler]" {
		t.Errorf("reload warnings = %v, want one naming [scheduler]", warned)
	}
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	d.wait(t)
}

// TestSIGHUPPendingAtShutdownIsIgnored: a SIGHUP that waits while shutdown begins (the
// reload loop busy with an earlier reload, say) is logged as ignored, as one arriving
// during the drain is, and not reloaded. The loop picked at random between the signal
// and the shutdown, so half of such signals reloaded the policy during the drain.
func TestSIGHUPPendingAtShutdownIsIgnored(t *testing.T) {
	path := filepath.Join(t.TempDir(), "toolsd.yaml")
	if err := os.WriteFile(path, []byte("listen: 127.0.0.1:0\nadmin_listen: \"\"\nsession: {store: memory}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.New(cfg, app.WithLogger(zap.NewNop()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := a.Run(ctx); err != nil {
			t.Error(err)
		}
	})
	loaded := *cfg
	for i := range 32 {
		ctx, shutdown := context.WithCancel(t.Context())
		shutdown()
		hup := make(chan os.Signal, 1)
		hup <- syscall.SIGHUP
		ran := make(chan struct{})
		core, logs := observer.New(zap.InfoLevel)
		done := make(chan struct{})
		go func() {
			defer close(done)
			reloadOnHUP(ctx, ran, hup, a, path, nil, &loaded, zap.New(core))
		}()
		waitFor(t, "the signal to be taken", func() bool { return len(hup) == 0 })
		close(ran)
		<-done
		if n := logs.FilterMessage("policy reloaded").Len(); n != 0 {
			t.Fatalf("#%d: a SIGHUP pending as shutdown began reloaded the policy", i)
		}
		if n := logs.FilterMessage(hupIgnored).Len(); n != 1 {
			t.Fatalf("#%d: %q logged %d times, want once", i, hupIgnored, n)
		}
	}
}
