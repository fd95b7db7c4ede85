package auth

import (
	"time"

	"go.uber.org/zap"
)

// Defaults of the options.
const (
	// DefaultLeeway absorbs clock skew when checking a JWT's exp and nbf.
	DefaultLeeway = 30 * time.Second
	// DefaultMaxOwnedSessions caps the in-memory session ownership table.
	DefaultMaxOwnedSessions = 1 << 18
)

// Option configures [New].
type Option func(*options)

type options struct {
	logger           *zap.Logger
	clock            func() time.Time
	leeway           time.Duration
	maxOwnedSessions int
	owners           OwnerStore
}

func defaultOptions() options {
	return options{
		logger:           zap.NewNop(),
		clock:            time.Now,
		leeway:           DefaultLeeway,
		maxOwnedSessions: DefaultMaxOwnedSessions,
	}
}

func applyOptions(opts []Option) options {
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// WithLogger sets the logger (nil keeps the no-op default). Credentials are never logged.
func WithLogger(l *zap.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.logger = l
		}
	}
}

// WithClock sets the clock JWT times are checked against (default time.Now).
func WithClock(now func() time.Time) Option {
	return func(o *options) {
		if now != nil {
			o.clock = now
		}
	}
}

// WithLeeway sets the clock skew tolerated on a JWT's exp and nbf (default
// [DefaultLeeway]; negative values count as zero).
func WithLeeway(d time.Duration) Option {
	return func(o *options) { o.leeway = max(d, 0) }
}

// WithOwnerStore keeps session owners in s, so that ownership survives a restart; the
// in-memory table then only caches them.
func WithOwnerStore(s OwnerStore) Option {
	return func(o *options) { o.owners = s }
}

// WithMaxOwnedSessions caps the in-memory session ownership table (default
// [DefaultMaxOwnedSessions]). With an [OwnerStore] the table is a cache and drops an
// entry at the cap; without one, claiming a new session at the cap fails with
// [ErrOwnershipFull] until [Authorizer.ForgetSession] frees room.
func WithMaxOwnedSessions(n int) Option {
	return func(o *options) {
		if n > 0 {
			o.maxOwnedSessions = n
		}
	}
}
