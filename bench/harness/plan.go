package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/toolsd/toolsd/bench/load"
)

// Workload names that summary.json's headline ratios refer to.
const (
	wSingleC1     = "single_c1_100B"
	wSingleC1Big  = "single_c1_16KiB"
	wSingleC64    = "single_c64_100B"
	wBatch8C8     = "batch8_c8_100B"
	wBatch8C64    = "batch8_c64_100B"
	argSmall, big = 100, 16 << 10
)

// allWorkloads is the workload matrix, in run order.
func allWorkloads(warmup, d time.Duration) []load.Workload {
	w := func(name string, agents, batch, args int) load.Workload {
		return load.Workload{Name: name, Agents: agents, BatchSize: batch, ArgBytes: args, Warmup: warmup, Duration: d}
	}
	return []load.Workload{
		w(wSingleC1, 1, 1, argSmall),
		w(wSingleC1Big, 1, 1, big),
		w(wSingleC64, 64, 1, argSmall),
		w(wBatch8C8, 8, 8, argSmall),
		w(wBatch8C64, 64, 8, argSmall),
	}
}

func workloadNames() []string {
	var names []string
	for _, w := range allWorkloads(0, 0) {
		names = append(names, w.Name)
	}
	return names
}

// plan is what one harness run measures.
type plan struct {
	c         config
	targets   []Target
	workloads []load.Workload
	probes    probeFunc
	notes     []string
}

func newPlan(c config) (*plan, error) {
	p := &plan{c: c}
	want, err := selection(c.only, knownNames())
	if err != nil {
		return nil, err
	}
	for _, t := range targets {
		if want[t.Name()] {
			p.targets = append(p.targets, t)
			delete(want, t.Name())
		}
	}
	if want[nameProbes] && probes != nil {
		p.probes = probes
		delete(want, nameProbes)
	}
	for _, name := range knownNames() {
		if want[name] {
			p.notes = append(p.notes, fmt.Sprintf("%s not measured: no target of that name is registered in this harness", name))
		}
	}
	wantW, err := selection(c.workloads, workloadNames())
	if err != nil {
		return nil, err
	}
	for _, w := range allWorkloads(c.warmup, c.duration) {
		if wantW[w.Name] {
			p.workloads = append(p.workloads, w)
		}
	}
	return p, nil
}

// selection parses a comma-separated subset of valid; empty means all.
func selection(list string, valid []string) (map[string]bool, error) {
	set := map[string]bool{}
	if list == "" {
		for _, v := range valid {
			set[v] = true
		}
		return set, nil
	}
	for name := range strings.SplitSeq(list, ",") {
		name = strings.TrimSpace(name)
		if !slices.Contains(valid, name) {
			return nil, fmt.Errorf("unknown name %q (valid: %s)", name, strings.Join(valid, ","))
		}
		set[name] = true
	}
	return set, nil
}

// execute runs every repetition, interleaving targets within each workload so that drift
// of the machine hits every target alike, then the probes. With -paired the targets
// stay up through a workload and take turns window by window instead (see [plan.rounds]).
// A failed run or probe does not stop the others: the summary holds what was measured,
// each failure in its notes, and is returned with the failures. A run stopped by ctx
// (-timeout, a signal) ends the runs there and skips the probes.
func (p *plan) execute(ctx context.Context) (*summary, error) {
	samples := map[string][]sample{} // by workload
	errs := p.measureAll(ctx, samples)
	s := newSummary(p.c, p.workloads, samples)
	s.Notes = append(s.Notes, p.notes...)
	if p.c.paired {
		s.Notes = append(s.Notes, fmt.Sprintf("paired: targets stayed up through each workload and took turns in %d rounds, the order rotating", p.c.runs))
	}
	for _, err := range errs {
		s.Notes = append(s.Notes, fmt.Sprintf("run failed (its samples are missing; a ratio missing a run of either side is null): %v", err))
	}
	if p.probes != nil {
		if err := p.probe(ctx, s); err != nil {
			errs = append(errs, err)
		}
	}
	return s, errors.Join(errs...)
}

// probe runs the probes into s. Once ctx is done (-timeout or a signal stopped the
// runs) they are skipped instead, and s says so. A failure is in s's notes and returned.
func (p *plan) probe(ctx context.Context, s *summary) error {
	if err := context.Cause(ctx); err != nil {
		s.Notes = append(s.Notes, fmt.Sprintf("probes skipped, the run was stopped (a probe not measured is null): %v", err))
		return fmt.Errorf("probes skipped: %w", err)
	}
	fmt.Fprintln(os.Stderr, "probes: Schemas at scale, idle streams, in-flight calls")
	pr, err := p.probes(ctx, p.c)
	s.Schemas10kP50us, s.IdleStreamBytes, s.InflightCallBytes = pr.Schemas10kP50us, pr.IdleStreamBytes, pr.InflightCallBytes
	if err != nil {
		s.Notes = append(s.Notes, fmt.Sprintf("probes failed (a probe not measured is null): %v", err))
		return fmt.Errorf("probes: %w", err)
	}
	return nil
}

// measureAll runs the workloads of p into samples and returns the runs that failed. A
// failure does not stop the runs after it, unless ctx is done.
func (p *plan) measureAll(ctx context.Context, samples map[string][]sample) []error {
	var errs []error
	if p.c.paired {
		for _, w := range p.workloads {
			if err := p.rounds(ctx, w, samples); err != nil {
				errs = append(errs, err)
				if ctx.Err() != nil {
					return errs
				}
			}
		}
		return errs
	}
	// Each run of a workload starts one target later than the run before, as the paired
	// rounds do: a machine that drifts through a workload's runs then favours no target
	// in all of them.
	for rep := range p.c.runs {
		for _, w := range p.workloads {
			for i := range p.targets {
				t := p.targets[(i+rep)%len(p.targets)]
				s, err := measure(ctx, t, w)
				if err != nil {
					errs = append(errs, fmt.Errorf("%s on %s (run %d): %w", w.Name, t.Name(), rep+1, err))
					if ctx.Err() != nil {
						return errs
					}
					continue
				}
				p.progress(rep, w, s)
				samples[w.Name] = append(samples[w.Name], s)
			}
		}
	}
	return errs
}

// runPlan executes p and writes its summary into dir and its table to w. A run or probe
// that fails does not lose what was measured: the summary is written with the failure
// in its notes, and the failure is returned.
func runPlan(ctx context.Context, p *plan, dir string, w io.Writer) error {
	s, err := p.execute(ctx)
	return errors.Join(err, writeSummary(dir, s, w))
}

// rounds measures w paired: every target is started once and kept up, and each round
// gives every target one window, starting one target later than the round before.
// Windows seconds apart see the same machine, where fresh instances a workload apart
// may not (single-call latency here drifts by half from one minute to the next). The
// price: a durable target's log grows from one round to the next. An instance that
// fails to stop cleanly fails its rounds, as [measure] fails the run: its samples of w
// are left out.
func (p *plan) rounds(ctx context.Context, w load.Workload, samples map[string][]sample) (err error) {
	insts := make([]*Instance, len(p.targets))
	defer func() {
		for i, inst := range insts {
			if inst == nil {
				continue
			}
			if serr := inst.Stop(); serr != nil {
				err = errors.Join(err, fmt.Errorf("%s on %s: %w", w.Name, p.targets[i].Name(), serr))
				samples[w.Name] = slices.DeleteFunc(samples[w.Name], func(s sample) bool { return s.target == p.targets[i].Name() })
			}
		}
	}()
	for i, t := range p.targets {
		inst, err := t.Start(ctx)
		if err != nil {
			return fmt.Errorf("%s on %s: %w", w.Name, t.Name(), err)
		}
		insts[i] = inst
	}
	for r := range p.c.runs {
		for j := range p.targets {
			i := (j + r) % len(p.targets)
			s, err := measureOn(ctx, p.targets[i].Name(), insts[i], w)
			if err != nil {
				return fmt.Errorf("%s on %s (round %d): %w", w.Name, p.targets[i].Name(), r+1, err)
			}
			p.progress(r, w, s)
			samples[w.Name] = append(samples[w.Name], s)
		}
	}
	return nil
}

func (p *plan) progress(rep int, w load.Workload, s sample) {
	fmt.Fprintf(os.Stderr, "run %d/%d  %-16s %-15s p50 %8.0f µs  %9.0f calls/s\n",
		rep+1, p.c.runs, w.Name, s.target, us(s.result.P50), s.result.CallsPerSec)
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
