package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
)

// writeSummary writes summary.json and summary.txt into dir and the table to w.
func writeSummary(dir string, s *summary, w io.Writer) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("harness: %w", err)
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("harness: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "summary.json"), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("harness: %w", err)
	}
	var table strings.Builder
	printTable(&table, s)
	if err := os.WriteFile(filepath.Join(dir, "summary.txt"), []byte(table.String()), 0o644); err != nil {
		return fmt.Errorf("harness: %w", err)
	}
	_, err = io.WriteString(w, table.String())
	return err
}

// printTable renders medians with their min–max range across repetitions.
func printTable(w io.Writer, s *summary) {
	m := s.Machine
	fmt.Fprintf(w, "machine: %d cores, GOMAXPROCS %d, %s, %s, %s, load average %s\n",
		m.Cores, m.GOMAXPROCS, m.GoVersion, m.Kernel, m.CPU, m.LoadAvg)
	how := "runs"
	if s.Settings.Paired {
		how = "paired rounds"
	}
	fmt.Fprintf(w, "%s: %d × (%.1fs warm-up + %.1fs window); latency is per batch; median (min–max)\n\n",
		how, s.Settings.Runs, s.Settings.WarmupS, s.Settings.DurationS)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "workload\ttarget\tp50 µs\tp99 µs\tcalls/s\tserver CPU µs/call\tallocs/call\tprovider CPU µs/call\tagent CPU µs/call")
	for _, r := range s.Workloads {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Workload, r.Target,
			fmtSpread(&r.P50us), fmtSpread(&r.P99us), fmtSpread(&r.CallsPerSec), fmtSpread(r.CPUusPerCall), fmtSpread(r.AllocsPerCall),
			fmtSpread(r.ProviderCPUusPerCall), fmtSpread(r.AgentCPUusPerCall))
	}
	_ = tw.Flush()
	if len(s.Ratios) > 0 {
		fmt.Fprintln(w)
		if s.Settings.Paired {
			fmt.Fprintln(tw, "workload\ttarget / baseline\tp50\tcalls/s\tCPU/call\tp50 by round\tcalls/s by round")
		} else {
			fmt.Fprintln(tw, "workload\ttarget / baseline\tp50\tcalls/s\tCPU/call")
		}
		for _, r := range s.Ratios {
			fmt.Fprintf(tw, "%s\t%s / %s\t%s\t%s\t%s", r.Workload, r.Target, r.Baseline, fmtRatio(r.P50), fmtRatio(r.Throughput), fmtRatio(r.CPUPerCall))
			if s.Settings.Paired {
				fmt.Fprintf(tw, "\t%s\t%s", fmtSpread(r.PairedP50), fmtSpread(r.PairedThroughput))
			}
			fmt.Fprintln(tw)
		}
		_ = tw.Flush()
	}
	fmt.Fprintln(w)
	for _, kv := range []struct {
		k string
		v *float64
	}{
		{"ratio_p50_single_c1", s.RatioP50SingleC1},
		{"ratio_tput_batch8_c64", s.RatioTputBatch8C64},
		{"ratio_tput_batch8_c64_durable", s.RatioTputBatch8C64Durable},
		{"ratio_tput_batch8_c64_journal", s.RatioTputBatch8C64Journal},
		{"ratio_tput_vs_mcp_c64", s.RatioTputVsMCPC64},
		{"schemas_10k_p50_us", s.Schemas10kP50us},
		{"idle_stream_bytes", s.IdleStreamBytes},
		{"inflight_call_bytes", s.InflightCallBytes},
	} {
		fmt.Fprintf(w, "%-30s %s\n", kv.k, fmtRatio(kv.v))
	}
	for _, n := range s.Notes {
		fmt.Fprintln(w, "note:", n)
	}
}

func fmtSpread(sp *spread) string {
	if sp == nil {
		return "-"
	}
	if len(sp.Samples) == 1 {
		return fmtNum(sp.Median)
	}
	return fmt.Sprintf("%s (%s–%s)", fmtNum(sp.Median), fmtNum(sp.Min), fmtNum(sp.Max))
}

func fmtNum(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

func fmtRatio(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmtNum(*v)
}
