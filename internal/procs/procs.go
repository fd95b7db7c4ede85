// Package procs adapts the Go runtime's GOMAXPROCS to toolsd's load.
//
// With more than one P, each hand-off between goroutines on a quiet process (a
// transport's reader to a handler, the handler to the writer, a provider stream's
// receive loop back to the handler) readies a goroutine while another P is idle, and
// the runtime wakes a thread to run it: a futex call and a cross-core wake-up per
// hand-off, on the latency path of every call. With one P the readied goroutine runs
// next on the same thread. Measured on 2 cores (BENCHMARKS.md), one P cuts a lone
// call's p50 by about a sixth, but costs about a sixth of the throughput once calls
// keep a core busy.
//
// A [Controller] runs toolsd on one P while it uses little CPU and on all of them once
// it is busy: it samples the process's CPU time every window, raises GOMAXPROCS to the
// maximum as soon as one window at one P used more than Up cores, and lowers it to one
// after Calm windows in a row under Down cores. The gap between the thresholds and the
// run of calm windows keep it from flapping; a change stops the world for a moment,
// which at most a few changes a second make negligible.
package procs

import (
	"context"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// Defaults of [Options].
const (
	DefaultWindow = 25 * time.Millisecond
	DefaultUp     = 0.4
	DefaultDown   = 0.2
	DefaultCalm   = 40 // a second of 25 ms windows
)

// Options tune a [Controller]; zero values take the defaults.
type Options struct {
	// Max is GOMAXPROCS when busy; 0 means the value GOMAXPROCS has when the
	// controller is made (Go's default: the CPUs the process may use).
	Max int
	// Window is the sampling period.
	Window time.Duration
	// Up is the CPU, in cores, that one window at one P must exceed to raise
	// GOMAXPROCS to Max.
	Up float64
	// Down is the CPU, in cores, that Calm windows in a row at Max must stay under to
	// lower GOMAXPROCS to one.
	Down float64
	// Calm is that run of windows.
	Calm int
}

// Controller adapts GOMAXPROCS; see the package documentation.
type Controller struct {
	opts    Options
	cpu     func() (time.Duration, bool) // the process's CPU time so far; false: unknown
	set     func(int)
	log     *zap.Logger
	procs   int // the current GOMAXPROCS, as this controller set it
	calm    int // windows in a row under Down at Max
	gauge   prometheus.Gauge
	changes prometheus.Counter
}

// New returns a controller that starts at opts.Max. It registers its metrics with reg
// (nil: none): toolsd_runtime_procs, the current GOMAXPROCS, and
// toolsd_runtime_procs_changes_total.
func New(opts Options, reg prometheus.Registerer, log *zap.Logger) *Controller {
	if opts.Max <= 0 {
		opts.Max = runtime.GOMAXPROCS(0)
	}
	if opts.Window <= 0 {
		opts.Window = DefaultWindow
	}
	if opts.Up <= 0 {
		opts.Up = DefaultUp
	}
	if opts.Down <= 0 {
		opts.Down = DefaultDown
	}
	if opts.Calm <= 0 {
		opts.Calm = DefaultCalm
	}
	if log == nil {
		log = zap.NewNop()
	}
	c := &Controller{
		opts: opts, cpu: processCPU, set: func(n int) { runtime.GOMAXPROCS(n) }, log: log, procs: opts.Max,
		gauge: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "toolsd", Subsystem: "runtime", Name: "procs",
			Help: "GOMAXPROCS as the adaptive controller set it (runtime.adaptive_procs): 1 while toolsd uses little CPU, all CPUs when busy.",
		}),
		changes: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "toolsd", Subsystem: "runtime", Name: "procs_changes_total",
			Help: "Changes of GOMAXPROCS by the adaptive controller.",
		}),
	}
	c.gauge.Set(float64(opts.Max))
	if reg != nil {
		reg.MustRegister(c.gauge, c.changes)
	}
	return c
}

// Run adapts GOMAXPROCS every window until ctx ends, then restores the maximum (a
// drain after a quiet period should not run on one P). It does nothing when the
// maximum is one P or the process's CPU time cannot be read.
func (c *Controller) Run(ctx context.Context) {
	t := time.NewTicker(c.opts.Window)
	defer t.Stop()
	c.run(ctx, t.C, time.Now)
}

func (c *Controller) run(ctx context.Context, tick <-chan time.Time, now func() time.Time) {
	if c.opts.Max <= 1 {
		return
	}
	w, ok := c.start(now())
	if !ok {
		c.log.Info("adaptive GOMAXPROCS off: the process's CPU time cannot be read here")
		return
	}
	defer c.apply(c.opts.Max)
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
	cpu  time.Duration
	wall time.Time
}

func (c *Controller) start(wall time.Time) (window, bool) {
	cpu, ok := c.cpu()
	return window{cpu, wall}, ok
}

// sample ends the window w at wall, adapts GOMAXPROCS to the cores it used, and starts
// the next window.
func (c *Controller) sample(w *window, wall time.Time) {
	cpu, ok := c.cpu()
	if !ok || !wall.After(w.wall) {
		return
	}
	cores := float64(cpu-w.cpu) / float64(wall.Sub(w.wall))
	*w = window{cpu, wall}
	c.apply(c.decide(cores))
}

// decide returns GOMAXPROCS for the next window, given the cores the last one used.
func (c *Controller) decide(cores float64) int {
	if c.procs < c.opts.Max {
		if cores > c.opts.Up {
			return c.opts.Max
		}
		return c.procs
	}
	if cores >= c.opts.Down {
		c.calm = 0
		return c.procs
	}
	if c.calm++; c.calm < c.opts.Calm {
		return c.procs
	}
	c.calm = 0
	return 1
}

// apply sets GOMAXPROCS to n if it differs.
func (c *Controller) apply(n int) {
	if n == c.procs {
		return
	}
	c.set(n)
	c.log.Debug("GOMAXPROCS changed", zap.Int("from", c.procs), zap.Int("to", n))
	c.procs = n
	c.gauge.Set(float64(n))
	c.changes.Inc()
}
