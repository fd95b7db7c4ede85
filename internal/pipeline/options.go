package pipeline

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/toolsd/toolsd/internal/tool"
)

// Option configures a [Pipeline].
type Option func(*options)

type options struct {
	cfg      Config
	policy   Policy
	pre      []PreExecute
	guards   []Guard
	execute  []Interceptor
	post     []PostExecute
	results  []ResultObserver
	fits     ResultFits
	observer Observer
	tracer   StageTracer
	logger   *zap.Logger
	now      func() time.Time
	sleep    func(ctx context.Context, d time.Duration) error
	backoff  func(attempt int, cfg RetryConfig) time.Duration
	after    func(d time.Duration, f func()) (stop func() bool)
	// connected reports whether a provider is connected; nil when unknown.
	connected func(providerID string) bool
}

// ResultObserver receives each call's final outcome and its duration from the start of
// Run. It runs synchronously and must treat e and r as frozen (read-only).
type ResultObserver func(e *tool.Exec, r tool.Result, d time.Duration)

// ResultFits reports whether a call's final result fits where it is recorded (the
// session log's limit for one event). It runs synchronously on every call's goroutine,
// must be quick, and must treat e and r as read-only.
type ResultFits func(e *tool.Exec, r *tool.Result) bool

// WithResultFits installs the check of each final result against where it is recorded:
// a result that does not fit becomes RESULT_TOO_LARGE (what it asked of the turn kept)
// before the result observers and the stage tracer see it, so that the call's metrics
// and log line say what the session log and the client get.
func WithResultFits(fits ResultFits) Option { return func(o *options) { o.fits = fits } }

// WithProviderConnected tells the pipeline whether a provider is connected. A call
// whose tool no longer resolves after it waited for approval, and whose provider is not
// connected, then goes on to dispatch, which finds the provider gone
// (PROVIDER_UNAVAILABLE), rather than being taken for restricted away
// (ABORTED_BEFORE_DISPATCH).
func WithProviderConnected(connected func(providerID string) bool) Option {
	return func(o *options) { o.connected = connected }
}

// WithConfig sets the limits and defaults.
func WithConfig(cfg Config) Option { return func(o *options) { o.cfg = cfg } }

// WithPolicy installs an operator policy (see [Pipeline.SetPolicy]).
func WithPolicy(p Policy) Option { return func(o *options) { o.policy = p } }

// WithPreExecute appends pre-execute participants, consulted in order after the policy.
func WithPreExecute(ps ...PreExecute) Option {
	return func(o *options) { o.pre = append(o.pre, ps...) }
}

// WithGuards appends monotonic guards, run in order after pre-execute and approval.
func WithGuards(gs ...Guard) Option { return func(o *options) { o.guards = append(o.guards, gs...) } }

// WithInterceptors appends execute interceptors. They run inside the built-in metrics,
// timeout and retry layers (so once per attempt), the first being the outermost.
func WithInterceptors(is ...Interceptor) Option {
	return func(o *options) { o.execute = append(o.execute, is...) }
}

// WithPostExecute appends post-execute participants, run in order.
func WithPostExecute(ps ...PostExecute) Option {
	return func(o *options) { o.post = append(o.post, ps...) }
}

// WithResultObservers appends observers of final outcomes, notified in order.
func WithResultObservers(obs ...ResultObserver) Option {
	return func(o *options) { o.results = append(o.results, obs...) }
}

// WithObserver installs the metrics layer of the execute chain, outside the timeout,
// the retries and the operator's interceptors.
func WithObserver(obs Observer) Option { return func(o *options) { o.observer = obs } }

// WithStageTracer installs a tracer that follows every call through its stages (stage
// metrics, trace spans); nil means none, at the cost of one nil check per call.
func WithStageTracer(t StageTracer) Option { return func(o *options) { o.tracer = t } }

// WithLogger sets the logger; nil means zap.NewNop().
func WithLogger(l *zap.Logger) Option { return func(o *options) { o.logger = l } }

// WithClock replaces time.Now for durations and the retry budget.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WithSleep replaces the retry's wait; it must return ctx.Err() when ctx ends first.
func WithSleep(sleep func(ctx context.Context, d time.Duration) error) Option {
	return func(o *options) { o.sleep = sleep }
}

// WithBackoff replaces the delay before retry attempt number attempt (2, 3, …).
func WithBackoff(backoff func(attempt int, cfg RetryConfig) time.Duration) Option {
	return func(o *options) { o.backoff = backoff }
}

// WithApprovalTimer replaces the timer that ends an approval wait after the approval
// timeout: after must call f once d has passed, unless stop (which reports whether it
// kept f from being called) was called first. The default is [time.AfterFunc].
func WithApprovalTimer(after func(d time.Duration, f func()) (stop func() bool)) Option {
	return func(o *options) { o.after = after }
}
