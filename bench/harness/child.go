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
	"slices"
	"sync"
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
	// tailBytes is how much of a failed child's stderr its error quotes.
	tailBytes = 4096
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
	// tail returns the end of the child's stderr, which its failure quotes.
	tail func() []byte
	// reported is set once earlyExit has reported the process's exit.
	reported bool
}

// startChild starts path with args; a READY line on its stdout, if any, reaches c.ready.
// Its stderr goes to the harness's, the last tailBytes of it kept for its failure.
func startChild(name, path string, args ...string) (*child, error) {
	tail := &tailBuffer{}
	return startChildTo(name, path, io.MultiWriter(os.Stderr, tail), tail.bytes, args...)
}

// startChildLogging is startChild with the child's stderr going to log, a file whose
// end its failure quotes. The child writes to the file itself: a busy log does not pass
// through the harness process, whose CPU time is measured.
func startChildLogging(name, path string, log *os.File, args ...string) (*child, error) {
	tail := func() []byte { return fileTail(log.Name(), tailBytes) }
	return startChildTo(name, path, log, tail, args...)
}

// fileTail is the last n bytes of the file at path (what it holds, if less; nothing if
// it cannot be read): a long run's log may be hundreds of megabytes.
func fileTail(path string, n int64) []byte {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	if err != nil {
		return nil
	}
	off := max(st.Size()-n, 0)
	b := make([]byte, st.Size()-off)
	k, _ := f.ReadAt(b, off)
	return b[:k]
}

func startChildTo(name, path string, stderr io.Writer, tail func() []byte, args ...string) (*child, error) {
	c := &child{name: name, ready: make(chan readyInfo, 1), done: make(chan struct{}), tail: tail}
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
		_ = c.stop() // err says why it is not ready
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
		return readyInfo{}, c.failure("exited before it was ready")
	case <-t.C:
		return readyInfo{}, fmt.Errorf("harness: %s not ready after %v", c.name, readyTimeout)
	case <-ctx.Done():
		return readyInfo{}, ctx.Err()
	}
}

// stop asks the process to exit (stdin closed, SIGTERM), kills it after stopGrace, and
// waits for it. It reports a process that had exited before it was told to (unless
// [child.earlyExit] did already), that had to be killed, or that exited non-zero other
// than by the stop's SIGTERM. Call it once.
func (c *child) stop() error {
	select {
	case <-c.done:
		return c.earlyExit()
	default:
	}
	_ = c.stdin.Close()
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(stopGrace)
	defer t.Stop()
	select {
	case <-c.done:
	case <-t.C:
		_ = c.cmd.Process.Kill()
		<-c.done
		return c.failure(fmt.Sprintf("did not exit within %v of SIGTERM and was killed", stopGrace))
	}
	if c.err == nil || signaled(c.err, syscall.SIGTERM) {
		return nil
	}
	return c.failure("exited when stopped")
}

// earlyExit reports a process that exited before it was stopped: whatever was measured
// from then on measured a half-dead setup. It is nil while the process runs, and after
// it has reported the exit once.
func (c *child) earlyExit() error {
	select {
	case <-c.done:
	default:
		return nil
	}
	if c.reported {
		return nil
	}
	c.reported = true
	return c.failure("exited before it was stopped")
}

// failure names the child, how it exited and the end of its stderr.
func (c *child) failure(what string) error {
	status := c.err
	if status == nil {
		status = errors.New("exit status 0")
	}
	return fmt.Errorf("harness: %s %s: %w\n%s's stderr ends:\n%s", c.name, what, status, c.name, c.tail())
}

// signaled reports whether err is the exit of a process killed by sig.
func signaled(err error, sig syscall.Signal) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}

// tailBuffer keeps the last tailBytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	t.buf = t.buf[max(len(t.buf)-tailBytes, 0):]
	return len(p), nil
}

func (t *tailBuffer) bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.buf)
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
