package main

import (
	"slices"

	"github.com/toolsd/toolsd/bench/load"
)

// summary is summary.json. Nullable numbers are null when not measured.
type summary struct {
	Machine  machine  `json:"machine"`
	Settings settings `json:"settings"`

	// Headline ratios (medians of the same harness run).
	RatioP50SingleC1          *float64 `json:"ratio_p50_single_c1"`
	RatioTputBatch8C64        *float64 `json:"ratio_tput_batch8_c64"`
	RatioTputBatch8C64Durable *float64 `json:"ratio_tput_batch8_c64_durable"`
	// The same with the journal session store (session.store: journal).
	RatioTputBatch8C64Journal *float64 `json:"ratio_tput_batch8_c64_journal"`
	RatioTputVsMCPC64         *float64 `json:"ratio_tput_vs_mcp_c64"`
	// toolsd-only probes.
	Schemas10kP50us   *float64 `json:"schemas_10k_p50_us"`
	IdleStreamBytes   *float64 `json:"idle_stream_bytes"`
	InflightCallBytes *float64 `json:"inflight_call_bytes"`

	Workloads []row    `json:"workloads"`
	Ratios    []ratio  `json:"ratios"`
	Notes     []string `json:"notes"`
}

type settings struct {
	Runs      int     `json:"runs"`
	Paired    bool    `json:"paired"`
	WarmupS   float64 `json:"warmup_s"`
	DurationS float64 `json:"duration_s"`
	Quick     bool    `json:"quick"`
	// The probes' sizes: the keys name the full probe (schemas_10k_p50_us), a run may
	// have measured a smaller one (-quick, -schema-tools, ...).
	SchemaTools   int `json:"schema_tools"`
	SchemaCalls   int `json:"schema_calls"`
	IdleStreams   int `json:"idle_streams"`
	InflightCalls int `json:"inflight_calls"`
}

// spread is a metric across repetitions: its median, range and every sample.
type spread struct {
	Median  float64   `json:"median"`
	Min     float64   `json:"min"`
	Max     float64   `json:"max"`
	Samples []float64 `json:"samples"`
}

// row is one target on one workload across repetitions.
type row struct {
	Target        string  `json:"target"`
	Workload      string  `json:"workload"`
	Agents        int     `json:"agents"`
	BatchSize     int     `json:"batch_size"`
	ArgBytes      int     `json:"arg_bytes"`
	Runs          int     `json:"runs"`
	P50us         spread  `json:"p50_us"`
	P99us         spread  `json:"p99_us"`
	CallsPerSec   spread  `json:"calls_per_sec"`
	CPUusPerCall  *spread `json:"cpu_us_per_call"`
	AllocsPerCall *spread `json:"allocs_per_call"`
	// ProviderCPUusPerCall is the provider process's CPU (absent when the tool runs in
	// the server), AgentCPUusPerCall the harness process's, where the agents run.
	ProviderCPUusPerCall *spread `json:"provider_cpu_us_per_call,omitempty"`
	AgentCPUusPerCall    *spread `json:"agent_cpu_us_per_call,omitempty"`
}

// ratio compares a target with a baseline on one workload, median to median (CPU: see
// [targetCPU]). A paired
// run also has the ratios round by round (the windows of one round are seconds apart):
// their median and range.
type ratio struct {
	Workload         string   `json:"workload"`
	Target           string   `json:"target"`
	Baseline         string   `json:"baseline"`
	P50              *float64 `json:"p50"`
	Throughput       *float64 `json:"throughput"`
	CPUPerCall       *float64 `json:"cpu_per_call"`
	PairedP50        *spread  `json:"paired_p50,omitempty"`
	PairedThroughput *spread  `json:"paired_throughput,omitempty"`
}

// ratioPairs are the (target, baseline) comparisons reported for every workload.
var ratioPairs = [][2]string{
	{nameToolsd, nameRelay}, {nameToolsd, nameMCP},
	{nameToolsdDurable, nameRelay}, {nameToolsdDurable, nameMCP},
	{nameToolsdJournal, nameRelay}, {nameToolsdJournal, nameMCP},
	{nameMCP, nameRelay},
}

func newSummary(c config, workloads []load.Workload, samples map[string][]sample) *summary {
	s := &summary{
		Machine: currentMachine(),
		Settings: settings{Runs: c.runs, Paired: c.paired, WarmupS: c.warmup.Seconds(), DurationS: c.duration.Seconds(), Quick: c.quick,
			SchemaTools: c.schemaTools, SchemaCalls: c.schemaCalls, IdleStreams: c.idleStreams, InflightCalls: c.inflightCalls},
		// Empty, not null, when nothing was measured: readers iterate them.
		Workloads: []row{},
		Ratios:    []ratio{},
		Notes:     []string{},
	}
	for _, w := range workloads {
		for _, target := range knownNames() {
			if r, ok := newRow(w, target, samples[w.Name]); ok {
				s.Workloads = append(s.Workloads, r)
			}
		}
	}
	for _, w := range workloads {
		for _, pair := range ratioPairs {
			if r, ok := s.compare(w.Name, pair[0], pair[1]); ok {
				s.Ratios = append(s.Ratios, r)
			}
		}
	}
	s.RatioP50SingleC1 = s.headline(wSingleC1, nameToolsd, nameRelay, func(r ratio) *float64 { return r.P50 })
	s.RatioTputBatch8C64 = s.headline(wBatch8C64, nameToolsd, nameRelay, func(r ratio) *float64 { return r.Throughput })
	s.RatioTputBatch8C64Durable = s.headline(wBatch8C64, nameToolsdDurable, nameRelay, func(r ratio) *float64 { return r.Throughput })
	s.RatioTputBatch8C64Journal = s.headline(wBatch8C64, nameToolsdJournal, nameRelay, func(r ratio) *float64 { return r.Throughput })
	s.RatioTputVsMCPC64 = s.headline(wSingleC64, nameToolsd, nameMCP, func(r ratio) *float64 { return r.Throughput })
	return s
}

func newRow(w load.Workload, target string, samples []sample) (row, bool) {
	var p50, p99, tput, cpu, allocs, provCPU, agentCPU []float64
	for _, s := range samples {
		if s.target != target {
			continue
		}
		p50 = append(p50, us(s.result.P50))
		p99 = append(p99, us(s.result.P99))
		tput = append(tput, s.result.CallsPerSec)
		if s.cpuPerCall != nil {
			cpu = append(cpu, *s.cpuPerCall)
		}
		if s.allocsPerCall != nil {
			allocs = append(allocs, *s.allocsPerCall)
		}
		if s.providerCPUPerCall != nil {
			provCPU = append(provCPU, *s.providerCPUPerCall)
		}
		if s.agentCPUPerCall != nil {
			agentCPU = append(agentCPU, *s.agentCPUPerCall)
		}
	}
	if len(p50) == 0 {
		return row{}, false
	}
	return row{
		Target: target, Workload: w.Name, Agents: w.Agents, BatchSize: w.BatchSize, ArgBytes: w.ArgBytes,
		Runs: len(p50), P50us: newSpread(p50), P99us: newSpread(p99), CallsPerSec: newSpread(tput),
		CPUusPerCall: optionalSpread(cpu, len(p50)), AllocsPerCall: optionalSpread(allocs, len(p50)),
		ProviderCPUusPerCall: optionalSpread(provCPU, len(p50)), AgentCPUusPerCall: optionalSpread(agentCPU, len(p50)),
	}, true
}

// optionalSpread is nil unless every run measured the metric.
func optionalSpread(vs []float64, runs int) *spread {
	if len(vs) == 0 || len(vs) != runs {
		return nil
	}
	sp := newSpread(vs)
	return &sp
}

// newSpread summarizes samples; the median of an even count is the mean of the middle two.
func newSpread(vs []float64) spread {
	sorted := slices.Sorted(slices.Values(vs))
	n := len(sorted)
	med := sorted[n/2]
	if n%2 == 0 {
		med = (sorted[n/2-1] + sorted[n/2]) / 2
	}
	return spread{Median: med, Min: sorted[0], Max: sorted[n-1], Samples: vs}
}

func (s *summary) find(workload, target string) (row, bool) {
	i := slices.IndexFunc(s.Workloads, func(r row) bool { return r.Workload == workload && r.Target == target })
	if i < 0 {
		return row{}, false
	}
	return s.Workloads[i], true
}

// compare is target's ratio to baseline on workload; there is none unless both have
// every run (a failed run leaves its side short, and two sides each short of a different
// run have as many runs but not the same ones).
func (s *summary) compare(workload, target, baseline string) (ratio, bool) {
	t, ok1 := s.find(workload, target)
	b, ok2 := s.find(workload, baseline)
	if !ok1 || !ok2 || t.Runs != s.Settings.Runs || b.Runs != s.Settings.Runs {
		return ratio{}, false
	}
	r := ratio{Workload: workload, Target: target, Baseline: baseline,
		P50: div(t.P50us.Median, b.P50us.Median), Throughput: div(t.CallsPerSec.Median, b.CallsPerSec.Median)}
	if tc, bc := targetCPU(t, b), targetCPU(b, t); tc != nil && bc != nil {
		r.CPUPerCall = div(*tc, *bc)
	}
	if s.Settings.Paired {
		r.PairedP50 = roundRatios(t.P50us.Samples, b.P50us.Samples)
		r.PairedThroughput = roundRatios(t.CallsPerSec.Samples, b.CallsPerSec.Samples)
	}
	return r, true
}

// targetCPU is r's median CPU per call to compare with other's: its server's, or, when r
// runs the tool in a provider process and other in its server (MCP), where it also
// decodes the arguments and encodes the result, r's server and provider together, run by
// run. nil when not measured.
func targetCPU(r, other row) *float64 {
	if r.CPUusPerCall == nil {
		return nil
	}
	if r.ProviderCPUusPerCall == nil || other.ProviderCPUusPerCall != nil {
		return &r.CPUusPerCall.Median
	}
	sums := make([]float64, len(r.CPUusPerCall.Samples))
	for i, v := range r.CPUusPerCall.Samples {
		sums[i] = v + r.ProviderCPUusPerCall.Samples[i]
	}
	med := newSpread(sums).Median
	return &med
}

// roundRatios divides samples round by round (sample i of each is round i); nil unless
// both have every round.
func roundRatios(t, b []float64) *spread {
	if len(t) == 0 || len(t) != len(b) {
		return nil
	}
	vs := make([]float64, len(t))
	for i := range t {
		if b[i] == 0 {
			return nil
		}
		vs[i] = t[i] / b[i]
	}
	sp := newSpread(vs)
	return &sp
}

func (s *summary) headline(workload, target, baseline string, pick func(ratio) *float64) *float64 {
	i := slices.IndexFunc(s.Ratios, func(r ratio) bool {
		return r.Workload == workload && r.Target == target && r.Baseline == baseline
	})
	if i < 0 {
		return nil
	}
	return pick(s.Ratios[i])
}

func div(a, b float64) *float64 {
	if b == 0 {
		return nil
	}
	v := a / b
	return &v
}
