package load_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolsd/toolsd/bench/load"
)

func TestArguments(t *testing.T) {
	for _, size := range []int{11, 100, 16 << 10} {
		got := load.Arguments(size)
		var v struct{ Data string }
		if len(got) != size || json.Unmarshal([]byte(got), &v) != nil {
			t.Errorf("Arguments(%d) = %d bytes (valid JSON: %v), want %d bytes of JSON", size, len(got), json.Valid([]byte(got)), size)
		}
	}
}

func TestPercentile(t *testing.T) {
	sorted := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	tests := map[string]struct {
		in   []time.Duration
		p    float64
		want time.Duration
	}{
		"median": {in: sorted, p: 0.5, want: 5},
		"p99":    {in: sorted, p: 0.99, want: 10},
		"p10":    {in: sorted, p: 0.1, want: 1},
		"single": {in: []time.Duration{7}, p: 0.99, want: 7},
		"empty":  {in: nil, p: 0.5, want: 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := load.Percentile(tc.in, tc.p); got != tc.want {
				t.Errorf("Percentile(%v, %v) = %v, want %v", tc.in, tc.p, got, tc.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	ok := load.Workload{Name: "w", Agents: 1, BatchSize: 1, ArgBytes: 11, Duration: time.Second}
	tests := map[string]struct {
		mutate  func(*load.Workload)
		wantErr bool
	}{
		"ok":            {mutate: func(*load.Workload) {}},
		"no agents":     {mutate: func(w *load.Workload) { w.Agents = 0 }, wantErr: true},
		"empty batch":   {mutate: func(w *load.Workload) { w.BatchSize = 0 }, wantErr: true},
		"tiny args":     {mutate: func(w *load.Workload) { w.ArgBytes = 10 }, wantErr: true},
		"zero duration": {mutate: func(w *load.Workload) { w.Duration = 0 }, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			w := ok
			tc.mutate(&w)
			if err := w.Validate(); (err != nil) != tc.wantErr {
				t.Errorf("Validate(%+v) = %v, want error %v", w, err, tc.wantErr)
			}
		})
	}
}

// fakeAgent takes d per batch and fails its failAt-th batch (1-based; 0 never).
type fakeAgent struct {
	d      time.Duration
	failAt int64
	n      atomic.Int64
	closed *atomic.Int64
}

var errFake = errors.New("fake failure")

func (a *fakeAgent) Do(ctx context.Context) error {
	if n := a.n.Add(1); n == a.failAt {
		return errFake
	}
	t := time.NewTimer(a.d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (a *fakeAgent) Close() error {
	a.closed.Add(1)
	return nil
}

func TestRun(t *testing.T) {
	var closed atomic.Int64
	var hooks []string
	w := load.Workload{Name: "w", Agents: 4, BatchSize: 8, ArgBytes: 11, Warmup: 30 * time.Millisecond, Duration: 200 * time.Millisecond}
	dial := func(context.Context, int, load.Workload) (load.Agent, error) {
		return &fakeAgent{d: 2 * time.Millisecond, closed: &closed}, nil
	}
	res, err := load.Run(t.Context(), w, dial, load.WithWindowHooks(
		func() { hooks = append(hooks, "start") }, func() { hooks = append(hooks, "end") }))
	if err != nil {
		t.Fatalf("Run() error = %v", err)
	}
	if len(hooks) != 2 || hooks[0] != "start" || hooks[1] != "end" {
		t.Errorf("Run() hooks = %v, want [start end]", hooks)
	}
	if closed.Load() != int64(w.Agents) {
		t.Errorf("Run() closed %d agents, want %d", closed.Load(), w.Agents)
	}
	if res.Batches == 0 || res.Calls != 8*res.Batches || res.Window < w.Duration {
		t.Errorf("Run() = %+v, want batches counted in a window of at least %v", res, w.Duration)
	}
	if res.P50 < 2*time.Millisecond || res.P99 < res.P50 {
		t.Errorf("Run() p50 = %v, p99 = %v, want p50 >= 2ms <= p99", res.P50, res.P99)
	}
}

// TestCallsBetween: a Result counts the calls of the batches that completed between
// two instants, the window's or any others, so that a counter read at other instants
// than the window's edges can be divided by the calls it saw.
func TestCallsBetween(t *testing.T) {
	var closed atomic.Int64
	var opened, closedAt time.Time
	w := load.Workload{Name: "w", Agents: 2, BatchSize: 8, ArgBytes: 11, Warmup: 30 * time.Millisecond, Duration: 100 * time.Millisecond}
	dial := func(context.Context, int, load.Workload) (load.Agent, error) {
		return &fakeAgent{d: time.Millisecond, closed: &closed}, nil
	}
	before := time.Now()
	res, err := load.Run(t.Context(), w, dial, load.WithWindowHooks(
		func() { opened = time.Now() }, func() { closedAt = time.Now() }))
	if err != nil {
		t.Fatalf("Run() error = %v", err)
	}
	after := time.Now()
	all := res.CallsBetween(before, after)
	for name, tc := range map[string]struct {
		got      int
		min, max int
	}{
		"the whole run":              {all, res.Calls + 1, all},
		"around the window":          {res.CallsBetween(opened, closedAt), res.Calls, all},
		"before the run":             {res.CallsBetween(before.Add(-time.Hour), before), 0, 0},
		"an interval ending first":   {res.CallsBetween(closedAt, opened), 0, 0},
		"the warm-up and the window": {res.CallsBetween(before, closedAt), res.Calls + 1, all},
	} {
		if tc.got < tc.min || tc.got > tc.max || tc.got%w.BatchSize != 0 {
			t.Errorf("CallsBetween(%s) = %d, want whole batches of %d, %d to %d (window: %d calls)", name, tc.got, w.BatchSize, tc.min, tc.max, res.Calls)
		}
	}
}

func TestRunStopsOnFirstError(t *testing.T) {
	var closed atomic.Int64
	w := load.Workload{Name: "w", Agents: 3, BatchSize: 1, ArgBytes: 11, Warmup: 10 * time.Millisecond, Duration: time.Minute}
	dial := func(_ context.Context, i int, _ load.Workload) (load.Agent, error) {
		a := &fakeAgent{d: time.Millisecond, closed: &closed}
		if i == 1 {
			a.failAt = 5
		}
		return a, nil
	}
	_, err := load.Run(t.Context(), w, dial)
	if !errors.Is(err, errFake) {
		t.Fatalf("Run() error = %v, want %v", err, errFake)
	}
	if closed.Load() != 3 {
		t.Errorf("Run() closed %d agents, want 3", closed.Load())
	}
}

func TestRunDialFailureClosesOpened(t *testing.T) {
	var closed atomic.Int64
	w := load.Workload{Name: "w", Agents: 3, BatchSize: 1, ArgBytes: 11, Duration: time.Second}
	dial := func(_ context.Context, i int, _ load.Workload) (load.Agent, error) {
		if i == 2 {
			return nil, errFake
		}
		return &fakeAgent{closed: &closed}, nil
	}
	if _, err := load.Run(t.Context(), w, dial); !errors.Is(err, errFake) {
		t.Fatalf("Run() error = %v, want %v", err, errFake)
	}
	if closed.Load() != 2 {
		t.Errorf("Run() closed %d agents, want 2", closed.Load())
	}
}

// gatedAgent's batches end only once release is closed.
type gatedAgent struct{ release <-chan struct{} }

func (a gatedAgent) Do(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-a.release:
		return nil
	}
}

func (gatedAgent) Close() error { return nil }

// TestRunFailsEmptyWindow: a target so slow that no batch completes inside the window
// fails the run instead of reporting a p50 of 0 and 0 calls/s as a measurement.
func TestRunFailsEmptyWindow(t *testing.T) {
	release := make(chan struct{})
	w := load.Workload{Name: "w", Agents: 2, BatchSize: 1, ArgBytes: 11, Duration: time.Millisecond}
	dial := func(context.Context, int, load.Workload) (load.Agent, error) {
		return gatedAgent{release: release}, nil
	}
	res, err := load.Run(t.Context(), w, dial, load.WithWindowHooks(nil, func() { close(release) }))
	if !errors.Is(err, load.ErrEmptyWindow) {
		t.Errorf("Run() = %+v, %v, want %v", res, err, load.ErrEmptyWindow)
	}
}

// cappedAgent's batches end at once; the last one it may send (its cap) closes last.
type cappedAgent struct {
	cap  int
	n    int
	last chan<- struct{}
}

func (a *cappedAgent) Do(context.Context) error {
	if a.n++; a.n == a.cap {
		close(a.last)
	}
	return nil
}

func (*cappedAgent) Close() error { return nil }

// TestRunFailsAnAgentOutOfBatches: an agent that has sent its cap of batches
// (WithMaxBatches) before the window closed stopped sending inside the run; the window
// would count a load it no longer carried (calls/s low, and for one target only, the
// quicker), so the run fails instead of reporting what the remaining agents did.
func TestRunFailsAnAgentOutOfBatches(t *testing.T) {
	const maxBatches = 3
	last := make(chan struct{})
	w := load.Workload{Name: "w", Agents: 1, BatchSize: 1, ArgBytes: 11, Duration: time.Millisecond}
	dial := func(context.Context, int, load.Workload) (load.Agent, error) {
		return &cappedAgent{cap: maxBatches, last: last}, nil
	}
	// The window opens once the agent has sent its last batch.
	res, err := load.Run(t.Context(), w, dial, load.WithMaxBatches(maxBatches),
		load.WithWindowHooks(func() { <-last }, nil))
	if !errors.Is(err, load.ErrOutOfBatches) {
		t.Errorf("Run() = %+v, %v, want %v", res, err, load.ErrOutOfBatches)
	}
}
