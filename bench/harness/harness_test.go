package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolsd/toolsd/bench/load"
)

func TestParseMetric(t *testing.T) {
	tests := map[string]struct {
		text    string
		want    float64
		wantErr error
	}{
		"present": {
			text: "# HELP go_memstats_mallocs_total Total.\n# TYPE go_memstats_mallocs_total counter\ngo_memstats_mallocs_total 1.234e+06\n",
			want: 1.234e6,
		},
		"prefix of another name": {text: "go_memstats_mallocs_total_x 5\n", wantErr: errNoMetric},
		"absent":                 {text: "go_goroutines 9\n", wantErr: errNoMetric},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := parseMetric(strings.NewReader(tc.text), mallocsMetric)
			if !errors.Is(err, tc.wantErr) || got != tc.want {
				t.Errorf("parseMetric(%q) = %v, %v, want %v, %v", tc.text, got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestSelection(t *testing.T) {
	valid := []string{"a", "b", "c"}
	tests := map[string]struct {
		list    string
		want    map[string]bool
		wantErr bool
	}{
		"empty is all": {list: "", want: map[string]bool{"a": true, "b": true, "c": true}},
		"subset":       {list: "a, c", want: map[string]bool{"a": true, "c": true}},
		"unknown":      {list: "a,d", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := selection(tc.list, valid)
			if (err != nil) != tc.wantErr {
				t.Fatalf("selection(%q) error = %v, want error %v", tc.list, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); !tc.wantErr && diff != "" {
				t.Errorf("selection(%q) (-want +got):\n%s", tc.list, diff)
			}
		})
	}
}

func TestNewSpread(t *testing.T) {
	tests := map[string]struct {
		in   []float64
		want spread
	}{
		"odd":  {in: []float64{3, 1, 2}, want: spread{Median: 2, Min: 1, Max: 3, Samples: []float64{3, 1, 2}}},
		"even": {in: []float64{4, 1, 2, 3}, want: spread{Median: 2.5, Min: 1, Max: 4, Samples: []float64{4, 1, 2, 3}}},
		"one":  {in: []float64{7}, want: spread{Median: 7, Min: 7, Max: 7, Samples: []float64{7}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, newSpread(tc.in)); diff != "" {
				t.Errorf("newSpread(%v) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func fake(target string, p50 time.Duration, tput float64) sample {
	return sample{target: target, result: load.Result{P50: p50, P99: 2 * p50, CallsPerSec: tput}}
}

// thrice is three runs of ss, each sample the same in every run.
func thrice(ss ...sample) []sample { return slices.Concat(ss, ss, ss) }

func TestSummaryRatios(t *testing.T) {
	ws := allWorkloads(time.Second, time.Second)
	samples := map[string][]sample{
		wSingleC1: {
			fake(nameRelay, 200*time.Microsecond, 5000), fake(nameToolsd, 300*time.Microsecond, 3000),
			fake(nameRelay, 100*time.Microsecond, 4000), fake(nameToolsd, 400*time.Microsecond, 2000),
			fake(nameRelay, 300*time.Microsecond, 6000), fake(nameToolsd, 500*time.Microsecond, 1000),
		},
		wSingleC64: thrice(fake(nameToolsd, time.Millisecond, 20000), fake(nameMCP, 4*time.Millisecond, 5000)),
		wBatch8C64: thrice(
			fake(nameRelay, time.Millisecond, 40000), fake(nameToolsd, time.Millisecond, 30000),
			fake(nameToolsdDurable, time.Millisecond, 10000), fake(nameToolsdJournal, time.Millisecond, 14000),
		),
	}
	s := newSummary(config{runs: 3}, ws, samples)
	got := map[string]*float64{
		"ratio_p50_single_c1":           s.RatioP50SingleC1,
		"ratio_tput_batch8_c64":         s.RatioTputBatch8C64,
		"ratio_tput_batch8_c64_durable": s.RatioTputBatch8C64Durable,
		"ratio_tput_batch8_c64_journal": s.RatioTputBatch8C64Journal,
		"ratio_tput_vs_mcp_c64":         s.RatioTputVsMCPC64,
	}
	want := map[string]float64{
		"ratio_p50_single_c1":           2,    // medians 400 / 200
		"ratio_tput_batch8_c64":         0.75, // 30000 / 40000
		"ratio_tput_batch8_c64_durable": 0.25,
		"ratio_tput_batch8_c64_journal": 0.35,
		"ratio_tput_vs_mcp_c64":         4,
	}
	for k, w := range want {
		if got[k] == nil || *got[k] != w {
			t.Errorf("newSummary() %s = %v, want %v", k, got[k], w)
		}
	}
	if s.Schemas10kP50us != nil || len(s.Workloads) != 8 {
		t.Errorf("newSummary() = %d rows, schemas %v, want 8 rows and no probe values", len(s.Workloads), s.Schemas10kP50us)
	}
}

func TestWriteSummary(t *testing.T) {
	dir := t.TempDir()
	s := newSummary(config{runs: 1}, allWorkloads(0, time.Second), map[string][]sample{
		wSingleC1: {fake(nameRelay, time.Millisecond, 1000)},
	})
	var out bytes.Buffer
	if err := writeSummary(dir, s, &out); err != nil {
		t.Fatalf("writeSummary() error = %v", err)
	}
	m := readSummaryJSON(t, dir)
	for _, k := range []string{"ratio_p50_single_c1", "ratio_tput_batch8_c64", "ratio_tput_batch8_c64_durable",
		"ratio_tput_batch8_c64_journal", "ratio_tput_vs_mcp_c64", "schemas_10k_p50_us", "idle_stream_bytes", "inflight_call_bytes", "workloads", "machine"} {
		if _, ok := m[k]; !ok {
			t.Errorf("summary.json lacks %q", k)
		}
	}
	if !strings.Contains(out.String(), wSingleC1) {
		t.Errorf("writeSummary() table = %q, want a row for %s", out.String(), wSingleC1)
	}
}

// TestSummaryKeysAreNumbers: with every target and the probes measured, each key the
// issue names is a JSON number in summary.json, computed from the samples.
func TestSummaryKeysAreNumbers(t *testing.T) {
	samples := map[string][]sample{
		wSingleC1:  {fake(nameRelay, 200*time.Microsecond, 5000), fake(nameToolsd, 300*time.Microsecond, 4000)},
		wSingleC64: {fake(nameToolsd, time.Millisecond, 3000), fake(nameMCP, 2*time.Millisecond, 1000)},
		wBatch8C64: {
			fake(nameRelay, time.Millisecond, 20000), fake(nameToolsd, time.Millisecond, 10000),
			fake(nameToolsdDurable, time.Millisecond, 6000), fake(nameToolsdJournal, time.Millisecond, 8000),
		},
	}
	s := newSummary(config{runs: 1}, allWorkloads(0, time.Second), samples)
	s.Schemas10kP50us, s.IdleStreamBytes, s.InflightCallBytes = ptr(1234.0), ptr(48000.0), ptr(44000.0)
	dir := t.TempDir()
	if err := writeSummary(dir, s, io.Discard); err != nil {
		t.Fatalf("writeSummary() error = %v", err)
	}
	m := readSummaryJSON(t, dir)
	for k, want := range map[string]float64{
		"ratio_p50_single_c1": 1.5, "ratio_tput_batch8_c64": 0.5, "ratio_tput_batch8_c64_durable": 0.3,
		"ratio_tput_batch8_c64_journal": 0.4, "ratio_tput_vs_mcp_c64": 3,
		"schemas_10k_p50_us": 1234, "idle_stream_bytes": 48000, "inflight_call_bytes": 44000,
	} {
		got, ok := m[k].(float64)
		if !ok || math.Abs(got-want) > 1e-9 {
			t.Errorf("summary.json %s = %v (%T), want the number %v", k, m[k], m[k], want)
		}
	}
}

func TestReadyWriter(t *testing.T) {
	ready := make(chan readyInfo, 1)
	w := &readyWriter{ready: ready}
	for _, chunk := range []string{"noise\nREA", `DY {"addr":"127.0.0.1:1","metrics":"http://x"}`, "\nlater\n"} {
		if _, err := w.Write([]byte(chunk)); err != nil {
			t.Fatalf("Write(%q) error = %v", chunk, err)
		}
	}
	want := readyInfo{Addr: "127.0.0.1:1", Metrics: "http://x"}
	if got := <-ready; got != want {
		t.Errorf("READY = %+v, want %+v", got, want)
	}
}

// TestMeasureEndToEnd runs each built-in target as real processes (this test binary in
// its role) for a short window and checks every measured quantity is there.
func TestMeasureEndToEnd(t *testing.T) {
	w := load.Workload{Name: "e2e", Agents: 2, BatchSize: 2, ArgBytes: 100, Warmup: 50 * time.Millisecond, Duration: 300 * time.Millisecond}
	for _, target := range []Target{relayTarget{}, mcpTarget{}} {
		t.Run(target.Name(), func(t *testing.T) {
			s, err := measure(t.Context(), target, w)
			if err != nil {
				t.Fatalf("measure(%s) error = %v", target.Name(), err)
			}
			if s.result.Calls == 0 || s.cpuPerCall == nil || s.allocsPerCall == nil || *s.allocsPerCall <= 0 {
				t.Fatalf("measure(%s) = %+v (cpu %v, allocs %v), want calls, CPU and allocations", target.Name(), s.result, s.cpuPerCall, s.allocsPerCall)
			}
			// The agents run in this process and always cost CPU; only the relay has a
			// provider process (MCP's tool runs in its server).
			if s.agentCPUPerCall == nil || *s.agentCPUPerCall <= 0 {
				t.Errorf("measure(%s) agent CPU = %v, want > 0", target.Name(), s.agentCPUPerCall)
			}
			if hasProvider := target.Name() == nameRelay; (s.providerCPUPerCall != nil) != hasProvider {
				t.Errorf("measure(%s) provider CPU = %v, want measured: %v", target.Name(), s.providerCPUPerCall, hasProvider)
			}
		})
	}
}

func TestPairedFlags(t *testing.T) {
	tests := map[string]struct {
		args             []string
		runs             int
		warmup, duration time.Duration
	}{
		"unpaired":       {args: nil, runs: 3, warmup: time.Second, duration: 3 * time.Second},
		"paired":         {args: []string{"-paired"}, runs: 9, warmup: 300 * time.Millisecond, duration: time.Second},
		"paired, runs 5": {args: []string{"-paired", "-runs", "5", "-duration", "2s"}, runs: 5, warmup: 300 * time.Millisecond, duration: 2 * time.Second},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, err := parseFlags(tc.args)
			if err != nil {
				t.Fatal(err)
			}
			if c.runs != tc.runs || c.warmup != tc.warmup || c.duration != tc.duration {
				t.Errorf("parseFlags(%q) = runs %d, warm-up %v, window %v; want %d, %v, %v", tc.args, c.runs, c.warmup, c.duration, tc.runs, tc.warmup, tc.duration)
			}
		})
	}
}

// TestPairedRounds runs two real targets paired: each round gives each one window, the
// order rotating, on instances that stay up.
func TestPairedRounds(t *testing.T) {
	w := load.Workload{Name: "e2e", Agents: 1, BatchSize: 1, ArgBytes: 100, Warmup: 20 * time.Millisecond, Duration: 150 * time.Millisecond}
	p := &plan{c: config{paired: true, runs: 3}, targets: []Target{relayTarget{}, mcpTarget{}}}
	samples := map[string][]sample{}
	if err := p.rounds(t.Context(), w, samples); err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, s := range samples["e2e"] {
		order = append(order, s.target)
		if s.result.Calls == 0 || s.cpuPerCall == nil {
			t.Errorf("%s: %+v, want calls and CPU", s.target, s.result)
		}
	}
	want := []string{nameRelay, nameMCP, nameMCP, nameRelay, nameRelay, nameMCP}
	if diff := cmp.Diff(want, order); diff != "" {
		t.Errorf("window order (-want +got):\n%s", diff)
	}
}

// TestPairedRatios checks the round-by-round ratios of a paired run: sample i of each
// target is round i, and the ratio of medians stays the headline.
func TestPairedRatios(t *testing.T) {
	ws := allWorkloads(time.Second, time.Second)
	samples := map[string][]sample{wSingleC1: {
		fake(nameRelay, 200*time.Microsecond, 5000), fake(nameToolsd, 300*time.Microsecond, 3000), // 1.5
		fake(nameToolsd, 500*time.Microsecond, 2000), fake(nameRelay, 400*time.Microsecond, 4000), // 1.25
		fake(nameRelay, 100*time.Microsecond, 6000), fake(nameToolsd, 400*time.Microsecond, 1000), // 4
	}}
	for _, paired := range []bool{false, true} {
		s := newSummary(config{runs: 3, paired: paired}, ws, samples)
		if s.RatioP50SingleC1 == nil || *s.RatioP50SingleC1 != 2 { // medians 400 / 200
			t.Errorf("paired %v: ratio_p50_single_c1 = %v, want 2", paired, s.RatioP50SingleC1)
		}
		r := s.Ratios[slices.IndexFunc(s.Ratios, func(r ratio) bool { return r.Target == nameToolsd && r.Baseline == nameRelay })]
		if !paired {
			if r.PairedP50 != nil || r.PairedThroughput != nil {
				t.Errorf("unpaired run has round ratios %+v", r)
			}
			continue
		}
		want := &spread{Median: 1.5, Min: 1.25, Max: 4, Samples: []float64{1.5, 1.25, 4}}
		if diff := cmp.Diff(want, r.PairedP50); diff != "" {
			t.Errorf("p50 by round (-want +got):\n%s", diff)
		}
		if r.PairedThroughput == nil || r.PairedThroughput.Median != 0.5 { // 0.6, 0.5, 1/6
			t.Errorf("calls/s by round = %+v, want median 0.5", r.PairedThroughput)
		}
	}
}

// readSummaryJSON reads dir's summary.json as a JSON object.
func readSummaryJSON(t *testing.T, dir string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("summary.json is not JSON: %v", err)
	}
	return m
}

// TestProbeSizesPositive: a probe size below 1 is refused at the command line; -idle-streams 0
// or -inflight-calls 0 divided 0 by 0 after the whole run and summary.json could not be
// written (NaN), -schema-calls 0 reported a p50 of 0 µs, and negative sizes panicked.
func TestProbeSizesPositive(t *testing.T) {
	for _, flag := range []string{"-schema-tools", "-schema-calls", "-idle-streams", "-inflight-calls"} {
		for _, v := range []string{"0", "-1"} {
			if c, err := parseFlags([]string{flag, v}); err == nil {
				t.Errorf("parseFlags(%s %s) = %+v, want an error", flag, v, c)
			}
		}
	}
}

// TestQuickKeepsExplicitFlags: -quick shortens what the command line leaves unset and
// keeps what it sets, as -paired does.
func TestQuickKeepsExplicitFlags(t *testing.T) {
	c, err := parseFlags([]string{"-quick", "-runs", "3", "-duration", "2s", "-idle-streams", "1000"})
	if err != nil {
		t.Fatal(err)
	}
	if c.runs != 3 || c.duration != 2*time.Second || c.idleStreams != 1000 || c.warmup != 200*time.Millisecond || c.schemaCalls != 50 {
		t.Errorf("parseFlags(-quick -runs 3 -duration 2s -idle-streams 1000) = %+v, want those three kept and the rest quick", c)
	}
}

// TestUnwritableOutFailsFirst: an -out directory that cannot be made fails the harness
// before it measures anything, not after minutes of runs whose results are then lost.
func TestUnwritableOutFailsFirst(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// The timeout ends any measurement at once: what fails first is what run reports.
	err := run([]string{"-out", filepath.Join(file, "out"), "-only", "relay", "-workloads", wSingleC1, "-timeout", "1ns"})
	if !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("run(-out under a file) = %v, want ENOTDIR before any run", err)
	}
}

// TestSummaryListsAreArrays: a run that measured no workload (-only probes, or every
// target failing) still writes workloads and ratios as JSON arrays, empty, as notes
// is: a reader iterating them (jq '.workloads[]') fails on null.
func TestSummaryListsAreArrays(t *testing.T) {
	for name, samples := range map[string]map[string][]sample{
		"nothing measured": {},
		"no pair":          {wSingleC1: {fake(nameRelay, time.Millisecond, 1000)}},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := writeSummary(dir, newSummary(config{runs: 1}, allWorkloads(0, time.Second), samples), io.Discard); err != nil {
				t.Fatalf("writeSummary() error = %v", err)
			}
			m := readSummaryJSON(t, dir)
			for _, k := range []string{"workloads", "ratios", "notes"} {
				if _, ok := m[k].([]any); !ok {
					t.Errorf("summary.json %s = %v (%T), want an array", k, m[k], m[k])
				}
			}
		})
	}
}

// TestSummarySettingsHaveProbeSizes: summary.json says what the probes measured with
// (-quick or a flag can shrink them), so schemas_10k_p50_us measured over fewer tools,
// or idle_stream_bytes over fewer streams, is not read as the full probe's.
func TestSummarySettingsHaveProbeSizes(t *testing.T) {
	c, err := parseFlags([]string{"-quick", "-schema-tools", "500"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := writeSummary(dir, newSummary(c, nil, nil), io.Discard); err != nil {
		t.Fatalf("writeSummary() error = %v", err)
	}
	got, _ := readSummaryJSON(t, dir)["settings"].(map[string]any)
	for k, want := range map[string]float64{"schema_tools": 500, "schema_calls": 50, "idle_streams": 200, "inflight_calls": 100} {
		if v, ok := got[k].(float64); !ok || v != want {
			t.Errorf("summary.json settings.%s = %v, want %v", k, got[k], want)
		}
	}
}

// TestPeerGOGCIsChecked: the MCP server's GOGC (HARNESS_PEER_GOGC) must be a positive
// number; anything else fails the role before it serves, naming the variable.
func TestPeerGOGCIsChecked(t *testing.T) {
	for _, v := range []string{"lots", "0", "-1"} {
		t.Setenv(peerGOGCEnv, v)
		err := runMCPServer(t.Context(), config{}, func(readyInfo) { t.Errorf("%s=%q: the MCP server became ready", peerGOGCEnv, v) })
		if err == nil || !strings.Contains(err.Error(), peerGOGCEnv) {
			t.Errorf("%s=%q: runMCPServer() = %v, want an error naming it", peerGOGCEnv, v, err)
		}
	}
}

// withCPU is s with its server's CPU per call and its provider's (0: none, the tool
// runs in the server).
func withCPU(s sample, server, provider float64) sample {
	s.cpuPerCall = &server
	if provider > 0 {
		s.providerCPUPerCall = &provider
	}
	return s
}

// TestCPURatioAgainstMCPCountsTheProvider: MCP runs the tool in its server, where it
// also decodes the call's arguments and encodes its result; toolsd and the relay leave
// that side of the call to a provider process. A CPU ratio between the two kinds
// compares one's server and provider with the other's server, not two servers that do
// different shares of the work (toolsd's provider spends about a third of what its
// server does); between two of a kind, the servers alone.
func TestCPURatioAgainstMCPCountsTheProvider(t *testing.T) {
	ws := allWorkloads(time.Second, time.Second)
	samples := map[string][]sample{wSingleC64: {
		withCPU(fake(nameRelay, time.Millisecond, 1000), 200, 100),
		withCPU(fake(nameToolsd, time.Millisecond, 1000), 400, 100),
		withCPU(fake(nameMCP, time.Millisecond, 1000), 1000, 0),
	}}
	s := newSummary(config{runs: 1}, ws, samples)
	want := map[[2]string]float64{
		{nameToolsd, nameRelay}: 2,           // 400 / 200
		{nameToolsd, nameMCP}:   0.5,         // (400 + 100) / 1000
		{nameMCP, nameRelay}:    1000. / 300, // 1000 / (200 + 100)
	}
	for pair, w := range want {
		i := slices.IndexFunc(s.Ratios, func(r ratio) bool {
			return r.Workload == wSingleC64 && r.Target == pair[0] && r.Baseline == pair[1]
		})
		if i < 0 {
			t.Errorf("no %s / %s ratio", pair[0], pair[1])
			continue
		}
		if got := s.Ratios[i].CPUPerCall; got == nil || math.Abs(*got-w) > 1e-9 {
			t.Errorf("%s / %s CPU per call = %s, want %.3f", pair[0], pair[1], fmtRatio(got), w)
		}
	}
}
