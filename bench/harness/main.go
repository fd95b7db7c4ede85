package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "harness:", err)
		os.Exit(1)
	}
}

// config is the harness's command line.
type config struct {
	out       string
	quick     bool
	only      string
	workloads string
	runs      int
	paired    bool
	warmup    time.Duration
	duration  time.Duration
	timeout   time.Duration
	// Probe sizes (toolsd only).
	schemaTools, schemaCalls, idleStreams, inflightCalls int
	// Role mode: run as one server or provider process of a target.
	role, target string
}

func parseFlags(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("harness", flag.ContinueOnError)
	fs.StringVar(&c.out, "out", "bench/out", "directory for summary.json and summary.txt")
	fs.BoolVar(&c.quick, "quick", false, "smoke run: short windows, one repetition, small probes")
	fs.StringVar(&c.only, "only", "", "comma-separated subset of targets and probes ("+strings.Join(knownNames(), ",")+"); default all built in")
	fs.StringVar(&c.workloads, "workloads", "", "comma-separated subset of workloads ("+strings.Join(workloadNames(), ",")+")")
	fs.IntVar(&c.runs, "runs", 3, "repetitions of every workload (medians and min-max across them)")
	fs.BoolVar(&c.paired, "paired", false, "keep every target up through a workload and let them take turns in short windows, the order rotating every round "+
		"(runs default to 9 rounds of 0.3s warm-up + 1s window)")
	fs.DurationVar(&c.warmup, "warmup", time.Second, "warm-up before each measured window")
	fs.DurationVar(&c.duration, "duration", 3*time.Second, "measured window of each workload run")
	fs.DurationVar(&c.timeout, "timeout", 15*time.Minute, "hard limit for the whole benchmark")
	fs.IntVar(&c.schemaTools, "schema-tools", 10000, "tools registered for the Schemas probe")
	fs.IntVar(&c.schemaCalls, "schema-calls", 200, "timed Schemas calls")
	fs.IntVar(&c.idleStreams, "idle-streams", 1000, "idle provider streams for the memory probe")
	fs.IntVar(&c.inflightCalls, "inflight-calls", 500, "parked calls for the in-flight memory probe")
	fs.StringVar(&c.role, "role", "", "internal: run as this server or provider process")
	fs.StringVar(&c.target, "target", "", "internal: address a provider role connects to")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if c.paired {
		applyUnset(set, map[string]func(){
			"runs":     func() { c.runs = 9 },
			"warmup":   func() { c.warmup = 300 * time.Millisecond },
			"duration": func() { c.duration = time.Second },
		})
	}
	if c.quick {
		applyUnset(set, map[string]func(){
			"runs":           func() { c.runs = 1 },
			"warmup":         func() { c.warmup = 200 * time.Millisecond },
			"duration":       func() { c.duration = 700 * time.Millisecond },
			"schema-calls":   func() { c.schemaCalls = 50 },
			"idle-streams":   func() { c.idleStreams = 200 },
			"inflight-calls": func() { c.inflightCalls = 100 },
		})
	}
	if c.runs < 1 || c.duration <= 0 || c.warmup < 0 {
		return c, fmt.Errorf("runs %d, warm-up %v, duration %v: want runs >= 1 and a positive window", c.runs, c.warmup, c.duration)
	}
	if min(c.schemaTools, c.schemaCalls, c.idleStreams, c.inflightCalls) < 1 {
		return c, fmt.Errorf("schema-tools %d, schema-calls %d, idle-streams %d, inflight-calls %d: want every probe size >= 1",
			c.schemaTools, c.schemaCalls, c.idleStreams, c.inflightCalls)
	}
	return c, nil
}

// applyUnset runs the default of every flag the command line did not set: a mode's
// defaults never override what the user asked for.
func applyUnset(set map[string]bool, defaults map[string]func()) {
	for name, apply := range defaults {
		if !set[name] {
			apply()
		}
	}
}

func run(args []string) error {
	c, err := parseFlags(args)
	if err != nil {
		return err
	}
	if c.role != "" {
		return runRole(c)
	}
	p, err := newPlan(c)
	if err != nil {
		return err
	}
	// The results go there after minutes of runs: a directory that cannot be made fails now.
	if err := os.MkdirAll(c.out, 0o755); err != nil {
		return fmt.Errorf("harness: -out: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	defer runCleanups()
	return runPlan(ctx, p, c.out, os.Stdout)
}
