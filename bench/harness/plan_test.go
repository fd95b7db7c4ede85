package main

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/toolsd/toolsd/bench/load"
)

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
		workloads: []load.Workload{{Name: wSingleC1, Agents: 1, BatchSize: 1, ArgBytes: argSmall, Duration: 20 * time.Millisecond}},
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
