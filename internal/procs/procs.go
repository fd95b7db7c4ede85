// Package procs adapts the Go runtime's GOMAXPROCS to toolsd's load.
//
// With more than one P, each hand-off between goroutines on a quiet process (a
// transport's reader to a handler, the handler to the writer, a provider stream's
// receive loop back to the handler) readies a goroutine while another P is idle, and
// the runtime wakes a thread to run it: a futex call and a cross-core wake-up per
// hand-off, on the latency path of every call. With one P the readied goroutine runs
// next on the same thread. Measured on 2 cores (BENCHMARKS.md), one P cuts a lone
// call's p50 by a sixth or so, but costs about a sixth of the throughput once calls
// keep a core busy.
//
// A [Controller] runs toolsd on one P while one is enough and on all of them once it
// is not. Every window it reads two things: the process's CPU time (getrusage), and how
// many goroutines that became runnable waited at least [QueuedDelay] for a P (the
// runtime's scheduling latency histogram) — the sign that one P is not enough, which CPU
// time alone cannot give, since with idle Ps the runtime's spinning threads burn CPU
// for no work. At one P, a single window over UpCores or UpQueued raises GOMAXPROCS to
// the maximum. At the maximum, it lowers to one when a run of Calm windows averaged
// under DownCores and DownQueued. A raise soon after a lowering doubles the run the
// next lowering needs (up to 64 times), so a load that one P cannot quite carry does
// not make it flap; a change stops the world for a moment.
//
// The maximum is, unless [Options.Max] says otherwise, the runtime's default, which Go
// (1.25 on) keeps updating as the process's CPU limit, affinity or CPU count changes. Any
// call of [runtime.GOMAXPROCS] turns those updates off for good, so the controller lowers
// with it but raises with [runtime.SetDefaultGOMAXPROCS], which takes the default as it
// is then and turns the updates back on; at the maximum it follows what the runtime sets.
package procs

import (
	"context"
	"runtime"
	"runtime/metrics"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// Defaults of [Options], measured on 2 cores with one agent (one P: ~0.55 cores,
// ~0 % queued; two Ps: ~0.65 cores) and with 8-call batches from 8 or 64 agents
// (one P: 0.8–0.9 cores, 25–50 % queued).
const (
	DefaultWindow     = 25 * time.Millisecond
	DefaultUpCores    = 0.9
	DefaultUpQueued   = 0.05
	DefaultDownCores  = 0.75
	DefaultDownQueued = 0.02
	DefaultCalm       = 40 // a second of 25 ms windows

	// QueuedDelay is the scheduling delay from which a goroutine counts as queued,
	// rounded up to a bucket boundary of the runtime's histogram (229 µs in Go 1.26's).
	QueuedDelay = 200 * time.Microsecond

	// minQueuedSamples is how many scheduling samples a window needs for its queued
	// share to count: the runtime samples about one scheduling in eight, and a quiet
	// window's one delayed sample out of three (a GC worker, a timer) says nothing of
	// load.
	minQueuedSamples = 16

	// minDelayed is how many delayed samples a window needs for its queued share to
	// count. At one agent on 2 cores a window at one P holds 20–60 samples, and about
	// one window in twenty has a delayed one (a GC worker, a timer, the machine's other
	// processes): one alone put the share over UpQueued, raised GOMAXPROCS, and the
	// bounce that followed kept the process at the maximum for seconds. Under a load
	// one P cannot carry, a window has hundreds of samples and a quarter or more
	// delayed.
	minDelayed = 4

	maxCalmFactor = 64
	bounceWithin  = 2 * time.Second
)

// Options tune a [Controller]; zero values take the defaults.
type Options struct {
	// Max is GOMAXPROCS when busy; 0 means the runtime's default (the CPUs the process
	// may use, its cgroup CPU limit included), followed as the runtime updates it. That
	// default ignores a GOMAXPROCS variable: with one set, do not run the controller.
	Max int
	// Window is the sampling period.
	Window time.Duration
	// UpCores and UpQueued: one window at one P over either (CPU in cores; the share
	// of scheduled goroutines that waited QueuedDelay or more) raises GOMAXPROCS.
	UpCores, UpQueued float64
	// DownCores and DownQueued: Calm windows at the maximum averaging under both lower
	// GOMAXPROCS to one.
	DownCores, DownQueued float64
	Calm                  int
}

// sample is what the controller reads at the end of a window.
type sample struct {
	cpu            time.Duration // the process's CPU time so far
	sched, delayed uint64        // goroutines scheduled so far, and of those, queued
}

// Controller adapts GOMAXPROCS; see the package documentation.
type Controller struct {
	opts Options
	read func() (sample, bool) // false: the CPU time cannot be read here
	set  func(n int) int       // sets GOMAXPROCS to n (0: the maximum) and returns it
	max  func() int            // the maximum, read while GOMAXPROCS is there
	log  *zap.Logger

	// Owned by the goroutine running the controller.
	procs      int       // the current GOMAXPROCS: one while low, else the maximum
	low        bool      // this controller lowered GOMAXPROCS to one
	calmNeeded int       // windows the next lowering averages over
	n          int       // windows in the current run at the maximum
	sumCores   float64   // their CPU
	sumQueued  float64   // their queued share
	lowered    time.Time // when GOMAXPROCS was last lowered

	// current reads GOMAXPROCS as it stands, for toolsd_runtime_procs: also when the
	// controller does not run (adaptive_procs off) and the runtime follows a changed
	// CPU limit by itself.
	current func() int
	gauge   prometheus.GaugeFunc
	changes prometheus.Counter
}

// New returns a controller that starts at opts.Max. It registers its metrics with reg
// (nil: none): toolsd_runtime_procs, the current GOMAXPROCS, and
// toolsd_runtime_procs_changes_total.
func New(opts Options, reg prometheus.Registerer, log *zap.Logger) *Controller {
	opts.Max = max(opts.Max, 0)
	if opts.Window <= 0 {
		opts.Window = DefaultWindow
	}
	for _, d := range []struct {
		v   *float64
		def float64
	}{{&opts.UpCores, DefaultUpCores}, {&opts.UpQueued, DefaultUpQueued}, {&opts.DownCores, DefaultDownCores}, {&opts.DownQueued, DefaultDownQueued}} {
		if *d.v <= 0 {
			*d.v = d.def
		}
	}
	if opts.Calm <= 0 {
		opts.Calm = DefaultCalm
	}
	if log == nil {
		log = zap.NewNop()
	}
	set, maxProcs := runtimeProcs(opts.Max)
	c := &Controller{
		opts: opts, read: readRuntime(), set: set, max: maxProcs, log: log,
		procs: maxProcs(), calmNeeded: opts.Calm,
		current: func() int { return runtime.GOMAXPROCS(0) },
		changes: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "toolsd", Subsystem: "runtime", Name: "procs_changes_total",
			Help: "Changes of GOMAXPROCS by the adaptive controller.",
		}),
	}
	c.gauge = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "toolsd", Subsystem: "runtime", Name: "procs",
		Help: "GOMAXPROCS now: with runtime.adaptive_procs, 1 while one P is enough and all CPUs when busy.",
	}, func() float64 { return float64(c.current()) })
	if reg != nil {
		reg.MustRegister(c.gauge, c.changes)
	}
	return c
}

// runtimeProcs returns the setter of GOMAXPROCS for the maximum maxProcs (0: the
// runtime's default), and the reader of the maximum while GOMAXPROCS is there.
func runtimeProcs(maxProcs int) (set func(int) int, read func() int) {
	toMax := func() { runtime.GOMAXPROCS(maxProcs) }
	read = func() int { return maxProcs }
	if maxProcs == 0 {
		// runtime.GOMAXPROCS(n) would pin the default it had when the controller was
		// made, and keep the runtime from following the CPU limit.
		toMax = runtime.SetDefaultGOMAXPROCS
		read = func() int { return runtime.GOMAXPROCS(0) }
	}
	set = func(n int) int {
		if n == 0 {
			toMax()
		} else {
			runtime.GOMAXPROCS(n)
		}
		return runtime.GOMAXPROCS(0)
	}
	return set, read
}

// readRuntime returns the reader of the process's CPU time and the runtime's
// scheduling latencies.
func readRuntime() func() (sample, bool) {
	ms := []metrics.Sample{{Name: "/sched/latencies:seconds"}}
	return func() (sample, bool) {
		cpu, ok := processCPU()
		if !ok {
			return sample{}, false
		}
		s := sample{cpu: cpu}
		metrics.Read(ms)
		if ms[0].Value.Kind() != metrics.KindFloat64Histogram {
			return s, true
		}
		s.sched, s.delayed = countQueued(ms[0].Value.Float64Histogram())
		return s, true
	}
}

// countQueued returns the goroutines the scheduling latency histogram h counts, and of
// those, the ones in buckets from QueuedDelay up: QueuedDelay is rounded up to the next
// bucket boundary (Buckets[i] is bucket i's lower bound, the first -Inf, the last
// bucket's upper bound +Inf).
func countQueued(h *metrics.Float64Histogram) (sched, delayed uint64) {
	for i, n := range h.Counts {
		sched += n
		if h.Buckets[i] >= QueuedDelay.Seconds() {
			delayed += n
		}
	}
	return sched, delayed
}

// Run adapts GOMAXPROCS every window until ctx ends, then restores the maximum (a
// drain after a quiet period should not run on one P). It does nothing when Options.Max
// is one P or the process's CPU time cannot be read. With the runtime's default as the
// maximum it keeps sampling while that default is one P: the runtime raises it when the
// process's CPU affinity or limit grows.
func (c *Controller) Run(ctx context.Context) {
	t := time.NewTicker(c.opts.Window)
	defer t.Stop()
	c.run(ctx, t.C, time.Now)
}

func (c *Controller) run(ctx context.Context, tick <-chan time.Time, now func() time.Time) {
	if c.opts.Max == 1 {
		return
	}
	c.follow()
	w, ok := c.start(now())
	if !ok {
		c.log.Info("adaptive GOMAXPROCS off: the process's CPU time cannot be read here")
		return
	}
	defer func() { c.apply(false, now()) }()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
			c.sample(&w, now())
		}
	}
}

// window is where the current sampling window started.
type window struct {
	at   sample
	wall time.Time
}

func (c *Controller) start(wall time.Time) (window, bool) {
	s, ok := c.read()
	return window{s, wall}, ok
}

// sample ends the window w at wall, adapts GOMAXPROCS to what it saw, and starts the
// next window.
func (c *Controller) sample(w *window, wall time.Time) {
	s, ok := c.read()
	if !ok || !wall.After(w.wall) {
		return
	}
	cores := float64(s.cpu-w.at.cpu) / float64(wall.Sub(w.wall))
	var queued float64
	if n, d := s.sched-w.at.sched, s.delayed-w.at.delayed; n >= minQueuedSamples && d >= minDelayed {
		queued = float64(d) / float64(n)
	}
	*w = window{s, wall}
	c.follow()
	c.apply(c.decide(cores, queued), wall)
}

// follow reads the maximum while GOMAXPROCS is there: the runtime may have updated its
// default.
func (c *Controller) follow() {
	if c.low {
		return
	}
	if n := c.max(); n != c.procs {
		c.log.Debug("GOMAXPROCS changed by the runtime", zap.Int("from", c.procs), zap.Int("to", n))
		c.procs = n
	}
}

// decide returns whether GOMAXPROCS is to be one for the next window, given the CPU
// the last one used (in cores) and the share of its scheduled goroutines that were
// queued.
func (c *Controller) decide(cores, queued float64) (low bool) {
	if c.low {
		return cores <= c.opts.UpCores && queued <= c.opts.UpQueued
	}
	if c.procs <= 1 {
		return false // the maximum is one P: nothing to lower
	}
	c.n++
	c.sumCores += cores
	c.sumQueued += queued
	if c.n < c.calmNeeded {
		return false
	}
	calm := c.sumCores/float64(c.n) < c.opts.DownCores && c.sumQueued/float64(c.n) < c.opts.DownQueued
	c.n, c.sumCores, c.sumQueued = 0, 0, 0
	return calm
}

// apply lowers GOMAXPROCS to one (low) or raises it to the maximum at wall, unless it
// is there already.
func (c *Controller) apply(low bool, wall time.Time) {
	if low == c.low {
		return
	}
	switch {
	case low:
		c.lowered = wall
	case wall.Sub(c.lowered) < bounceWithin:
		c.calmNeeded = min(2*c.calmNeeded, maxCalmFactor*c.opts.Calm) // one P was not enough
	default:
		c.calmNeeded = c.opts.Calm
	}
	n := 1
	if !low {
		n = 0
	}
	n = c.set(n)
	c.log.Debug("GOMAXPROCS changed", zap.Int("from", c.procs), zap.Int("to", n), zap.Int("next_calm_windows", c.calmNeeded))
	c.low = low
	c.procs = n
	c.changes.Inc()
}
