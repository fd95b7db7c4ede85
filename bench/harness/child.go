package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
)

const (
	// readyTimeout bounds a child's start-up.
	readyTimeout = 30 * time.Second
	// stopGrace is how long a child may take to exit after SIGTERM before it is killed.
	stopGrace = 5 * time.Second
	// readyPrefix starts the one line a role prints on stdout once it serves.
	readyPrefix = "READY "
)

// readyInfo is what a role announces on its READY line.
type readyInfo struct {
	// Addr is the gRPC address or the MCP endpoint URL agents use.
	Addr string `json:"addr,omitempty"`
	// Metrics is the URL of a Prometheus text endpoint with go_memstats_mallocs_total.
	Metrics string `json:"metrics,omitempty"`
}

// child is a process the harness started. It dies with the harness (SIGKILL on parent
// death) and its stdin closing tells a role to exit.
type child struct {
	name  string
	cmd   *exec.Cmd
	stdin io.Closer
	ready chan readyInfo
	done  chan struct{} // closed when the process has exited
	err   error         // exit error, valid after done
}

// startChild starts path with args; a READY line on its stdout, if any, reaches c.ready.
func startChild(name, path string, args ...string) (*child, error) {
	return startChildLogging(name, path, os.Stderr, args...)
}

// startChildLogging is startChild with the child's stderr going to stderr.
func startChildLogging(name, path string, stderr io.Writer, args ...string) (*child, error) {
	c := &child{name: name, ready: make(chan readyInfo, 1), done: make(chan struct{})}
	c.cmd = exec.Command(path, args...)
	c.cmd.Stdout = &readyWriter{ready: c.ready}
	c.cmd.Stderr = stderr
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := c.cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("harness: %s: %w", name, err)
	}
	c.stdin = stdin
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("harness: start %s: %w", name, err)
	}
	go func() {
		c.err = c.cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

// startRole re-executes the harness binary as role (which prints a READY line).
func startRole(ctx context.Context, role string, args ...string) (*child, readyInfo, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, readyInfo{}, fmt.Errorf("harness: %w", err)
	}
	c, err := startChild(role, self, append([]string{"-role", role}, args...)...)
	if err != nil {
		return nil, readyInfo{}, err
	}
	info, err := c.awaitReady(ctx)
	if err != nil {
		c.stop()
		return nil, readyInfo{}, err
	}
	return c, info, nil
}

func (c *child) pid() int { return c.cmd.Process.Pid }

// awaitReady waits for the READY line, the process's exit, ctx or readyTimeout.
func (c *child) awaitReady(ctx context.Context) (readyInfo, error) {
	t := time.NewTimer(readyTimeout)
	defer t.Stop()
	select {
	case info := <-c.ready:
		return info, nil
	case <-c.done:
		return readyInfo{}, fmt.Errorf("harness: %s exited before it was ready: %w", c.name, c.err)
	case <-t.C:
		return readyInfo{}, fmt.Errorf("harness: %s not ready after %v", c.name, readyTimeout)
	case <-ctx.Done():
		return readyInfo{}, ctx.Err()
	}
}

// stop asks the process to exit (stdin closed, SIGTERM), kills it after stopGrace, and
// waits for it.
func (c *child) stop() {
	_ = c.stdin.Close()
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(stopGrace)
	defer t.Stop()
	select {
	case <-c.done:
	case <-t.C:
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// readyWriter takes a child's stdout: it parses the first READY line and drops the rest.
type readyWriter struct {
	ready chan<- readyInfo
	line  []byte
	seen  bool
}

func (w *readyWriter) Write(p []byte) (int, error) {
	if w.seen {
		return len(p), nil
	}
	w.line = append(w.line, p...)
	for {
		i := bytes.IndexByte(w.line, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := w.line[:i]
		w.line = w.line[i+1:]
		if rest, ok := bytes.CutPrefix(line, []byte(readyPrefix)); ok {
			var info readyInfo
			if err := json.Unmarshal(rest, &info); err != nil {
				return 0, errors.Join(errors.New("harness: bad READY line"), err)
			}
			w.seen = true
			w.ready <- info
			return len(p), nil
		}
	}
}
