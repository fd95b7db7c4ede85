package procs

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fake drives a controller window by window: each step says how many cores the
// process used in the window that ends.
type fake struct {
	c    *Controller
	set  []int
	cpu  time.Duration
	wall time.Time
}

func newFake(t *testing.T, opts Options) (*fake, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	f := &fake{wall: time.Unix(1000, 0)}
	f.c = New(opts, reg, nil)
	f.c.cpu = func() (time.Duration, bool) { return f.cpu, true }
	f.c.set = func(n int) { f.set = append(f.set, n) }
	return f, reg
}

// run samples windows that used cores[i] cores each, then stops the controller as
// Run does when its context ends.
func (f *fake) run(t *testing.T, cores ...float64) {
	t.Helper()
	w, ok := f.c.start(f.wall)
	if !ok {
		t.Fatal("no CPU time")
	}
	for _, c := range cores {
		f.cpu += time.Duration(c * float64(f.c.opts.Window))
		f.wall = f.wall.Add(f.c.opts.Window)
		f.c.sample(&w, f.wall)
	}
	f.c.apply(f.c.opts.Max)
}

func TestControllerFollowsTheLoad(t *testing.T) {
	opts := Options{Max: 4, Window: 10 * time.Millisecond, Up: 0.4, Down: 0.2, Calm: 3}
	for name, tc := range map[string]struct {
		cores []float64
		want  []int // GOMAXPROCS set, in order, the restore at the end included
	}{
		"busy stays at max":                {[]float64{1, 0.5, 3, 0.2}, nil},
		"calm windows lower to one":        {[]float64{0.1, 0.1, 0.1}, []int{1, 4}},
		"a busy window restarts the calm":  {[]float64{0.1, 0.1, 0.3, 0.1, 0.1}, nil},
		"load at one P raises to max":      {[]float64{0, 0, 0, 0.39, 0.41}, []int{1, 4}},
		"between the thresholds at one P":  {[]float64{0, 0, 0, 0.3, 0.3, 0.3, 0.3}, []int{1, 4}},
		"down, up and down again":          {[]float64{0, 0, 0, 0.9, 0.1, 0.1, 0.1}, []int{1, 4, 1, 4}},
		"between the thresholds at max":    {[]float64{0.3, 0.3, 0.3, 0.3, 0.3}, nil},
		"one calm window short stays busy": {[]float64{0.19, 0.19}, nil},
	} {
		t.Run(name, func(t *testing.T) {
			f, reg := newFake(t, opts)
			f.run(t, tc.cores...)
			if !slices.Equal(f.set, tc.want) {
				t.Errorf("GOMAXPROCS set to %v, want %v", f.set, tc.want)
			}
			if got := testutil.ToFloat64(f.c.changes); int(got) != len(tc.want) {
				t.Errorf("procs_changes_total = %v, want %d", got, len(tc.want))
			}
			if got := testutil.ToFloat64(f.c.gauge); got != 4 {
				t.Errorf("procs after the stop = %v, want 4 (restored)", got)
			}
			if n, err := testutil.GatherAndCount(reg); err != nil || n != 2 {
				t.Errorf("registered %d series (%v), want 2", n, err)
			}
		})
	}
}

func TestControllerGaugeFollowsTheChanges(t *testing.T) {
	f, _ := newFake(t, Options{Max: 2, Calm: 2})
	if got := testutil.ToFloat64(f.c.gauge); got != 2 {
		t.Fatalf("procs at the start = %v, want 2", got)
	}
	f.c.apply(f.c.decide(0))
	f.c.apply(f.c.decide(0))
	if got := testutil.ToFloat64(f.c.gauge); got != 1 || !slices.Equal(f.set, []int{1}) {
		t.Errorf("after two calm windows procs = %v and set %v, want 1", got, f.set)
	}
}

// TestControllerRunStopsAndRestores runs the loop itself: it samples at each tick and,
// when its context ends, returns with the maximum restored.
func TestControllerRunStopsAndRestores(t *testing.T) {
	f, _ := newFake(t, Options{Max: 2, Calm: 1})
	ctx, cancel := context.WithCancel(t.Context())
	tick := make(chan time.Time)
	done := make(chan struct{})
	var mu sync.Mutex // the clock the loop reads, advanced by the test between ticks
	now := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		f.wall = f.wall.Add(time.Second)
		return f.wall
	}
	go func() {
		defer close(done)
		f.c.run(ctx, tick, now)
	}()
	tick <- time.Time{} // a second with no CPU used: calm, and Calm is one window
	tick <- time.Time{} // received only once the first was sampled
	cancel()
	<-done
	if !slices.Equal(f.set, []int{1, 2}) {
		t.Errorf("GOMAXPROCS set to %v, want [1 2]: lowered when calm, restored at the end", f.set)
	}
}

func TestControllerStaysOffWithOneProcOrNoCPUTime(t *testing.T) {
	for name, f := range map[string]*fake{
		"one P":       func() *fake { f, _ := newFake(t, Options{Max: 1}); return f }(),
		"no CPU time": func() *fake { f, _ := newFake(t, Options{Max: 2, Calm: 1}); return f }(),
	} {
		if name == "no CPU time" {
			f.c.cpu = func() (time.Duration, bool) { return 0, false }
		}
		// A nil tick never fires: run must return before it waits on one.
		f.c.run(t.Context(), nil, time.Now)
		if len(f.set) != 0 {
			t.Errorf("%s: GOMAXPROCS set to %v, want it left alone", name, f.set)
		}
	}
}

// TestProcessCPU reads the real CPU time: it is known on unix and does not go back.
func TestProcessCPU(t *testing.T) {
	a, ok := processCPU()
	if !ok {
		t.Skip("no process CPU time on this system")
	}
	for i := 0; i < 1e6; i++ {
		_ = i * i
	}
	if b, _ := processCPU(); b < a {
		t.Errorf("CPU time went back: %v then %v", a, b)
	}
}
