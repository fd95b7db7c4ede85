package load

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Workload is one measured agent workload.
type Workload struct {
	// Name identifies the workload in reports, e.g. "single_c1_100B".
	Name string
	// Agents is the number of concurrent agent loops, each with its own connection.
	Agents int
	// BatchSize is the number of tool calls per batch (one model step).
	BatchSize int
	// ArgBytes is the length of each call's arguments JSON text.
	ArgBytes int
	// Warmup runs before the measured window; nothing in it is counted.
	Warmup time.Duration
	// Duration is the measured window.
	Duration time.Duration
}

// Validate reports a workload that cannot run.
func (w Workload) Validate() error {
	switch {
	case w.Agents < 1:
		return fmt.Errorf("load: workload %q: agents = %d, want >= 1", w.Name, w.Agents)
	case w.BatchSize < 1:
		return fmt.Errorf("load: workload %q: batch size = %d, want >= 1", w.Name, w.BatchSize)
	case w.ArgBytes < len(argsPrefix)+len(argsSuffix):
		return fmt.Errorf("load: workload %q: argument bytes = %d, want >= %d", w.Name, w.ArgBytes, len(argsPrefix)+len(argsSuffix))
	case w.Duration <= 0 || w.Warmup < 0:
		return fmt.Errorf("load: workload %q: warm-up %v and duration %v", w.Name, w.Warmup, w.Duration)
	}
	return nil
}

// Agent is one agent loop's connection to the system under test.
type Agent interface {
	// Do runs one batch of the workload's calls and returns once every result is in.
	// Any tool or transport failure is an error.
	Do(ctx context.Context) error
	// Close releases the connection.
	Close() error
}

// Dialer opens agent number i (0-based) for workload w.
type Dialer func(ctx context.Context, i int, w Workload) (Agent, error)

const (
	argsPrefix = `{"data":"`
	argsSuffix = `"}`
)

// Arguments returns the arguments JSON of the no-op tool, {"data": "x…"}, exactly size
// bytes long (size must be at least 11).
func Arguments(size int) string {
	n := max(size-len(argsPrefix)-len(argsSuffix), 0)
	return argsPrefix + strings.Repeat("x", n) + argsSuffix
}
