package main

import (
	"testing"
	"time"

	"github.com/toolsd/toolsd/bench/load"
)

// TestToolsdProviderRole runs the SDK provider role against the relay (which accepts any
// registration and routes calls to the latest provider): the no-op tool must answer.
func TestToolsdProviderRole(t *testing.T) {
	srv, info, err := startRole(t.Context(), "relay-server")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.stop()
	prov, _, err := startRole(t.Context(), "toolsd-provider", "-target", info.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer prov.stop()
	w := load.Workload{Name: "sdk", Agents: 2, BatchSize: 4, ArgBytes: 100, Warmup: 50 * time.Millisecond, Duration: 200 * time.Millisecond}
	res, err := load.Run(t.Context(), w, load.BatchDialer(info.Addr, "sdk"))
	if err != nil || res.Calls == 0 {
		t.Fatalf("Run() = %+v, %v, want calls answered by the SDK provider", res, err)
	}
}
