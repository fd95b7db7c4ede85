package provider

import (
	"context"
	"errors"
	"math"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// ErrRunning is returned by [Provider.Run] and [Provider.Serve] when the provider is
// already running.
var ErrRunning = errors.New("provider: already running")

// Default reconnect backoff of [Provider.Run].
const (
	DefaultMinBackoff = 100 * time.Millisecond
	DefaultMaxBackoff = 10 * time.Second
)

// DefaultRetakeWindow is how long a tool whose name toolsd reports taken
// (ALREADY_EXISTS) is registered again before the provider gives up on it: long enough
// for toolsd to notice that the provider's previous connection died.
const DefaultRetakeWindow = 2 * time.Minute

type options struct {
	version     string
	log         *zap.Logger
	scope       string
	dial        []grpc.DialOption
	backoffMin  time.Duration
	backoffMax  time.Duration
	maxInFlight uint32
	retakeFor   time.Duration
	grace       time.Duration
	// keepTime and keepTimeout are the keepalive's; a keepTime of 0 turns it off.
	keepTime, keepTimeout time.Duration
	// streamWindow and connWindow are the flow-control windows granted to toolsd.
	streamWindow, connWindow int32
	// welcomeWait bounds the wait for toolsd's welcome after the hello.
	welcomeWait time.Duration
	// now and newTimer time the retakes of a taken name (see session.retake); nil is
	// the system clock. Tests set them (export_test.go) to run retakes without waiting.
	now      func() time.Time
	newTimer func(d time.Duration) (c <-chan time.Time, stop func() bool)
}

// clockNow is the time retakes are timed by.
func (o *options) clockNow() time.Time {
	if o.now != nil {
		return o.now()
	}
	return time.Now()
}

// timer is a timer of d for a retake.
func (o *options) timer(d time.Duration) (<-chan time.Time, func() bool) {
	if o.newTimer != nil {
		return o.newTimer(d)
	}
	t := time.NewTimer(d)
	return t.C, t.Stop
}

// Option configures a [Provider].
type Option func(*options)

// WithVersion sets the version reported to toolsd (for its logs).
func WithVersion(v string) Option { return func(o *options) { o.version = v } }

// WithLogger sets the logger the provider logs to. Without it (or with nil) the
// provider writes its warnings and errors to standard error, as grpc-go writes its
// own: a tool toolsd refused (an invalid schema, a scope it may not register in, a name
// another provider holds, a definition held back), a stream that ended, a handler that
// panicked; a refused tool is otherwise never called and nothing says why.
// zap.NewNop() turns logging off.
func WithLogger(l *zap.Logger) Option {
	return func(o *options) { o.log = l }
}

// stderrLogger is the logger of a provider given none: warnings and errors, one line
// each, on standard error.
func stderrLogger() *zap.Logger {
	enc := zap.NewDevelopmentEncoderConfig()
	core := zapcore.NewCore(zapcore.NewConsoleEncoder(enc), zapcore.Lock(os.Stderr), zap.WarnLevel)
	return zap.New(core).Named("toolsd-provider")
}

// WithScope sets the scope the tools are registered in; "" (the default) is global.
func WithScope(scope string) Option { return func(o *options) { o.scope = scope } }

// WithDialOptions adds gRPC dial options for [Provider.Run]. Without transport
// credentials among them the connection is insecure (plaintext).
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(o *options) { o.dial = append(o.dial, opts...) }
}

// Default flow-control windows the provider grants toolsd (see [WithWindows]).
const (
	DefaultStreamWindow = 1 << 20
	DefaultConnWindow   = 4 << 20
)

// WithWindows sets the HTTP/2 flow-control windows the provider grants toolsd for its
// calls' arguments: per stream and per connection. Fixed windows (the default:
// [DefaultStreamWindow] and [DefaultConnWindow]) spare the ping round trip gRPC's
// bandwidth-delay estimation adds to every burst of data. A 0 in either restores that
// estimation for both (gRPC fixes both windows or neither). gRPC raises sizes under
// 64 KiB to 64 KiB.
func WithWindows(stream, conn int32) Option {
	return func(o *options) { o.streamWindow, o.connWindow = stream, conn }
}

// WithBackoff sets the reconnect delay of [Provider.Run]: it starts at minDelay, doubles
// after each failed attempt up to maxDelay, and is jittered down by up to half. It
// starts over once a stream has lasted maxDelay. The connection to toolsd is dialled
// again on the same schedule (gRPC's own backoff would grow to two minutes while
// toolsd is down; grpc.WithConnectParams among [WithDialOptions] overrides this). A
// maxDelay below minDelay is minDelay; 0 or less keeps the default.
func WithBackoff(minDelay, maxDelay time.Duration) Option {
	return func(o *options) {
		if minDelay > 0 {
			o.backoffMin = minDelay
		}
		if maxDelay > 0 {
			o.backoffMax = maxDelay
		}
		o.backoffMax = max(o.backoffMax, o.backoffMin) // never below where it starts
	}
}

// Default keepalive of [Provider.Run] (see [WithKeepalive]): a vanished toolsd is
// found within about 15 s.
const (
	DefaultKeepaliveTime    = 10 * time.Second
	DefaultKeepaliveTimeout = 5 * time.Second
)

// WithKeepalive sets how [Provider.Run] finds a connection whose toolsd vanished
// without closing it (power loss, a network partition), which TCP alone would keep
// for minutes: after interval without traffic the provider pings toolsd, and when
// nothing arrives within timeout of the ping it closes the connection and reconnects.
// gRPC raises an interval under 10 s to 10 s. An interval of 0 or less turns the pings
// off; a timeout of 0 or less keeps the default. The defaults are
// [DefaultKeepaliveTime] and [DefaultKeepaliveTimeout], within toolsd's policy (a ping
// every 5 s at most); a server or proxy that permits fewer pings answers them with
// GOAWAY (too_many_pings), after which gRPC doubles the interval.
// grpc.WithKeepaliveParams among [WithDialOptions] overrides this.
func WithKeepalive(interval, timeout time.Duration) Option {
	return func(o *options) {
		o.keepTime = max(interval, 0)
		if timeout > 0 {
			o.keepTimeout = timeout
		}
	}
}

// WithRetakeWindow sets how long a tool whose name toolsd reports taken is registered
// again before the provider gives up on it (see [DefaultRetakeWindow]); 0 or less
// turns the retries off.
func WithRetakeWindow(d time.Duration) Option { return func(o *options) { o.retakeFor = d } }

// DefaultWelcomeTimeout is how long a session waits for toolsd's welcome after its
// hello (see [WithWelcomeTimeout]): longer than toolsd's own wait for a hello, so a
// toolsd that is slow to welcome is not given up on first.
const DefaultWelcomeTimeout = 30 * time.Second

// WithWelcomeTimeout sets how long a session waits for toolsd's welcome once it has
// said hello. A server that takes the stream and never answers (a toolsd that hangs, a
// proxy that holds streams) ends the session when it passes, with an error saying so;
// [Provider.Run] then reconnects after its backoff. Keepalive pings do not catch such
// a server, since its transport answers them. 0 or less keeps the default,
// [DefaultWelcomeTimeout].
func WithWelcomeTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.welcomeWait = d
		}
	}
}

// DefaultShutdownGrace is how long [Provider.Run] and [Provider.Serve] wait, once their
// context ends, for the running handlers to return (see [WithShutdownGrace]).
const DefaultShutdownGrace = 5 * time.Second

// WithShutdownGrace sets how long [Provider.Run] and [Provider.Serve] wait for running
// handlers once their context has ended (or, for Serve, once its stream has ended); 0
// or less does not wait. The handlers' contexts are cancelled at once, and the stream
// to toolsd stays open for the grace, so a handler that finishes in time still
// delivers its result. A handler still running when the grace is over is abandoned:
// the provider closes the stream, toolsd fails the call with PROVIDER_GONE (and may
// retry an idempotent tool elsewhere), the handler is logged as left running, and Run
// returns without waiting for it (its goroutine ends whenever the handler returns; its
// result is dropped). The default is [DefaultShutdownGrace].
func WithShutdownGrace(d time.Duration) Option {
	return func(o *options) { o.grace = max(d, 0) }
}

// WithMaxInFlight asks toolsd to send at most n calls at once (0 means toolsd's limit).
func WithMaxInFlight(n int) Option {
	return func(o *options) { o.maxInFlight = uint32(min(max(n, 0), math.MaxUint32)) }
}

// Provider serves tools to toolsd over its callback stream. Create it with [New], add
// tools with [Provider.Add] and run it with [Provider.Run].
type Provider struct {
	name string
	opts options
	log  *zap.Logger

	ready     chan struct{}
	readyOnce sync.Once
	running   atomic.Bool
	// wg counts the sessions' helper goroutines (retakes, answers to calls that cannot
	// run); they end with their stream, and Run and Serve wait for them. Handlers are
	// counted in handlers instead: Run and Serve wait for those for the shutdown grace
	// only.
	wg sync.WaitGroup

	mu     sync.Mutex
	tools  []*toolImpl // registration order
	byName map[string]*toolImpl
	cur    *session // the live stream, if any
	id     string
	// answers are toolsd's answers about the tools on cur, by name; a tool without one
	// is pending (see Registrations). Cleared as a stream begins and ends.
	answers map[string]regAnswer
	// handlers are the handlers running, on any session (one may outlive its
	// session's stream); idle is closed while there are none.
	handlers map[*running]struct{}
	idle     chan struct{}
}

// New returns a provider that introduces itself to toolsd as name.
func New(name string, opts ...Option) *Provider {
	o := options{backoffMin: DefaultMinBackoff, backoffMax: DefaultMaxBackoff, retakeFor: DefaultRetakeWindow,
		streamWindow: DefaultStreamWindow, connWindow: DefaultConnWindow, grace: DefaultShutdownGrace,
		keepTime: DefaultKeepaliveTime, keepTimeout: DefaultKeepaliveTimeout, welcomeWait: DefaultWelcomeTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	if o.log == nil {
		o.log = stderrLogger()
	}
	idle := make(chan struct{})
	close(idle)
	return &Provider{
		name:     name,
		opts:     o,
		log:      o.log.With(zap.String("provider", name)),
		ready:    make(chan struct{}),
		byName:   make(map[string]*toolImpl),
		handlers: make(map[*running]struct{}),
		idle:     idle,
	}
}

// Add adds tools, before or while the provider runs. While it is connected the tools
// are registered at once; otherwise with the others when the stream (re)connects. A
// tool named like one already added replaces it: its handler serves the next calls,
// and, while connected, a changed definition replaces the one toolsd holds (the name is
// unregistered, then registered again; toolsd's answers are logged). The same
// definition is not sent again.
func (p *Provider) Add(tools ...Tool) {
	added := make([]*toolImpl, 0, len(tools))
	at := make(map[string]int, len(tools)) // index in added, by name
	before := make(map[string]*toolImpl)   // the tool a name had before this Add
	p.mu.Lock()
	for _, t := range tools {
		if t == nil {
			continue
		}
		ti := t.impl()
		if old, ok := p.byName[ti.Name()]; ok {
			if _, seen := at[ti.Name()]; !seen {
				before[ti.Name()] = old
			}
			for i := range p.tools {
				if p.tools[i] == old {
					p.tools[i] = ti
				}
			}
		} else {
			p.tools = append(p.tools, ti)
		}
		p.byName[ti.Name()] = ti
		// Only the last of a name is registered: toolsd keeps the first definition of a
		// name it is sent.
		if i, ok := at[ti.Name()]; ok {
			added[i] = ti
		} else {
			at[ti.Name()] = len(added)
			added = append(added, ti)
		}
	}
	for name, old := range before {
		if !proto.Equal(old.def, p.byName[name].def) {
			delete(p.answers, name) // pending until toolsd answers the replacement
		}
	}
	s := p.cur
	p.mu.Unlock()
	if s == nil {
		return
	}
	var fresh []*toolImpl
	var changed []string
	for _, ti := range added {
		switch old, ok := before[ti.Name()]; {
		case !ok:
			fresh = append(fresh, ti)
		case !proto.Equal(old.def, ti.def):
			changed = append(changed, ti.Name())
		}
	}
	if len(fresh) > 0 {
		s.register(fresh)
	}
	if len(changed) > 0 {
		s.replace(changed)
	}
}

// ProviderID returns the id toolsd assigned to the current stream, or "" while
// disconnected.
func (p *Provider) ProviderID() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.id
}

// Ready is closed once the provider's tools were registered for the first time (toolsd
// answered the first registration, whatever it accepted, which [Provider.Registrations]
// then says; with no tools added, once toolsd welcomed the provider). It stays open while toolsd cannot be reached, and for
// good when [Provider.Run] or [Provider.Serve] returns before that (its context ended
// first: a provider shutting down registers nothing): wait for it together with their
// return, or with the context given them, rather than alone:
//
//	go func() { errc <- p.Run(ctx, addr) }()
//	select {
//	case <-p.Ready():
//	case err := <-errc: // stopped before its tools were registered
//	}
func (p *Provider) Ready() <-chan struct{} { return p.ready }

func (p *Provider) markReady() { p.readyOnce.Do(func() { close(p.ready) }) }

func (p *Provider) lookup(name string) *toolImpl {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.byName[name]
}

// lookupAll returns the tools of names the provider has, in the order of names.
func (p *Provider) lookupAll(names []string) []*toolImpl {
	p.mu.Lock()
	defer p.mu.Unlock()
	tools := make([]*toolImpl, 0, len(names))
	for _, name := range names {
		if t := p.byName[name]; t != nil {
			tools = append(tools, t)
		}
	}
	return tools
}

// names returns the names of the provider's tools, in registration order.
func (p *Provider) names() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	names := make([]string, len(p.tools))
	for i, t := range p.tools {
		names[i] = t.Name()
	}
	return names
}

// attach makes s the live stream and returns the tools to register on it.
func (p *Provider) attach(s *session, id string) []*toolImpl {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cur, p.id = s, id
	clear(p.answers) // every tool is pending on the new stream
	return append([]*toolImpl(nil), p.tools...)
}

func (p *Provider) detach(s *session) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur == s {
		p.cur, p.id = nil, ""
		clear(p.answers) // toolsd removed the stream's tools with it
	}
}

// track counts r's handler as running.
func (p *Provider) track(r *running) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.handlers) == 0 {
		p.idle = make(chan struct{})
	}
	p.handlers[r] = struct{}{}
}

// untrack counts r's handler as returned.
func (p *Provider) untrack(r *running) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.handlers[r]; !ok {
		return
	}
	delete(p.handlers, r)
	if len(p.handlers) == 0 {
		close(p.idle)
	}
}

// awaitHandlers waits until no handler runs or grace ends. Handlers still running then
// are logged as left running; it reports whether every handler returned.
func (p *Provider) awaitHandlers(grace context.Context) bool {
	p.mu.Lock()
	idle := p.idle
	p.mu.Unlock()
	select {
	case <-idle:
		return true
	case <-grace.Done():
	}
	p.mu.Lock()
	left := make([]*running, 0, len(p.handlers))
	for r := range p.handlers {
		left = append(left, r)
	}
	p.mu.Unlock()
	if len(left) == 0 {
		return true
	}
	slices.SortFunc(left, func(a, b *running) int { return a.started.Compare(b.started) })
	for _, r := range left {
		p.log.Warn("handler still running after the shutdown grace; left running", zap.String("tool", r.tool),
			zap.Uint64("request_id", r.id), zap.String("call_id", r.callID), zap.String("session_id", r.sessionID),
			zap.Duration("running_for", time.Since(r.started)), zap.Duration("shutdown_grace", p.opts.grace))
	}
	return false
}
