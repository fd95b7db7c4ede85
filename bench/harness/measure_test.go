package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolsd/toolsd/bench/load"
)

// seriesServer stands for a server whose every call allocates callAllocs and whose
// scrape allocates scrapeAllocs, or far more once calls have created the series a
// scrape then renders (as toolsd's per-tool metrics do).
type seriesServer struct {
	mallocs atomic.Int64
	called  atomic.Bool
}

const callAllocs, scrapeAllocs, seriesScrapeAllocs = 10, 100, 1e12

func (s *seriesServer) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	v := s.mallocs.Load()
	cost := int64(scrapeAllocs)
	if s.called.Load() {
		cost = seriesScrapeAllocs
	}
	s.mallocs.Add(cost)
	fmt.Fprintf(w, "%s %d\n", mallocsMetric, v)
}

type seriesAgent struct{ s *seriesServer }

func (a seriesAgent) Do(context.Context) error {
	a.s.called.Store(true)
	a.s.mallocs.Add(callAllocs)
	return nil
}

func (seriesAgent) Close() error { return nil }

// TestScrapeCostWithSeries: the scrape's own allocations are measured when the scrape
// renders what the window's scrapes render, the series the calls created included; measured
// before the first call, a scrape's growth was charged to the calls.
func TestScrapeCostWithSeries(t *testing.T) {
	s := &seriesServer{}
	hs := httptest.NewServer(s)
	defer hs.Close()
	inst := &Instance{
		Dial:       func(context.Context, int, load.Workload) (load.Agent, error) { return seriesAgent{s}, nil },
		MetricsURL: hs.URL,
	}
	w := load.Workload{Name: "series", Agents: 1, BatchSize: 1, ArgBytes: 11, Duration: 200 * time.Millisecond}
	got, err := measureOn(t.Context(), "series", inst, w)
	if err != nil {
		t.Fatal(err)
	}
	// Calls just outside the window but between the scrapes count too: allow some.
	if got.allocsPerCall == nil || *got.allocsPerCall > 1000 {
		t.Errorf("measureOn() allocs/call = %s, want about %d", fmtRatio(got.allocsPerCall), callAllocs)
	}
}
