package broker

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/toolsd/toolsd/internal/streamgate"
	"github.com/toolsd/toolsd/internal/tool"
)

// Defaults of [Limits].
const (
	DefaultMaxProviders           = 1000
	DefaultMaxInFlightPerProvider = 1024
	DefaultMaxToolsPerRegister    = 1000
	DefaultMaxResultBytes         = 4 << 20
	DefaultHelloTimeout           = 10 * time.Second
	DefaultSendTimeout            = 10 * time.Second
	DefaultCancelGrace            = 2 * time.Second
)

// goodbyeWait bounds how long a closing stream waits for a send in progress before it
// gives up on saying goodbye, and then for the goodbye to be sent: a provider that
// stopped reading must not stall shutdown.
const goodbyeWait = time.Second

// Limits bound what the providers may hold. A zero field takes its default.
type Limits struct {
	// MaxProviders is the number of streams that may be connected at once.
	MaxProviders int
	// MaxInFlightPerProvider caps the calls one provider runs at once; a provider's hello
	// may lower it, never raise it.
	MaxInFlightPerProvider int
	// MaxToolsPerRegister caps the tools (or names) one register/unregister message carries:
	// those past it are refused one by one, and a message with over twice as many ends
	// the stream (RESOURCE_EXHAUSTED).
	MaxToolsPerRegister int
	// MaxResultBytes caps the sum of a result's payload fields (content, value, error
	// message, meta). The gRPC server's MaxRecvMsgSize must leave room above it, or a
	// larger message ends the whole stream at the transport.
	MaxResultBytes int
	// HelloTimeout is how long a new stream may take to say hello.
	HelloTimeout time.Duration
	// SendTimeout is how long a message to a provider may wait to be sent (the provider
	// not reading its stream) before the stream is ended as hung.
	SendTimeout time.Duration
	// CancelGrace is how long a call whose context ended keeps waiting, after telling the
	// provider to cancel, for the provider's answer; the call keeps its in-flight slot
	// meanwhile. Negative: do not wait.
	CancelGrace time.Duration
}

func (l Limits) withDefaults() Limits {
	if l.MaxProviders <= 0 {
		l.MaxProviders = DefaultMaxProviders
	}
	if l.MaxInFlightPerProvider <= 0 {
		l.MaxInFlightPerProvider = DefaultMaxInFlightPerProvider
	}
	if l.MaxToolsPerRegister <= 0 {
		l.MaxToolsPerRegister = DefaultMaxToolsPerRegister
	}
	if l.MaxResultBytes <= 0 {
		l.MaxResultBytes = DefaultMaxResultBytes
	}
	if l.HelloTimeout <= 0 {
		l.HelloTimeout = DefaultHelloTimeout
	}
	if l.SendTimeout <= 0 {
		l.SendTimeout = DefaultSendTimeout
	}
	if l.CancelGrace == 0 {
		l.CancelGrace = DefaultCancelGrace
	}
	return l
}

// Observer receives the broker's countable events; the metrics layer implements it so
// this package does not import Prometheus. Methods are called on hot paths, some under
// the broker's locks: they must not block or call back into the [Broker]. Embed
// [NopObserver] to stay compatible when methods are added.
type Observer interface {
	// ProviderConnected is called with +1 when a stream is welcomed and -1 when it ends.
	ProviderConnected(delta int)
	// CallRejected counts a call refused before dispatch (PROVIDER_UNAVAILABLE,
	// PROVIDER_OVERLOADED).
	CallRejected(code tool.Code)
	// StaleResult counts a result dropped because its request is not pending on the
	// stream that sent it (finished, cancelled, not sent yet, or never issued on that
	// stream: request ids are numbered per stream).
	StaleResult()
	// InvalidResult counts a result that failed its call as it was decoded: over the
	// result limit or kept back as too large (RESULT_TOO_LARGE), or text it reads that
	// is not UTF-8 (or a value-only result's value that is not JSON: INVALID_RESULT).
	// The pipeline's later checks (strict JSON, the output schema, a tool's own result
	// limit) fail calls without this count.
	InvalidResult()
	// MalformedMessage counts an ignored protocol message (empty, second hello).
	MalformedMessage()
	// Panicked counts a panic recovered while a provider's message was handled: the
	// provider's stream ended with INTERNAL.
	Panicked()
}

// NopObserver ignores every event.
type NopObserver struct{}

// ProviderConnected implements [Observer].
func (NopObserver) ProviderConnected(int) {}

// CallRejected implements [Observer].
func (NopObserver) CallRejected(tool.Code) {}

// StaleResult implements [Observer].
func (NopObserver) StaleResult() {}

// InvalidResult implements [Observer].
func (NopObserver) InvalidResult() {}

// MalformedMessage implements [Observer].
func (NopObserver) MalformedMessage() {}

// Panicked implements [Observer].
func (NopObserver) Panicked() {}

var _ Observer = NopObserver{}

// ErrorMapper turns a [Registrar] error into the error_code (a gRPC code name such as
// INVALID_ARGUMENT or ALREADY_EXISTS) and message of a ToolRegistrationStatus.
type ErrorMapper func(err error) (code, message string)

func defaultErrorMapper(err error) (string, string) { return "INVALID_ARGUMENT", err.Error() }

type options struct {
	log    *zap.Logger
	limits Limits
	obs    Observer
	mapErr ErrorMapper
	guard  ScopeGuard
	clock  streamgate.Clock

	traceContext TraceContext
}

// TraceContext returns the trace context headers (W3C traceparent and tracestate, by
// lower-case name; valid UTF-8, as the wire needs) of the span in ctx, or nil when
// there are none. The broker sends
// them with each call so that the provider's spans join the call's trace; it is a
// function so that this package needs no tracing library.
type TraceContext func(ctx context.Context) map[string]string

// WithTraceContext sets how a call's trace context is read from its context; nil, the
// default, sends none (toolsd does not trace), at no cost per call.
func WithTraceContext(f TraceContext) Option { return func(o *options) { o.traceContext = f } }

// ScopeGuard decides whether the provider whose stream context is ctx may register into
// (or unregister from) scope; a non-nil error rejects that tool with PERMISSION_DENIED.
type ScopeGuard func(ctx context.Context, scope string) error

// WithScopeGuard installs the tenancy check applied to every register and unregister.
func WithScopeGuard(g ScopeGuard) Option { return func(o *options) { o.guard = g } }

// Option configures a [Broker].
type Option func(*options)

// WithLogger sets the logger; nil means no logging.
func WithLogger(l *zap.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.log = l
		}
	}
}

// WithSendClock has the Sends on provider streams timed by clock instead of the
// monotonic clock, against Limits.SendTimeout (the checks still run every half send
// timeout of real time): for tests that decide when a provider has waited too long. nil
// keeps the monotonic clock.
func WithSendClock(clock streamgate.Clock) Option { return func(o *options) { o.clock = clock } }

// WithLimits sets the limits; zero fields keep their defaults.
func WithLimits(l Limits) Option { return func(o *options) { o.limits = l } }

// WithObserver sets the event observer; nil means none.
func WithObserver(obs Observer) Option {
	return func(o *options) {
		if obs != nil {
			o.obs = obs
		}
	}
}

// WithErrorMapper sets how registrar errors become registration status codes. The
// default reports every error as INVALID_ARGUMENT with the error's text.
func WithErrorMapper(f ErrorMapper) Option {
	return func(o *options) {
		if f != nil {
			o.mapErr = f
		}
	}
}
