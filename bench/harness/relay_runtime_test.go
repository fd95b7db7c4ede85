package main

import (
	"context"
	"net/http"
	"os"
	"testing"

	toolsdconfig "github.com/toolsd/toolsd/internal/config"
)

// TestRelayRunsToolsdGC: toolsd collects garbage at its default runtime.gc_percent,
// not Go's 100. The relay is toolsd's hops with nothing on top; run at Go's default it
// pays collections toolsd does not, and toolsd / relay understates toolsd's cost.
func TestRelayRunsToolsdGC(t *testing.T) {
	if _, ok := os.LookupEnv("GOGC"); ok {
		t.Skip("GOGC is set: it wins over the config in toolsd and the relay alike")
	}
	defaults, err := toolsdconfig.Load("")
	if err != nil {
		t.Fatal(err)
	}
	srv, info, err := startRole(t.Context(), "relay-server")
	if err != nil {
		t.Fatal(err)
	}
	defer stopChecked(t, srv)
	got, err := scrapeGauge(t.Context(), info.Metrics, "go_gc_gogc_percent")
	if err != nil {
		t.Fatal(err)
	}
	if want := float64(defaults.Runtime.GCPercent); got != want {
		t.Errorf("relay server's GOGC = %v, want toolsd's default runtime.gc_percent %v", got, want)
	}
}

func scrapeGauge(ctx context.Context, url, name string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := scrapeClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return parseMetric(resp.Body, name)
}
