package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolsd/toolsd/bench/load"
)

// Roles of children that fail, run by this test binary as the harness runs its own.
const (
	roleExitOnConnect = "test-exit-on-connect"
	roleExitOnStop    = "test-exit-on-stop"
	roleHangOnStop    = "test-hang-on-stop"
	exitOnConnectMsg  = "test child exiting on its first connection"
	exitOnStopMsg     = "test child failing as it stops"
)

func init() {
	registerRole(roleExitOnConnect, runExitOnConnect)
	registerRole(roleExitOnStop, func(ctx context.Context, _ config, ready func(readyInfo)) error {
		ready(readyInfo{})
		<-ctx.Done()
		return errors.New(exitOnStopMsg)
	})
	registerRole(roleHangOnStop, func(_ context.Context, _ config, ready func(readyInfo)) error {
		signal.Ignore(syscall.SIGTERM)
		ready(readyInfo{})
		for { // until killed, stdin closed or not
			time.Sleep(time.Hour)
		}
	})
}

// runExitOnConnect serves a loopback port and exits 1 (its error, through TestMain) once
// a connection arrives: a server that dies in the middle of a run.
func runExitOnConnect(ctx context.Context, _ config, ready func(readyInfo)) error {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer lis.Close()
	ready(readyInfo{Addr: lis.Addr().String()})
	conn, err := lis.Accept()
	if err != nil {
		return err
	}
	_ = conn.Close()
	return errors.New(exitOnConnectMsg)
}

// dyingTarget is a target whose server exits 1 once its first agent connects; its agents'
// batches succeed without it, so only the harness watching its child can tell.
type dyingTarget struct{}

func (dyingTarget) Name() string { return "dying" }

func (dyingTarget) Start(ctx context.Context) (*Instance, error) {
	srv, info, err := startRole(ctx, roleExitOnConnect)
	if err != nil {
		return nil, err
	}
	dial := func(ctx context.Context, _ int, _ load.Workload) (load.Agent, error) {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", info.Addr)
		if err != nil {
			return nil, err
		}
		return nopAgent{conn}, nil
	}
	return &Instance{Dial: dial, Stop: srv.stop, procs: []*child{srv}}, nil
}

// nopAgent's batches succeed at once.
type nopAgent struct{ conn net.Conn }

func (nopAgent) Do(context.Context) error { return nil }
func (a nopAgent) Close() error           { return a.conn.Close() }

// TestChildExitFailsRun: a server that exits during a run fails it, naming the child,
// its exit status and the end of its stderr, not a run measured on a half-dead setup.
func TestChildExitFailsRun(t *testing.T) {
	w := load.Workload{Name: "dying", Agents: 1, BatchSize: 1, ArgBytes: 100, Duration: 50 * time.Millisecond}
	s, err := measure(t.Context(), dyingTarget{}, w)
	if err == nil {
		t.Fatalf("measure(dying) = %+v, nil, want the server's exit", s.result)
	}
	for _, want := range []string{roleExitOnConnect, "exit status 1", exitOnConnectMsg} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("measure(dying) error = %q, want it to say %q", err, want)
		}
	}
}

// TestChildStop: stop reports a child that exits non-zero when stopped or has to be
// killed, and not one that exits 0 or dies of the stop's SIGTERM.
func TestChildStop(t *testing.T) {
	failing, _, err := startRole(t.Context(), roleExitOnStop)
	if err != nil {
		t.Fatal(err)
	}
	err = failing.stop()
	for _, want := range []string{roleExitOnStop, "exit status 1", exitOnStopMsg} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("stop(%s) = %v, want an error saying %q", roleExitOnStop, err, want)
		}
	}
	hung, _, err := startRole(t.Context(), roleHangOnStop)
	if err != nil {
		t.Fatal(err)
	}
	err = hung.stop()
	for _, want := range []string{roleHangOnStop, "killed"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("stop(%s) = %v, want an error saying %q", roleHangOnStop, err, want)
		}
	}
	clean, _, err := startRole(t.Context(), "relay-server")
	if err != nil {
		t.Fatal(err)
	}
	if err := clean.stop(); err != nil {
		t.Errorf("stop(relay-server) = %v, want nil", err)
	}
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep program to die of SIGTERM")
	}
	term, err := startChild("sleep", sleep, "1000")
	if err != nil {
		t.Fatal(err)
	}
	if err := term.stop(); err != nil {
		t.Errorf("stop(sleep) = %v, want nil for a death by SIGTERM", err)
	}
}

// stopChecked stops c and fails tb if c did not exit cleanly.
func stopChecked(tb testing.TB, c *child) {
	tb.Helper()
	if err := c.stop(); err != nil {
		tb.Error(err)
	}
}

// TestFileTail: a failure quotes the end of a child's log file without reading a long
// run's whole log.
func TestFileTail(t *testing.T) {
	dir := t.TempDir()
	long := filepath.Join(dir, "long.log")
	data := make([]byte, 3*tailBytes+5)
	for i := range data {
		data[i] = byte('a' + i%26)
	}
	if err := os.WriteFile(long, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := fileTail(long, tailBytes); !bytes.Equal(got, data[len(data)-tailBytes:]) {
		t.Errorf("fileTail(long) = %d bytes, want the last %d of the file", len(got), tailBytes)
	}
	short := filepath.Join(dir, "short.log")
	if err := os.WriteFile(short, []byte("panic: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := string(fileTail(short, tailBytes)); got != "panic: x\n" {
		t.Errorf("fileTail(short) = %q, want the whole file", got)
	}
	if got := fileTail(filepath.Join(dir, "missing.log"), tailBytes); got != nil {
		t.Errorf("fileTail(missing) = %q, want nothing", got)
	}
}
