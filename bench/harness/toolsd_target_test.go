package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/toolsd/toolsd/bench/load"
	toolsdconfig "github.com/toolsd/toolsd/internal/config"
)

// TestToolsdProviderRole runs the SDK provider role against the relay (which accepts any
// registration and routes calls to the latest provider): the no-op tool must answer.
func TestToolsdProviderRole(t *testing.T) {
	srv, info, err := startRole(t.Context(), "relay-server")
	if err != nil {
		t.Fatal(err)
	}
	defer stopChecked(t, srv)
	prov, _, err := startRole(t.Context(), "toolsd-provider", "-target", info.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer stopChecked(t, prov)
	w := load.Workload{Name: "sdk", Agents: 2, BatchSize: 4, ArgBytes: 100, Warmup: 50 * time.Millisecond, Duration: 200 * time.Millisecond}
	res, err := load.Run(t.Context(), w, load.BatchDialer(info.Addr, "sdk"))
	if err != nil || res.Calls == 0 {
		t.Fatalf("Run() = %+v, %v, want calls answered by the SDK provider", res, err)
	}
}

// TestToolsdRunsItsDefaults: the benchmark claims toolsd runs with its defaults. Its
// command line and bench/toolsd-bench.yaml may only raise the limits the probes need
// (10,000 tools in one scope, 1,000 provider streams, 500 calls in flight); anything
// else (say, a quieter log level that drops the per-call "tool call" line) measures a
// toolsd nobody runs.
func TestToolsdRunsItsDefaults(t *testing.T) {
	for _, store := range []string{"", "bolt", "journal"} {
		args := toolsdArgs("127.0.0.1:1", "127.0.0.1:2", "/tmp/d", store)
		for i, a := range args {
			switch a {
			case "-listen", "-admin-listen", "-config", "-data-dir", "-session-store":
				_ = args[i+1]
			case "-ephemeral":
			default:
				if strings.HasPrefix(a, "-") {
					t.Errorf("toolsdArgs(%q) passes %s, which overrides a default", store, a)
				}
			}
		}
	}
	got, err := toolsdconfig.Load(filepath.Join("..", "toolsd-bench.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := toolsdconfig.Load("")
	if err != nil {
		t.Fatal(err)
	}
	// What the probes need raised.
	want.Limits.MaxToolsPerScope, want.Limits.MaxToolsPerProvider = got.Limits.MaxToolsPerScope, got.Limits.MaxToolsPerProvider
	want.Limits.MaxProviders, want.Limits.MaxInFlightPerProvider = got.Limits.MaxProviders, got.Limits.MaxInFlightPerProvider
	want.Limits.MaxConcurrentStreams, want.Source = got.Limits.MaxConcurrentStreams, got.Source
	// Where each key was set (unexported) differs as Source does.
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty(), cmpopts.IgnoreUnexported(toolsdconfig.Config{})); diff != "" {
		t.Errorf("toolsd-bench.yaml changes more than the probes' limits (-defaults +bench):\n%s", diff)
	}
}

// TestBenchConfigFromAnyDirectory: toolsd is built from the module root wherever the
// harness runs; its config must be found the same way (tests run in bench/harness, where
// bench/toolsd-bench.yaml relative to the working directory does not exist).
func TestBenchConfigFromAnyDirectory(t *testing.T) {
	if _, err := os.Stat(benchConfig()); err != nil {
		t.Errorf("benchConfig() = %q: %v", benchConfig(), err)
	}
}
