package session

import (
	"fmt"
	"time"

	"go.uber.org/zap"
)

// Mode is the durability a [Bolt] store promises when Append returns.
type Mode int

const (
	// SyncAlways fsyncs every group commit before releasing its appends (default).
	SyncAlways Mode = iota
	// SyncNone leaves flushing to the OS: appends survive a process crash, not a power loss.
	SyncNone
)

// String returns the mode as flags and logs spell it.
func (m Mode) String() string {
	if m == SyncNone {
		return "none"
	}
	return "always"
}

// ParseMode parses a durability mode as flags spell it: "always" or "none".
func ParseMode(s string) (Mode, error) {
	switch s {
	case "always":
		return SyncAlways, nil
	case "none":
		return SyncNone, nil
	}
	return SyncAlways, fmt.Errorf("%w: durability %q (want always or none)", ErrInvalid, s)
}

// Defaults of the options.
const (
	DefaultMaxEventBytes = 16 << 20
	DefaultQueueSize     = 1024
	DefaultSweepInterval = time.Minute
	DefaultLockTimeout   = 2 * time.Second
	DefaultHotFor        = 5 * time.Minute
)

// Option configures a store.
type Option func(*options)

type options struct {
	durability    Mode
	maxAge        time.Duration
	maxSessions   int
	sweepInterval time.Duration
	clock         func() time.Time
	maxEventBytes int
	queueSize     int
	lockTimeout   time.Duration
	compactBytes  int64
	hotFor        time.Duration
	observer      Observer
	logger        *zap.Logger
	// swept, if set, runs for each session retention deletes (see WithSwept).
	swept func(id string)
}

func defaultOptions() options {
	return options{
		durability:    SyncAlways,
		sweepInterval: DefaultSweepInterval,
		clock:         time.Now,
		maxEventBytes: DefaultMaxEventBytes,
		queueSize:     DefaultQueueSize,
		lockTimeout:   DefaultLockTimeout,
		compactBytes:  DefaultCompactBytes,
		hotFor:        DefaultHotFor,
		observer:      nopObserver{},
		logger:        zap.NewNop(),
	}
}

func applyOptions(opts []Option) options {
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// retains reports whether any retention limit is set.
func (o *options) retains() bool { return o.maxAge > 0 || o.maxSessions > 0 }

// now is the store's clock, rounded to drop the monotonic reading so that stored and
// returned times compare equal.
func (o *options) now() time.Time { return o.clock().Round(0).UTC() }

// WithDurability sets the durability mode of [Bolt] and [Journal] (default
// [SyncAlways]). The memory store ignores it.
func WithDurability(m Mode) Option { return func(o *options) { o.durability = m } }

// WithRetention deletes sessions idle for longer than maxAge (0: no age limit) and,
// beyond maxSessions sessions (0: no limit), the longest idle ones. A session is idle
// since its last append or, when it has none, since its owner was claimed. A session
// with an open call (a tool/call without its result) or held ([Store.Hold]) is never
// deleted, but it counts toward maxSessions: the longest idle sessions that can be
// deleted go in its place.
func WithRetention(maxAge time.Duration, maxSessions int) Option {
	return func(o *options) {
		o.maxAge = max(maxAge, 0)
		o.maxSessions = max(maxSessions, 0)
	}
}

// WithSwept has swept run for each session retention deletes, as [Store.Delete] runs
// its then: once the session is deleted and before a batch may hold its id again. What
// must not outlive the session, such as tool sets that judged its history, ends there.
// It runs in the sweep ([Bolt] and [Journal]: on their writer), so it must be quick
// and must not append to or delete from the store. A panic in it is recovered, logged
// and reported to a [PanicObserver], as one in a Delete's then is. nil: nothing runs.
func WithSwept(swept func(id string)) Option { return func(o *options) { o.swept = swept } }

// sweptThen is what [options.runThen] runs for session id once retention has deleted it: the
// [WithSwept] hook, or nil.
func (o *options) sweptThen(id string) func() {
	if o.swept == nil {
		return nil
	}
	return func() { o.swept(id) }
}

// WithSweepInterval sets how often the retention sweeper runs (default
// [DefaultSweepInterval]; <= 0 disables the background sweeper, Sweep still works).
func WithSweepInterval(d time.Duration) Option { return func(o *options) { o.sweepInterval = d } }

// WithClock injects the clock that stamps events and ages sessions (tests).
func WithClock(now func() time.Time) Option {
	return func(o *options) {
		if now != nil {
			o.clock = now
		}
	}
}

// WithMaxEventBytes caps one event's payload (default [DefaultMaxEventBytes]); a larger
// event fails the whole Append with [ErrTooLarge].
func WithMaxEventBytes(n int) Option {
	return func(o *options) {
		if n > 0 {
			o.maxEventBytes = min(n, maxValueBytes)
		}
	}
}

// WithQueueSize bounds the [Bolt] or [Journal] writer's queue of pending appends (default
// [DefaultQueueSize]); an Append waits for room (or its ctx) when it is full.
func WithQueueSize(n int) Option {
	return func(o *options) {
		if n > 0 {
			o.queueSize = n
		}
	}
}

// WithLockTimeout bounds how long Open or OpenJournal waits for the lock another
// process holds on the data directory's log (default [DefaultLockTimeout]).
func WithLockTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.lockTimeout = d
		}
	}
}

// WithCompactBytes sets the size below which the [Journal] never rewrites its file
// (default [DefaultCompactBytes]); above it, the journal is rewritten when more than
// half of it belongs to deleted sessions.
func WithCompactBytes(n int64) Option {
	return func(o *options) {
		if n > 0 {
			o.compactBytes = n
		}
	}
}

// WithHotFor sets how long the [Journal] keeps a session's events in memory after its
// last append (default [DefaultHotFor]); then, unless a Watch holds it, only their
// count and locations are kept and a read brings them back from the file. d < 0 keeps
// none past the commit (every read goes to the file); 0 means the default.
func WithHotFor(d time.Duration) Option {
	return func(o *options) {
		if d != 0 {
			o.hotFor = d
		}
	}
}

// WithObserver receives metrics; nil means none.
func WithObserver(obs Observer) Option {
	return func(o *options) {
		if obs == nil {
			obs = nopObserver{}
		}
		o.observer = obs
	}
}

// WithLogger sets the logger (nil → no logging).
func WithLogger(l *zap.Logger) Option {
	return func(o *options) {
		if l == nil {
			l = zap.NewNop()
		}
		o.logger = l
	}
}

type nopObserver struct{}

func (nopObserver) AppendDone(int, time.Duration) {}
func (nopObserver) SyncDone(time.Duration)        {}
