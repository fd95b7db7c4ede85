package main

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolsd/toolsd/bench/load"
)

// smokeWindow is the measured window of these tests' workloads, which only need a batch
// to complete in it: an agent whose batches succeed at once completes none in a window
// of 10 or 20 ms when a loaded machine keeps its goroutine off the CPU for that long,
// and the run fails with an empty window.
const smokeWindow = 100 * time.Millisecond

// inProcessTarget is a target without processes whose batches succeed at once.
type inProcessTarget struct{ name string }

func (t inProcessTarget) Name() string { return t.name }

func (inProcessTarget) Start(context.Context) (*Instance, error) {
	dial := func(context.Context, int, load.Workload) (load.Agent, error) { return okAgent{}, nil }
	return &Instance{Dial: dial, Stop: func() error { return nil }}, nil
}

// okAgent's batches succeed at once.
type okAgent struct{}

func (okAgent) Do(context.Context) error { return nil }
func (okAgent) Close() error             { return nil }

// TestProbeFailureKeepsWorkloads: the probes run last; one that fails still leaves
// summary.json written with the workloads measured before it, the probes that did
// measure, and the failure in its notes, and the run fails.
func TestProbeFailureKeepsWorkloads(t *testing.T) {
	errProbe := errors.New("idle_stream_bytes: toolsd exited")
	p := &plan{
		c:         config{runs: 1},
		targets:   []Target{inProcessTarget{nameRelay}, inProcessTarget{nameToolsd}},
		workloads: []load.Workload{{Name: wSingleC1, Agents: 1, BatchSize: 1, ArgBytes: argSmall, Duration: smokeWindow}},
		probes: func(context.Context, config) (probeResults, error) {
			return probeResults{Schemas10kP50us: ptr(1234)}, errProbe
		},
	}
	dir := t.TempDir()
	if err := runPlan(t.Context(), p, dir, io.Discard); !errors.Is(err, errProbe) {
		t.Errorf("runPlan() = %v, want the probe's failure", err)
	}
	m := readSummaryJSON(t, dir)
	if rows, _ := m["workloads"].([]any); len(rows) != 2 {
		t.Errorf("summary.json workloads = %v, want the 2 rows measured", m["workloads"])
	}
	if _, ok := m["ratio_p50_single_c1"].(float64); !ok {
		t.Errorf("summary.json ratio_p50_single_c1 = %v, want a number", m["ratio_p50_single_c1"])
	}
	if got, ok := m["schemas_10k_p50_us"].(float64); !ok || got != 1234 {
		t.Errorf("summary.json schemas_10k_p50_us = %v, want 1234", m["schemas_10k_p50_us"])
	}
	if v, ok := m["idle_stream_bytes"]; !ok || v != nil {
		t.Errorf("summary.json idle_stream_bytes = %v (present %v), want null", v, ok)
	}
	if notes, _ := m["notes"].([]any); len(notes) == 0 || !strings.Contains(notes[len(notes)-1].(string), errProbe.Error()) {
		t.Errorf("summary.json notes = %v, want the probe's failure", m["notes"])
	}
}

// TestToolsdProbesRunPastAFailure: a probe that fails (more tools than toolsd-bench.yaml
// admits in a scope) is named in the error and left null; the probes after it still run.
func TestToolsdProbesRunPastAFailure(t *testing.T) {
	c := config{schemaTools: 30000, schemaCalls: 1, idleStreams: 1, inflightCalls: 1}
	r, err := runToolsdProbes(t.Context(), c)
	if err == nil || !strings.Contains(err.Error(), "schemas_10k_p50_us") {
		t.Errorf("runToolsdProbes(30000 tools) error = %v, want the Schemas probe's failure", err)
	}
	if r.Schemas10kP50us != nil || r.IdleStreamBytes == nil || r.InflightCallBytes == nil {
		t.Errorf("runToolsdProbes(30000 tools) = %+v, want the Schemas probe null and the others measured", r)
	}
}

// failingTarget is an inProcessTarget that fails to start (start set), or whose agents'
// batches fail on the workload named failOn: in its first fails runs there, or in every
// run if fails is nil.
type failingTarget struct {
	name   string
	start  error
	failOn string
	fails  *int
}

var errAgent = errors.New("test agent's batch failed")

func (t failingTarget) Name() string { return t.name }

func (t failingTarget) Start(context.Context) (*Instance, error) {
	if t.start != nil {
		return nil, t.start
	}
	dial := func(_ context.Context, _ int, w load.Workload) (load.Agent, error) {
		if w.Name != t.failOn || (t.fails != nil && *t.fails == 0) {
			return okAgent{}, nil
		}
		if t.fails != nil {
			*t.fails--
		}
		return failAgent{}, nil
	}
	return &Instance{Dial: dial, Stop: func() error { return nil }}, nil
}

// failAgent's batches fail with errAgent.
type failAgent struct{}

func (failAgent) Do(context.Context) error { return errAgent }
func (failAgent) Close() error             { return nil }

// TestRunFailureKeepsWorkloads: a run that fails (a target that cannot start, an agent's
// error) does not stop the others: summary.json is written with every run measured
// before and after it and the failures in its notes, a ratio missing a run of either
// side is null, and the run fails.
func TestRunFailureKeepsWorkloads(t *testing.T) {
	errStart := errors.New("test target cannot start")
	journalFails := 1
	small := func(name string) load.Workload {
		return load.Workload{Name: name, Agents: 1, BatchSize: 1, ArgBytes: argSmall, Duration: smokeWindow}
	}
	p := &plan{
		c: config{runs: 2},
		targets: []Target{
			inProcessTarget{nameRelay},
			failingTarget{name: nameToolsd, failOn: wBatch8C64},
			failingTarget{name: nameToolsdDurable, start: errStart},
			failingTarget{name: nameToolsdJournal, failOn: wBatch8C64, fails: &journalFails},
		},
		workloads: []load.Workload{small(wSingleC1), small(wBatch8C64)},
	}
	dir := t.TempDir()
	err := runPlan(t.Context(), p, dir, io.Discard)
	if !errors.Is(err, errAgent) || !errors.Is(err, errStart) {
		t.Errorf("runPlan() = %v, want the agents' and the start's failures", err)
	}
	m := readSummaryJSON(t, dir)
	runs := map[string]float64{}
	rows, _ := m["workloads"].([]any)
	for _, r := range rows {
		r := r.(map[string]any)
		runs[r["workload"].(string)+" "+r["target"].(string)] = r["runs"].(float64)
	}
	want := map[string]float64{
		wSingleC1 + " " + nameRelay: 2, wSingleC1 + " " + nameToolsd: 2, wSingleC1 + " " + nameToolsdJournal: 2,
		wBatch8C64 + " " + nameRelay: 2, wBatch8C64 + " " + nameToolsdJournal: 1,
	}
	if diff := cmp.Diff(want, runs); diff != "" {
		t.Errorf("summary.json runs by workload and target (-want +got):\n%s", diff)
	}
	if _, ok := m["ratio_p50_single_c1"].(float64); !ok {
		t.Errorf("summary.json ratio_p50_single_c1 = %v, want a number", m["ratio_p50_single_c1"])
	}
	for _, k := range []string{"ratio_tput_batch8_c64", "ratio_tput_batch8_c64_durable", "ratio_tput_batch8_c64_journal"} {
		if v, ok := m[k]; !ok || v != nil {
			t.Errorf("summary.json %s = %v (present %v), want null", k, v, ok)
		}
	}
	notes, _ := m["notes"].([]any)
	var failed []string
	for _, n := range notes {
		if s := n.(string); strings.Contains(s, errAgent.Error()) || strings.Contains(s, errStart.Error()) {
			failed = append(failed, s)
		}
	}
	if len(failed) != 2+4+1 { // toolsd's 2 runs of batch8, durable's 4 starts, journal's first batch8
		t.Errorf("summary.json notes = %q, want the 7 failed runs", notes)
	}
}

// stopFailingTarget is an inProcessTarget whose instance fails to stop cleanly, as one
// whose process has to be killed does.
type stopFailingTarget struct{ name string }

var errStop = errors.New("test target killed after the stop grace")

func (t stopFailingTarget) Name() string { return t.name }

func (t stopFailingTarget) Start(ctx context.Context) (*Instance, error) {
	inst, err := inProcessTarget(t).Start(ctx)
	if err != nil {
		return nil, err
	}
	inst.Stop = func() error { return errStop }
	return inst, nil
}

// TestPairedStopFailureLeavesSamplesOut: with -paired, an instance that fails to stop
// cleanly after its rounds fails its runs as it does unpaired: its samples are left out
// (the notes say so), and the ratios that would use them are null.
func TestPairedStopFailureLeavesSamplesOut(t *testing.T) {
	p := &plan{
		c:         config{runs: 2, paired: true},
		targets:   []Target{inProcessTarget{nameRelay}, stopFailingTarget{nameToolsd}},
		workloads: []load.Workload{{Name: wSingleC1, Agents: 1, BatchSize: 1, ArgBytes: argSmall, Duration: smokeWindow}},
	}
	dir := t.TempDir()
	if err := runPlan(t.Context(), p, dir, io.Discard); !errors.Is(err, errStop) {
		t.Errorf("runPlan() = %v, want the stop's failure", err)
	}
	m := readSummaryJSON(t, dir)
	runs := map[string]float64{}
	rows, _ := m["workloads"].([]any)
	for _, r := range rows {
		r := r.(map[string]any)
		runs[r["target"].(string)] = r["runs"].(float64)
	}
	if diff := cmp.Diff(map[string]float64{nameRelay: 2}, runs); diff != "" {
		t.Errorf("summary.json runs by target (-want +got):\n%s", diff)
	}
	if v, ok := m["ratio_p50_single_c1"]; !ok || v != nil {
		t.Errorf("summary.json ratio_p50_single_c1 = %v (present %v), want null", v, ok)
	}
}

// nthStartFailing is an inProcessTarget that fails to start the n-th time (from 1).
type nthStartFailing struct {
	name   string
	n      int
	starts *int
}

func (t nthStartFailing) Name() string { return t.name }

func (t nthStartFailing) Start(ctx context.Context) (*Instance, error) {
	*t.starts++
	if *t.starts == t.n {
		return nil, errNthStart
	}
	return inProcessTarget{t.name}.Start(ctx)
}

var errNthStart = errors.New("test target cannot start this time")

// TestRatioNullWhenEachSideMissesARun: a ratio is null when either side misses a run,
// also when both miss one (different runs): the same count of runs is not every run.
func TestRatioNullWhenEachSideMissesARun(t *testing.T) {
	var relayStarts, toolsdStarts int
	p := &plan{
		c: config{runs: 3},
		targets: []Target{
			nthStartFailing{name: nameRelay, n: 1, starts: &relayStarts},
			nthStartFailing{name: nameToolsd, n: 2, starts: &toolsdStarts},
		},
		workloads: []load.Workload{{Name: wSingleC1, Agents: 1, BatchSize: 1, ArgBytes: argSmall, Duration: smokeWindow}},
	}
	dir := t.TempDir()
	if err := runPlan(t.Context(), p, dir, io.Discard); !errors.Is(err, errNthStart) {
		t.Errorf("runPlan() = %v, want the starts' failures", err)
	}
	m := readSummaryJSON(t, dir)
	if v, ok := m["ratio_p50_single_c1"]; !ok || v != nil {
		t.Errorf("summary.json ratio_p50_single_c1 = %v (present %v), want null", v, ok)
	}
	if rs, _ := m["ratios"].([]any); len(rs) != 0 {
		t.Errorf("summary.json ratios = %v, want none", rs)
	}
}

// cancellingTarget is a target whose start ends the run's context, as -timeout or a
// signal does while a run is under way, and fails.
type cancellingTarget struct {
	name   string
	cancel context.CancelFunc
}

var errStopped = errors.New("test target stopped by the run's end")

func (t cancellingTarget) Name() string { return t.name }

func (t cancellingTarget) Start(context.Context) (*Instance, error) {
	t.cancel()
	return nil, errStopped
}

// TestStoppedRunSkipsProbes: once -timeout or a signal has ended the runs, the probes do
// not run; summary.json is written with what was measured and one note saying that the
// probes were skipped, and the run fails.
func TestStoppedRunSkipsProbes(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	probed := false
	p := &plan{
		c:         config{runs: 1},
		targets:   []Target{inProcessTarget{nameRelay}, cancellingTarget{name: nameToolsd, cancel: cancel}},
		workloads: []load.Workload{{Name: wSingleC1, Agents: 1, BatchSize: 1, ArgBytes: argSmall, Duration: smokeWindow}},
		probes: func(context.Context, config) (probeResults, error) {
			probed = true
			return probeResults{}, errors.New("probe run after the run was stopped")
		},
	}
	dir := t.TempDir()
	if err := runPlan(ctx, p, dir, io.Discard); !errors.Is(err, errStopped) || !errors.Is(err, context.Canceled) {
		t.Errorf("runPlan() = %v, want the run's failure and the probes skipped for the cancellation", err)
	}
	if probed {
		t.Error("probes ran after the run was stopped")
	}
	m := readSummaryJSON(t, dir)
	if rows, _ := m["workloads"].([]any); len(rows) != 1 {
		t.Errorf("summary.json workloads = %v, want the 1 row measured", m["workloads"])
	}
	var skipped []string
	notes, _ := m["notes"].([]any)
	for _, n := range notes {
		if s := n.(string); strings.Contains(s, "probe") {
			skipped = append(skipped, s)
		}
	}
	if len(skipped) != 1 || !strings.Contains(skipped[0], "skipped") {
		t.Errorf("summary.json notes on probes = %q, want one saying they were skipped", skipped)
	}
}

// TestProbeNullWhenToolsdFailsToStop: a probe whose toolsd exits non-zero when stopped
// fails and leaves its key null, as such a server fails a workload's run and leaves its
// sample out; the probe's number was kept beside its failure.
func TestProbeNullWhenToolsdFailsToStop(t *testing.T) {
	var v *float64
	start := func() (*toolsdServer, error) {
		c, _, err := startRole(t.Context(), roleExitOnStop)
		return &toolsdServer{proc: c, dataDir: t.TempDir()}, err
	}
	measured := func(*toolsdServer) (float64, error) { return 48000, nil }
	err := runProbeSteps([]probeStep{{"idle_stream_bytes", &v, measured}}, start)
	if err == nil || !strings.Contains(err.Error(), "idle_stream_bytes") || !strings.Contains(err.Error(), exitOnStopMsg) {
		t.Errorf("runProbeSteps() error = %v, want the probe named with its toolsd's failure", err)
	}
	if v != nil {
		t.Errorf("runProbeSteps() value = %v, want null for a probe whose toolsd failed", *v)
	}
}

// orderTarget is an inProcessTarget that records when it starts.
type orderTarget struct {
	name    string
	started *[]string
}

func (t orderTarget) Name() string { return t.name }

func (t orderTarget) Start(ctx context.Context) (*Instance, error) {
	*t.started = append(*t.started, t.name)
	return inProcessTarget{t.name}.Start(ctx)
}

// TestRunsRotateTheTargets: each run of a workload starts with the next target, as
// the paired rounds do; in the same order every run, a machine that drifts through a
// workload's runs (single-call latency here drifts by half from one minute to the
// next) favoured the same target in each, and the medians could not even it out.
func TestRunsRotateTheTargets(t *testing.T) {
	var started []string
	p := &plan{
		c:         config{runs: 3},
		targets:   []Target{orderTarget{"a", &started}, orderTarget{"b", &started}, orderTarget{"c", &started}},
		workloads: []load.Workload{{Name: wSingleC1, Agents: 1, BatchSize: 1, ArgBytes: argSmall, Duration: smokeWindow}},
	}
	if errs := p.measureAll(t.Context(), map[string][]sample{}); len(errs) != 0 {
		t.Fatalf("measureAll() = %v", errs)
	}
	want := []string{"a", "b", "c", "b", "c", "a", "c", "a", "b"}
	if diff := cmp.Diff(want, started); diff != "" {
		t.Errorf("targets started, in order (-want +got):\n%s", diff)
	}
}
