package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// mallocsMetric counts heap objects allocated since the process started. Both toolsd's
// admin endpoint and the harness's roles export it from the Prometheus Go collector.
const mallocsMetric = "go_memstats_mallocs_total"

// scrapeClient opens a connection per scrape, so nothing lingers between scrapes.
var scrapeClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// errNoMetric reports an endpoint that does not export mallocsMetric.
var errNoMetric = errors.New("harness: " + mallocsMetric + " not exported")

// scrapeMallocs reads mallocsMetric from a Prometheus text endpoint.
func scrapeMallocs(ctx context.Context, url string) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, fmt.Errorf("harness: scrape %s: %w", url, err)
	}
	resp, err := scrapeClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("harness: scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("harness: scrape %s: %s", url, resp.Status)
	}
	return parseMetric(resp.Body, mallocsMetric)
}

// parseMetric finds an unlabelled sample of name in Prometheus text format.
func parseMetric(r io.Reader, name string) (float64, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), name+" ")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return 0, fmt.Errorf("harness: %s: empty sample", name)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return 0, fmt.Errorf("harness: %s: %w", name, err)
		}
		return v, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("harness: %w", err)
	}
	return 0, errNoMetric
}
