package scheduler

import (
	"time"

	"go.uber.org/zap"

	"github.com/toolsd/toolsd/internal/tool"
)

// DefaultMaxParallel is the pool bound when [WithMaxParallel] is not given.
const DefaultMaxParallel = 8

// Option configures a [Scheduler].
type Option func(*options)

type options struct {
	maxParallel int
	logger      *zap.Logger
	observer    Observer
	commitDelay time.Duration
}

func defaultOptions() options {
	return options{maxParallel: DefaultMaxParallel, logger: zap.NewNop(), observer: NopObserver{}}
}

// WithMaxParallel sets the largest pool a batch may use; a batch's own MaxParallel can
// only lower it. Values below 1 mean 1: every call then runs alone.
func WithMaxParallel(n int) Option {
	return func(o *options) { o.maxParallel = max(n, 1) }
}

// WithLogger sets the logger for panics, log failures and departed clients (nil: none).
func WithLogger(l *zap.Logger) Option {
	return func(o *options) {
		if l == nil {
			l = zap.NewNop()
		}
		o.logger = l
	}
}

// WithCommitDelay lets a batch's ready results wait up to d for the calls still
// running before they are appended to the log, so that results finishing close together
// share one append (default 0: every ready prefix is appended at once). It suits a log
// whose appends cost a commit each: a durable log pays its fsync once for the results
// instead of once per run of them, and a client sees an early result at most d later.
// Single-call batches and batches whose other calls have all finished never wait.
func WithCommitDelay(d time.Duration) Option {
	return func(o *options) { o.commitDelay = max(d, 0) }
}

// WithObserver sets the observer of scheduling events (nil: none). Metrics plug in here.
func WithObserver(obs Observer) Option {
	return func(o *options) {
		if obs == nil {
			obs = NopObserver{}
		}
		o.observer = obs
	}
}

// Observer watches scheduling as it happens. Its methods are called on the hot path by
// the goroutine that schedules a batch (concurrently for concurrent batches) and must
// return quickly.
type Observer interface {
	// PoolOccupancy reports how many calls of one batch are running, after each change.
	PoolOccupancy(running int)
	// CallStarted reports a call handed to the [Runner].
	CallStarted(c *tool.Call)
	// CallSkipped reports a call that got a synthetic ABORTED_BEFORE_DISPATCH result.
	CallSkipped(c *tool.Call)
	// Panicked reports a recovered panic: of a call's runner, mode lookup, result sink
	// or session log.
	Panicked()
}

// NopObserver ignores everything; embed it to implement part of [Observer].
type NopObserver struct{}

// PoolOccupancy does nothing.
func (NopObserver) PoolOccupancy(int) {}

// CallStarted does nothing.
func (NopObserver) CallStarted(*tool.Call) {}

// CallSkipped does nothing.
func (NopObserver) CallSkipped(*tool.Call) {}

// Panicked does nothing.
func (NopObserver) Panicked() {}

var _ Observer = NopObserver{}
