package main

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolsd/toolsd/internal/config"
)

// TestLoggerKeepsEveryCallLine: the call log promises one info line per call, so the
// production (JSON) logger must not sample repeated messages away, as zap's production
// preset does after the first 100 of a message per second.
func TestLoggerKeepsEveryCallLine(t *testing.T) {
	const lines = 500
	for _, format := range []string{"json", "console"} {
		t.Run(format, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "stderr")
			f, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = f.Close() }()
			log, closeLog, err := newLogger(config.Log{Level: "info", Format: format}, f)
			if err != nil {
				t.Fatalf("newLogger(%s) = %v", format, err)
			}
			for range lines {
				log.Info("tool call")
			}
			closeLog()
			r, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = r.Close() }()
			got := 0
			for sc := bufio.NewScanner(r); sc.Scan(); {
				got++
			}
			if got != lines {
				t.Errorf("newLogger(%s) wrote %d of %d identical info lines, want all", format, got, lines)
			}
		})
	}
}

// TestLoggerWritesWarningsAtOnce: info lines may wait in the log's buffer, but a
// warning is written before Warn returns, together with the lines logged before it.
func TestLoggerWritesWarningsAtOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stderr")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	log, closeLog, err := newLogger(config.Log{Level: "info", Format: "json"}, f)
	if err != nil {
		t.Fatal(err)
	}
	defer closeLog()
	log.Info("tool call")
	log.Warn("hook failed")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(string(b), "\n"); got != 2 || !strings.Contains(string(b), "tool call") || !strings.Contains(string(b), "hook failed") {
		t.Errorf("log file after Warn returned = %q, want the info and the warning lines", b)
	}
}

// TestLoggerWarnsOnPipeWithoutWriteError: stderr is usually a pipe (systemd, docker,
// kubectl logs), and fsync of a pipe fails with EINVAL. Flushing a warning must not
// report that as a write error, which zap writes to the error output as one more line
// ("write error: sync ...") after every warning.
func TestLoggerWarnsOnPipeWithoutWriteError(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close() }()
	log, closeLog, err := newLogger(config.Log{Level: "info", Format: "json"}, w)
	if err != nil {
		t.Fatal(err)
	}
	log.Info("tool call")
	log.Warn("hook failed")
	closeLog()
	_ = w.Close()
	var lines []string
	for sc := bufio.NewScanner(r); sc.Scan(); {
		lines = append(lines, sc.Text())
	}
	if len(lines) != 2 || !strings.Contains(lines[0], "tool call") || !strings.Contains(lines[1], "hook failed") {
		t.Errorf("log on a pipe = %q, want the info and the warning lines only", lines)
	}
}
