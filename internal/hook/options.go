package hook

import (
	"context"
	"time"

	"go.uber.org/zap"
)

// Defaults of the [Option]s.
const (
	DefaultTimeout        = 5 * time.Second
	DefaultMaxHooks       = 100
	DefaultMaxScopedHooks = 100
	// DefaultMaxHooksPerIdentity caps one confined identity's hooks.
	DefaultMaxHooksPerIdentity = 10
	DefaultHelloTimeout        = 10 * time.Second
	DefaultResultQueue         = 256
	// DefaultSendTimeout is how long a message may wait to be taken by a hook before the
	// hook counts as stuck and its stream ends.
	DefaultSendTimeout = 10 * time.Second
	// DefaultMaxContexts and DefaultMaxContextBytes bound the add_context entries one
	// call keeps from its post-execute hooks together.
	DefaultMaxContexts     = 16
	DefaultMaxContextBytes = 64 << 10
)

const (
	// requestQueue bounds the requests waiting for a stream's writer; a hook that
	// stopped reading fails further requests at once instead of holding them.
	requestQueue = 256
	// goodbyeWait bounds how long a stream closed by a shutdown waits to send its queued
	// result notifications and say goodbye: a hook that stopped reading must not stall
	// shutdown.
	goodbyeWait = time.Second
	// Hello limits.
	maxNameBytes     = 128
	maxSubscriptions = 64
	maxGlobBytes     = 256
	maxGlobStars     = 3
)

// Observer receives the hub's countable events; the metrics layer implements it so this
// package does not import Prometheus. Methods are called on hot paths and must not
// block. Embed [NopObserver] to stay compatible when methods are added.
type Observer interface {
	// HookConnected is called with +1 when a hook named hook is welcomed and with -1
	// when it leaves. Hooks choose their names, and several may share one.
	HookConnected(hook string, delta int)
	// HookFailure counts a hook that could not be used for a call at stage
	// ("pre_execute", "post_execute", "result"): no answer by the deadline, a dropped
	// stream, a full queue, an invalid answer, or a required hook not connected (see
	// [WithRequired]; no hook of its name may be connected then). failOpen reports that
	// the call went on without it (a fail-open hook, or a dropped result notification);
	// false means the call failed closed with POLICY_UNAVAILABLE. It may come just
	// after the hook's HookConnected(hook, -1): the requests pending on a dropped
	// stream fail once the hook is unsubscribed.
	HookFailure(hook, stage string, failOpen bool)
	// NotificationsLost counts n result notifications for a hook named hook that its
	// stream's end kept from being sent: queued when the stream dropped (or still
	// queued once a shutdown stopped waiting to send them), or the one being sent. It
	// comes just after the hook's HookConnected(hook, -1). A notification dropped
	// because the queue was full is a HookFailure instead.
	NotificationsLost(hook string, n int)
	// ContextsDropped counts n add_context entries of one decision of a hook named hook
	// that were dropped because they would take the call past [WithMaxContexts].
	ContextsDropped(hook string, n int)
	// Panicked counts a panic recovered while a hook's message was handled: the hook's
	// stream ended with INTERNAL.
	Panicked()
}

// NopObserver ignores every event.
type NopObserver struct{}

// HookConnected implements [Observer].
func (NopObserver) HookConnected(string, int) {}

// HookFailure implements [Observer].
func (NopObserver) HookFailure(string, string, bool) {}

// NotificationsLost implements [Observer].
func (NopObserver) NotificationsLost(string, int) {}

// ContextsDropped implements [Observer].
func (NopObserver) ContextsDropped(string, int) {}

// Panicked implements [Observer].
func (NopObserver) Panicked() {}

// ScopeFilter returns, for the stream in ctx, the scopes whose calls the hook may see.
// An error refuses the stream.
type ScopeFilter func(ctx context.Context) (Scopes, error)

// Scopes are the scopes a hook's identity may see.
type Scopes struct {
	// Allow reports whether the hook may see the calls of scope; nil allows every
	// scope. auth.Authorizer.ScopeFilter for the Subscribe action fits.
	Allow func(scope string) bool
	// Confined says that the identity may not see every tenant's calls
	// (auth.Authorizer.Unconfined is false): its hooks count against
	// [WithMaxScopedHooks] instead of [WithMaxHooks], so a tenant's hooks can never
	// take the places of the operator's.
	Confined bool
	// Identity names the caller; a confined identity's hooks are also capped on their
	// own ([WithMaxHooksPerIdentity]), so one tenant cannot take every confined place.
	Identity string
}

// Option configures a [Hub].
type Option func(*options)

type options struct {
	log          *zap.Logger
	timeout      time.Duration
	helloTimeout time.Duration
	maxHooks     int
	maxScoped    int
	maxPerID     int
	resultQueue  int
	sendTimeout  time.Duration
	// maxContexts and maxContextBytes bound the add_context entries of one call.
	maxContexts     int
	maxContextBytes int
	obs             Observer
	now             func() time.Time
	filter          ScopeFilter
	required        []Requirement
	traceContext    TraceContext
}

func defaultOptions() options {
	return options{
		log:          zap.NewNop(),
		timeout:      DefaultTimeout,
		helloTimeout: DefaultHelloTimeout,
		maxHooks:     DefaultMaxHooks,
		maxScoped:    DefaultMaxScopedHooks,
		maxPerID:     DefaultMaxHooksPerIdentity,
		resultQueue:  DefaultResultQueue,
		sendTimeout:  DefaultSendTimeout,
		obs:          NopObserver{},

		maxContexts:     DefaultMaxContexts,
		maxContextBytes: DefaultMaxContextBytes,
		now:             time.Now,
	}
}

// TraceContext returns the trace context headers (W3C traceparent and tracestate, by
// lower-case name; valid UTF-8, as the wire needs) of the span in ctx, or nil when
// there are none. A function, so that this package needs no tracing library.
type TraceContext func(ctx context.Context) map[string]string

// WithTraceContext sets how a call's trace context is read from its context, to send
// with each pre- and post-execute request; nil, the default, sends none.
func WithTraceContext(f TraceContext) Option { return func(o *options) { o.traceContext = f } }

// WithLogger sets the logger; nil means zap.NewNop().
func WithLogger(l *zap.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.log = l
		}
	}
}

// WithTimeout sets the deadline of each request to a hook ([DefaultTimeout] when d <= 0).
func WithTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.timeout = d
		}
	}
}

// WithHelloTimeout bounds how long a new stream may take to say hello.
func WithHelloTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.helloTimeout = d
		}
	}
}

// WithMaxHooks caps the hooks connected at once whose identity is not confined to
// some scopes (see [Scopes]): every hook without a scope filter, the operator's with
// one ([DefaultMaxHooks] when n <= 0). A further one's stream is refused.
func WithMaxHooks(n int) Option {
	return func(o *options) {
		if n > 0 {
			o.maxHooks = n
		}
	}
}

// WithMaxScopedHooks caps the hooks connected at once whose identity is confined to
// some scopes ([DefaultMaxScopedHooks] when n <= 0). The two caps are separate, so
// hooks of tenants cannot lock the operator's policy hooks out.
func WithMaxScopedHooks(n int) Option {
	return func(o *options) {
		if n > 0 {
			o.maxScoped = n
		}
	}
}

// WithMaxHooksPerIdentity caps the hooks connected at once of one confined identity
// ([DefaultMaxHooksPerIdentity] when n <= 0), within [WithMaxScopedHooks].
func WithMaxHooksPerIdentity(n int) Option {
	return func(o *options) {
		if n > 0 {
			o.maxPerID = n
		}
	}
}

// WithResultQueue sets how many result notifications may wait for one hook's stream
// before further ones are dropped ([DefaultResultQueue] when n <= 0).
func WithResultQueue(n int) Option {
	return func(o *options) {
		if n > 0 {
			o.resultQueue = n
		}
	}
}

// WithSendTimeout sets how long one message may wait for a hook to take it before the
// hook counts as stuck: its stream ends, its pending requests fail (open or closed as
// the hook asked) and what was queued for it is freed ([DefaultSendTimeout] when d <= 0).
func WithSendTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.sendTimeout = d
		}
	}
}

// WithMaxContexts bounds the add_context entries one call keeps from its post-execute
// hooks together: at most n entries of at most bytes bytes in all ([DefaultMaxContexts]
// and [DefaultMaxContextBytes] when a value is <= 0). The batch gathers every call's
// entries into one message to the agent loop, which a hook must not be able to make
// larger than the loop can receive. An entry that would take the call past either
// bound is dropped, logged and counted ([Observer.ContextsDropped]); later entries
// that fit are kept, in order.
func WithMaxContexts(n, bytes int) Option {
	return func(o *options) {
		if n > 0 {
			o.maxContexts = n
		}
		if bytes > 0 {
			o.maxContextBytes = bytes
		}
	}
}

// WithObserver installs the metrics observer; nil keeps [NopObserver].
func WithObserver(obs Observer) Option {
	return func(o *options) {
		if obs != nil {
			o.obs = obs
		}
	}
}

// WithClock replaces time.Now for request deadlines and connection times. Deadline
// timers still run on real time.
func WithClock(now func() time.Time) Option {
	return func(o *options) {
		if now != nil {
			o.now = now
		}
	}
}

// WithScopeFilter confines each hook to the scopes its identity may subscribe to: a call
// outside them is never sent to it, whatever scope glob it subscribed with. Without
// one, every hook sees every scope.
func WithScopeFilter(f ScopeFilter) Option { return func(o *options) { o.filter = f } }

// WithRequired makes hooks required: while no connected hook meets a requirement (one
// of its name, of an identity not confined to some scopes, subscribed to the call), a
// call it covers fails closed with POLICY_UNAVAILABLE, denied before execution or its
// result blocked after, and counted as the named hook's failure. What a requirement
// covers is its own, not the hook's subscriptions: those of a hook that is not
// connected are unknown. A hook that meets a requirement fails closed for the calls it
// covers, whatever its hello's fail_open says (which still holds for its other calls).
// Without requirements (the default) a call is asked of the hooks connected, whatever
// they are.
func WithRequired(rs ...Requirement) Option {
	return func(o *options) { o.required = append(o.required, rs...) }
}
