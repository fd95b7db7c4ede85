package procs

import (
	"context"
	"math"
	"runtime"
	"runtime/metrics"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fake drives a controller window by window.
type fake struct {
	c    *Controller
	set  []int // GOMAXPROCS set, in order
	max  int   // the maximum: Options.Max, or the runtime's default as it stands
	low  bool  // GOMAXPROCS was last set to one
	now  sample
	wall time.Time
}

func newFake(t *testing.T, opts Options) (*fake, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	f := &fake{wall: time.Unix(1000, 0), max: opts.Max}
	f.c = New(opts, reg, nil)
	f.c.read = func() (sample, bool) { return f.now, true }
	f.c.set = func(n int) int {
		if n == 0 {
			n = f.max
		}
		f.set = append(f.set, n)
		f.low = n == 1
		return n
	}
	f.c.max = func() int { return f.max }
	f.c.current = func() int { // at the maximum, GOMAXPROCS follows the runtime's default
		if f.low {
			return 1
		}
		return f.max
	}
	f.c.procs = f.max
	return f, reg
}

// load is one window: the cores it used and the share of its goroutines queued.
type load struct{ cores, queued float64 }

// run samples one window per load, then stops the controller as Run does when its
// context ends.
func (f *fake) run(t *testing.T, loads ...load) {
	t.Helper()
	w, ok := f.c.start(f.wall)
	if !ok {
		t.Fatal("no sample")
	}
	for _, l := range loads {
		f.step(&w, l)
	}
	f.c.apply(false, f.wall)
}

func (f *fake) step(w *window, l load) {
	f.now.cpu += time.Duration(l.cores * float64(f.c.opts.Window))
	f.now.sched += 1000
	f.now.delayed += uint64(l.queued * 1000)
	f.wall = f.wall.Add(f.c.opts.Window)
	f.c.sample(w, f.wall)
}

// repeat is n windows of l.
func repeat(n int, l load) []load {
	out := make([]load, n)
	for i := range out {
		out[i] = l
	}
	return out
}

func TestControllerFollowsTheLoad(t *testing.T) {
	opts := Options{Max: 4, Window: 10 * time.Millisecond, Calm: 3}
	quiet, oneAgent, busy, queued := load{0.05, 0}, load{0.6, 0.01}, load{1.5, 0.3}, load{0.5, 0.1}
	for name, tc := range map[string]struct {
		loads []load
		want  []int // GOMAXPROCS set, in order, the restore at the end included
	}{
		"busy stays at max":                  {repeat(9, busy), nil},
		"quiet lowers to one":                {repeat(3, quiet), []int{1, 4}},
		"one agent lowers to one":            {repeat(3, oneAgent), []int{1, 4}},
		"one agent stays at one":             {repeat(20, oneAgent), []int{1, 4}},
		"too few windows to lower":           {repeat(2, quiet), nil},
		"a run averaging busy stays":         {[]load{quiet, quiet, {2.5, 0}}, nil},
		"a run averaging queued stays":       {[]load{quiet, quiet, {0.1, 0.2}}, nil},
		"a busy window in a calm run lowers": {[]load{{1.5, 0.03}, quiet, quiet}, []int{1, 4}},
		"the next run is judged on its own":  {append([]load{quiet, quiet, {2.5, 0}}, repeat(3, quiet)...), []int{1, 4}},
		"CPU at one P raises":                {append(repeat(3, quiet), load{0.95, 0}), []int{1, 4}},
		"queueing at one P raises":           {append(repeat(3, quiet), queued, quiet), []int{1, 4}},
		"down, up and down again":            {append(append(repeat(3, quiet), busy), repeat(6, quiet)...), []int{1, 4, 1, 4}},
		"a quick bounce needs a longer calm": {append(append(repeat(3, quiet), busy), repeat(5, quiet)...), []int{1, 4}},
	} {
		t.Run(name, func(t *testing.T) {
			f, reg := newFake(t, opts)
			f.run(t, tc.loads...)
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

// TestControllerDefaults pins the defaults the README states: at one P a window over
// 0.9 of a core or 5 % queued raises; at the maximum 40 windows averaging under 0.75 of
// a core and 2 % queued lower.
func TestControllerDefaults(t *testing.T) {
	calm := load{0.05, 0}
	for name, tc := range map[string]struct {
		loads []load
		want  []int // GOMAXPROCS set, in order, with no restore at the end
	}{
		"39 calm windows stay":       {repeat(39, calm), nil},
		"40 calm windows lower":      {repeat(40, calm), []int{1}},
		"averaging 0.74 cores lower": {repeat(40, load{0.74, 0}), []int{1}},
		"averaging 0.76 cores stay":  {repeat(40, load{0.76, 0}), nil},
		"averaging 1.9 % lower":      {repeat(40, load{0.05, 0.019}), []int{1}},
		"averaging 2.1 % stay":       {repeat(40, load{0.05, 0.021}), nil},
		"0.89 cores at one P stay":   {append(repeat(40, calm), load{0.89, 0}), []int{1}},
		"0.91 cores at one P raise":  {append(repeat(40, calm), load{0.91, 0}), []int{1, 2}},
		"4.9 % at one P stays":       {append(repeat(40, calm), load{0.05, 0.049}), []int{1}},
		"5.1 % at one P raises":      {append(repeat(40, calm), load{0.05, 0.051}), []int{1, 2}},
	} {
		t.Run(name, func(t *testing.T) {
			f, _ := newFake(t, Options{Max: 2})
			w, _ := f.c.start(f.wall)
			for _, l := range tc.loads {
				f.step(&w, l)
			}
			if !slices.Equal(f.set, tc.want) {
				t.Errorf("GOMAXPROCS set to %v, want %v", f.set, tc.want)
			}
		})
	}
}

// TestControllerFoldsAnEmptyWindow: a window that took no wall time (a clock reading
// no later than the window's start) decides nothing, and its CPU counts in the next.
func TestControllerFoldsAnEmptyWindow(t *testing.T) {
	f, _ := newFake(t, Options{Max: 2, Window: 10 * time.Millisecond, Calm: 1})
	w, _ := f.c.start(f.wall)
	f.step(&w, load{0, 0}) // calm: down to one P
	for _, back := range []time.Duration{0, time.Second} {
		f.now.cpu += 5 * time.Millisecond
		f.c.sample(&w, f.wall.Add(-back))
	}
	if !slices.Equal(f.set, []int{1}) {
		t.Fatalf("GOMAXPROCS set to %v after windows of no wall time, want [1]", f.set)
	}
	f.step(&w, load{0, 0}) // 10 ms of CPU over 10 ms
	if !slices.Equal(f.set, []int{1, 2}) {
		t.Errorf("GOMAXPROCS set to %v, want [1 2]: the empty windows' CPU counts in the next", f.set)
	}
}

// TestCountQueued: goroutines count as queued from the first bucket whose lower bound
// is QueuedDelay or more, the overflow bucket included; a bucket QueuedDelay falls in
// does not count.
func TestCountQueued(t *testing.T) {
	q := QueuedDelay.Seconds()
	counts := []uint64{1, 10, 100, 1000, 10000, 100000, 1000000}
	for name, buckets := range map[string][]float64{
		"a boundary at QueuedDelay":   {math.Inf(-1), 0, q / 2, q * 0.99, q, q * 2, 1, math.Inf(1)},
		"QueuedDelay inside a bucket": {math.Inf(-1), 0, q / 2, q * 0.9, q * 1.1, q * 2, 1, math.Inf(1)},
	} {
		sched, delayed := countQueued(&metrics.Float64Histogram{Buckets: buckets, Counts: counts})
		if sched != 1111111 || delayed != 1110000 {
			t.Errorf("%s: countQueued = (%d, %d), want (1111111, 1110000)", name, sched, delayed)
		}
	}
}

// TestControllerBackoffIsBoundedAndResets: each quick bounce doubles the calm run the
// next lowering needs, up to 64 times the base; a raise long after the lowering goes
// back to the base.
func TestControllerBackoffIsBoundedAndResets(t *testing.T) {
	f, _ := newFake(t, Options{Max: 2, Window: time.Millisecond, Calm: 2})
	w, _ := f.c.start(f.wall)
	for i := 0; i < 10; i++ {
		for f.c.procs == 2 {
			f.step(&w, load{0, 0})
		}
		f.step(&w, load{2, 0}) // straight back up: a bounce
	}
	if f.c.calmNeeded != 2*maxCalmFactor {
		t.Errorf("after 10 bounces the calm run is %d windows, want %d", f.c.calmNeeded, 2*maxCalmFactor)
	}
	for f.c.procs == 2 {
		f.step(&w, load{0, 0})
	}
	f.wall = f.wall.Add(time.Minute) // a long quiet spell at one P, then a busy window
	w.wall = f.wall
	f.step(&w, load{2, 0})
	if f.c.procs != 2 || f.c.calmNeeded != 2 {
		t.Errorf("a raise a minute after lowering: procs %d, calm run %d; want 2 and the base 2", f.c.procs, f.c.calmNeeded)
	}
}

// TestControllerFollowsTheRuntimesDefault: with no Max, the maximum is the runtime's
// default GOMAXPROCS, which Go updates as the process's CPU limit changes. A raise goes
// to the default as it is then, not as it was when the controller was made, and at the
// maximum the controller goes along with the runtime's updates.
func TestControllerFollowsTheRuntimesDefault(t *testing.T) {
	f, _ := newFake(t, Options{Window: 10 * time.Millisecond, Calm: 3})
	f.max = 4
	w, _ := f.c.start(f.wall)
	for range 3 {
		f.step(&w, load{0.05, 0})
	}
	f.max = 6 // the CPU limit went up while at one P
	f.step(&w, load{1.5, 0.3})
	if got := testutil.ToFloat64(f.c.gauge); !slices.Equal(f.set, []int{1, 6}) || got != 6 {
		t.Fatalf("GOMAXPROCS set to %v, procs %v; want [1 6] and 6: raised to the default of the moment", f.set, got)
	}
	f.max = 3 // the runtime updated GOMAXPROCS at the maximum: the CPU limit went down
	f.step(&w, load{1.5, 0.3})
	if got := testutil.ToFloat64(f.c.gauge); got != 3 || f.c.procs != 3 {
		t.Errorf("procs %v (controller %d) after the runtime set 3, want 3", got, f.c.procs)
	}
	f.max = 1 // one CPU left: there is nothing to lower
	for range 6 {
		f.step(&w, load{0.05, 0})
	}
	f.c.apply(false, f.wall)
	if !slices.Equal(f.set, []int{1, 6}) {
		t.Errorf("GOMAXPROCS set to %v, want [1 6]: left to the runtime at one CPU", f.set)
	}
}

// TestRuntimeProcs: without a Max the controller raises to the runtime's default, and
// with one to Max; it lowers to one either way.
func TestRuntimeProcs(t *testing.T) {
	was := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(was) })
	runtime.SetDefaultGOMAXPROCS() // go test -cpu pins another value
	def := runtime.GOMAXPROCS(0)
	for name, tc := range map[string]struct{ max, want int }{
		"default": {0, def},
		"Max":     {def + 1, def + 1},
	} {
		set, read := runtimeProcs(tc.max)
		if got := set(1); got != 1 || runtime.GOMAXPROCS(0) != 1 {
			t.Errorf("%s: set(1) = %d, GOMAXPROCS %d; want 1", name, got, runtime.GOMAXPROCS(0))
		}
		if got := set(0); got != tc.want || read() != tc.want || runtime.GOMAXPROCS(0) != tc.want {
			t.Errorf("%s: set(0) = %d, max %d, GOMAXPROCS %d; want %d", name, got, read(), runtime.GOMAXPROCS(0), tc.want)
		}
	}
}

// TestControllerRunStopsAndRestores runs the loop itself: it samples at each tick and,
// when its context ends, returns with the maximum restored.
func TestControllerRunStopsAndRestores(t *testing.T) {
	f, _ := newFake(t, Options{Max: 2, Calm: 1})
	ctx, cancel := context.WithCancel(t.Context())
	tick := make(chan time.Time)
	done := make(chan struct{})
	var mu sync.Mutex // the clock the loop reads
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
	onePD, _ := newFake(t, Options{Max: 1})
	blind, _ := newFake(t, Options{Max: 2, Calm: 1})
	blind.c.read = func() (sample, bool) { return sample{}, false }
	for name, f := range map[string]*fake{"one P": onePD, "no CPU time": blind} {
		// A nil tick never fires: run must return before it waits on one.
		f.c.run(t.Context(), nil, time.Now)
		if len(f.set) != 0 {
			t.Errorf("%s: GOMAXPROCS set to %v, want it left alone", name, f.set)
		}
	}
}

// TestReadRuntime reads the real process: CPU time and scheduled goroutines are
// known on unix and do not go back.
func TestReadRuntime(t *testing.T) {
	read := readRuntime()
	a, ok := read()
	if !ok {
		t.Skip("no process CPU time on this system")
	}
	var wg sync.WaitGroup
	for range 100 {
		wg.Go(func() {})
	}
	wg.Wait()
	b, _ := read()
	if b.cpu < a.cpu || b.sched <= a.sched || b.delayed < a.delayed || b.delayed > b.sched {
		t.Errorf("samples %+v then %+v: want CPU and counts that only grow, some goroutines scheduled", a, b)
	}
}

// TestControllerIgnoresAFewDelayedSamples: a quiet window at one P whose few scheduling
// samples include a delayed one does not raise GOMAXPROCS, nor does one delayed sample
// among more; a quarter delayed over enough samples does.
func TestControllerIgnoresAFewDelayedSamples(t *testing.T) {
	f, _ := newFake(t, Options{Max: 2, Window: 10 * time.Millisecond, Calm: 1})
	w, _ := f.c.start(f.wall)
	f.step(&w, load{0, 0}) // calm: down to one P
	if f.c.procs != 1 {
		t.Fatalf("procs = %d after a calm window, want 1", f.c.procs)
	}
	f.now.sched += minQueuedSamples - 1 // too few samples, one of them delayed
	f.now.delayed++
	f.wall = f.wall.Add(f.c.opts.Window)
	f.c.sample(&w, f.wall)
	if f.c.procs != 1 {
		t.Errorf("procs = %d after %d samples with one delayed, want 1", f.c.procs, minQueuedSamples-1)
	}
	// Enough samples, and one delayed is over UpQueued: measured at one agent on 2
	// cores, a window of 19 samples with one delayed raised GOMAXPROCS, and the
	// bounce that followed kept two Ps for the rest of the run.
	f.now.sched += 19
	f.now.delayed++
	f.wall = f.wall.Add(f.c.opts.Window)
	f.c.sample(&w, f.wall)
	if f.c.procs != 1 {
		t.Errorf("procs = %d after 19 samples with one delayed, want 1", f.c.procs)
	}
	f.now.sched += minQueuedSamples // enough samples, a quarter delayed
	f.now.delayed += minQueuedSamples / 4
	f.wall = f.wall.Add(f.c.opts.Window)
	f.c.sample(&w, f.wall)
	if f.c.procs != 2 {
		t.Errorf("procs = %d after %d samples with a quarter delayed, want 2", f.c.procs, minQueuedSamples)
	}
}

// TestControllerWaitsForASecondCPU: with the runtime's default as the maximum, a
// process that starts on one CPU (an affinity mask or cpuset of one) keeps watching:
// once the runtime's default grows, the controller lowers and raises as anywhere else.
func TestControllerWaitsForASecondCPU(t *testing.T) {
	f, _ := newFake(t, Options{Window: 10 * time.Millisecond, Calm: 1})
	var cpus atomic.Int64 // the runtime's default, changed while the loop runs
	cpus.Store(1)
	var mu sync.Mutex // set and the clock, as the loop and the test read them
	var set []int
	f.c.max = func() int { return int(cpus.Load()) }
	f.c.set = func(n int) int {
		if n == 0 {
			n = int(cpus.Load())
		}
		mu.Lock()
		defer mu.Unlock()
		set = append(set, n)
		return n
	}
	f.c.current = func() int {
		mu.Lock()
		defer mu.Unlock()
		if len(set) == 0 {
			return int(cpus.Load())
		}
		return set[len(set)-1]
	}
	f.c.procs = 1
	now := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		f.wall = f.wall.Add(time.Second)
		return f.wall
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	tick := make(chan time.Time)
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.c.run(ctx, tick, now)
	}()
	sample := func() {
		t.Helper()
		select {
		case tick <- time.Time{}:
		case <-done:
			t.Fatal("the controller stopped: started on one CPU, it never adapts once there are more")
		}
	}
	sample() // a calm second on one CPU: nothing to lower
	cpus.Store(4)
	sample() // calm, with 4 CPUs now: lowers
	sample() // received only once the one before was sampled
	cancel()
	<-done
	if got := testutil.ToFloat64(f.c.gauge); got != 4 {
		t.Errorf("procs after the stop = %v, want 4", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(set, []int{1, 4}) {
		t.Errorf("GOMAXPROCS set to %v, want [1 4]: lowered once a second CPU came, restored at the end", set)
	}
}

// TestGaugeIsGOMAXPROCSWithoutTheController: with adaptive_procs off the controller
// never runs, and toolsd_runtime_procs still says what GOMAXPROCS is now, also after
// it changed without the controller (as the runtime does when the CPU limit changes).
func TestGaugeIsGOMAXPROCSWithoutTheController(t *testing.T) {
	prev := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
	c := New(Options{}, prometheus.NewRegistry(), nil)
	if got := testutil.ToFloat64(c.gauge); int(got) != prev {
		t.Fatalf("procs = %v, want %d", got, prev)
	}
	runtime.GOMAXPROCS(prev + 1)
	if got := testutil.ToFloat64(c.gauge); int(got) != prev+1 {
		t.Errorf("procs = %v after GOMAXPROCS changed to %d without the controller, want %d", got, prev+1, prev+1)
	}
}
