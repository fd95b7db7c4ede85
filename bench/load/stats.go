package load

import (
	"math"
	"slices"
	"sort"
	"time"
)

// Result is what one workload run measured inside its window.
type Result struct {
	Workload Workload
	// Batches and Calls completed inside the window.
	Batches, Calls int
	// Window is the measured wall time.
	Window time.Duration
	// P50 and P99 are batch latencies (send → the agent's Do returned: for ExecuteBatch,
	// settled and the stream's end) of the batches completed in
	// the window (their start may fall in the warm-up).
	P50, P99 time.Duration
	// CallsPerSec is Calls / Window.
	CallsPerSec float64

	start time.Time       // the run's start, which ends are offsets from
	ends  []time.Duration // when each batch of the run completed, in order
}

// CallsBetween returns how many calls the batches that completed between from and to
// (inclusive) held, inside the measured window or not: the divisor of a server's
// counter read at instants other than the window's edges.
func (r Result) CallsBetween(from, to time.Time) int {
	lo, hi := from.Sub(r.start), to.Sub(r.start)
	first := sort.Search(len(r.ends), func(i int) bool { return r.ends[i] >= lo })
	past := sort.Search(len(r.ends), func(i int) bool { return r.ends[i] > hi })
	return max(past-first, 0) * r.Workload.BatchSize
}

// span is one batch's start and end, as offsets from the run's start.
type span struct{ start, end time.Duration }

// summarize turns recorded spans into a Result for the window [from, to].
func summarize(w Workload, spans []span, from, to time.Duration) Result {
	r := Result{Workload: w, Window: to - from}
	lat := make([]time.Duration, 0, len(spans))
	for _, s := range spans {
		if s.end < from || s.end > to {
			continue
		}
		r.Batches++
		lat = append(lat, s.end-s.start)
	}
	r.Calls = r.Batches * w.BatchSize
	r.ends = make([]time.Duration, len(spans))
	for i, s := range spans {
		r.ends[i] = s.end
	}
	slices.Sort(r.ends)
	if r.Window > 0 {
		r.CallsPerSec = float64(r.Calls) / r.Window.Seconds()
	}
	slices.Sort(lat)
	r.P50 = Percentile(lat, 0.50)
	r.P99 = Percentile(lat, 0.99)
	return r
}

// Percentile returns the nearest-rank p-quantile (0 < p <= 1) of sorted; 0 when empty.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
