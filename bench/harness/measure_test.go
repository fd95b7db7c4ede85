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

// slowScrapeServer reads its allocation counter as a scrape arrives and answers
// scrapeLag later, as a server busy with calls does; its every call allocates
// callAllocs, its scrapes nothing.
type slowScrapeServer struct{ mallocs atomic.Int64 }

const scrapeLag = 200 * time.Millisecond

func (s *slowScrapeServer) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	v := s.mallocs.Load()
	time.Sleep(scrapeLag)
	fmt.Fprintf(w, "%s %d\n", mallocsMetric, v)
}

type slowScrapeAgent struct{ s *slowScrapeServer }

func (a slowScrapeAgent) Do(context.Context) error {
	a.s.mallocs.Add(callAllocs)
	time.Sleep(100 * time.Microsecond)
	return nil
}

func (slowScrapeAgent) Close() error { return nil }

// TestAllocsPerCallCountsTheCallsBetweenTheReads: the allocation counter is read
// during the scrapes at the window's edges, and a scrape of toolsd under load takes
// 10–36 ms; the calls made while the first one was answered allocated in the count but
// were not among the window's calls it was divided by, so allocs/call read high (here,
// with a scrape as long as the window, twice the truth). The count is divided by the
// calls completed between the scrapes' midpoints.
func TestAllocsPerCallCountsTheCallsBetweenTheReads(t *testing.T) {
	s := &slowScrapeServer{}
	hs := httptest.NewServer(s)
	defer hs.Close()
	inst := &Instance{
		Dial:       func(context.Context, int, load.Workload) (load.Agent, error) { return slowScrapeAgent{s}, nil },
		MetricsURL: hs.URL,
	}
	w := load.Workload{Name: "slow-scrape", Agents: 2, BatchSize: 1, ArgBytes: 11, Duration: scrapeLag}
	got, err := measureOn(t.Context(), "slow-scrape", inst, w)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("allocs/call %s", fmtRatio(got.allocsPerCall))
	if got.allocsPerCall == nil || *got.allocsPerCall < 0.7*callAllocs || *got.allocsPerCall > 1.4*callAllocs {
		t.Errorf("measureOn() allocs/call = %s, want about %d", fmtRatio(got.allocsPerCall), callAllocs)
	}
}
