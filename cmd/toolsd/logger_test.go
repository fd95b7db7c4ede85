package main

import (
	"bufio"
	"os"
	"path/filepath"
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
			stderr := os.Stderr
			os.Stderr = f // zap's "stderr" sink is os.Stderr as Build runs
			log, err := newLogger(config.Log{Level: "info", Format: format})
			os.Stderr = stderr
			if err != nil {
				t.Fatalf("newLogger(%s) = %v", format, err)
			}
			for range lines {
				log.Info("tool call")
			}
			_ = log.Sync()
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
