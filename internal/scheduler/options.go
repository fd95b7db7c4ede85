package scheduler

import (
	"time"

	"go.uber.org/zap"

	"github.com/toolsd/toolsd/internal/tool"
)

// DefaultMaxParallel is the pool bound when [WithMaxParallel] is not given.
const DefaultMaxParallel = 8

// DefaultMaxContextBytes bounds a batch's additional contexts when
// [WithMaxContextBytes] is not given.
const DefaultMaxContextBytes = 1 << 20

// Option configures a [Scheduler].
type Option func(*options)

type options struct {
	maxParallel     int
	maxContextBytes int
	logger          *zap.Logger
	observer        Observer
	commitDelay     time.Duration
}

func defaultOptions() options {
	return options{maxParallel: DefaultMaxParallel, maxContextBytes: DefaultMaxContextBytes, logger: zap.NewNop(), observer: NopObserver{}}
}

// WithMaxParallel sets the largest pool a batch may use; a batch's own MaxParallel can
// only lower it. Values below 1 mean 1: every call then runs alone.
func WithMaxParallel(n int) Option {
	return func(o *options) { o.maxParallel = max(n, 1) }
}

// WithMaxContextBytes bounds the additional contexts of one batch together, as they
// are encoded in the one message that delivers them when the batch settles (each entry
// takes 2 to 6 bytes more than its text); [DefaultMaxContextBytes] when n <= 0. That
// message must stay within what the agent loop can receive, whatever the calls' results
// ask. A context that would take the batch past n is dropped, from [Settled] and from
// the log alike, and counted ([Observer.ContextsDropped]); later ones that fit are kept,
// in order.
func WithMaxContextBytes(n int) Option {
	return func(o *options) {
		if n > 0 {
			o.maxContextBytes = n
		}
	}
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
	// ContextsDropped reports n additional contexts of one batch dropped for
	// [WithMaxContextBytes].
	ContextsDropped(n int)
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

// ContextsDropped does nothing.
func (NopObserver) ContextsDropped(int) {}

var _ Observer = NopObserver{}
