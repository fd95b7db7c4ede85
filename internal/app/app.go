package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/auth"
	"github.com/toolsd/toolsd/internal/broker"
	"github.com/toolsd/toolsd/internal/config"
	"github.com/toolsd/toolsd/internal/hook"
	"github.com/toolsd/toolsd/internal/observe"
	"github.com/toolsd/toolsd/internal/pipeline"
	"github.com/toolsd/toolsd/internal/pipeline/policy"
	"github.com/toolsd/toolsd/internal/procs"
	"github.com/toolsd/toolsd/internal/registry"
	"github.com/toolsd/toolsd/internal/scheduler"
	"github.com/toolsd/toolsd/internal/server"
	"github.com/toolsd/toolsd/internal/session"
	"github.com/toolsd/toolsd/internal/streamgate"
	"github.com/toolsd/toolsd/internal/tool"
)

// App is one assembled toolsd process.
type App struct {
	cfg      *config.Config
	log      *zap.Logger
	metrics  *prometheus.Registry
	procs    *procs.Controller
	reg      *registry.Registry
	broker   *broker.Broker
	hub      *hook.Hub
	sessions session.Store
	pipe     *pipeline.Pipeline
	sched    *scheduler.Scheduler
	srv      *server.Server
	grpc     *grpc.Server
	health   *health.Server
	lis      net.Listener
	adminLis net.Listener
	admin    *http.Server
	obs      *observe.Metrics
	tracing  *observe.Tracing
	example  string // notes file of the bundled example provider; "" = off
	// stopExample ends the example provider (set by Run when it runs one).
	stopExample context.CancelFunc
	// wrapStore, if set, wraps the opened session store (see WithSessionStoreWrapper).
	wrapStore func(session.Store) session.Store
	// healthNames are the names health answers for, all with one status (see setServing).
	healthNames []string
	// sweptReg is reg once built, for the session store's retention hook (see
	// endSessionToolSets), which may run on the store's sweeper before then.
	sweptReg atomic.Pointer[registry.Registry]
	// sweptAuthz is the authorizer once built, for the same hook (see sessionSwept).
	sweptAuthz atomic.Pointer[auth.Authorizer]
	// stopper is the session store when it can stop by itself (a durable one), else nil.
	stopper session.Stopper
	// retired holds tool names whose last registration went, until their series go.
	retired *retiredNames
	// retiredHooks holds hook names whose last hook left, until their series go.
	retiredHooks *retiredNames
	// retiredMax, if positive, replaces maxRetiredTools (see WithRetiredToolSeries).
	retiredMax int
	// forgettingTool, if set, runs as a retired tool name's series are about to go (see
	// WithToolSeriesForgetting).
	forgettingTool func(name string)
	// approvalTimer, if set, replaces the approval wait's timer (see WithApprovalTimer).
	approvalTimer func(d time.Duration, f func()) (stop func() bool)
	// approvalWaitEnded, if set, runs as an approval wait ends unanswered (see
	// WithApprovalWaitEnded).
	approvalWaitEnded func()
	// sendClock, if set, times the sends to peers (see WithSendClock).
	sendClock streamgate.Clock
	// registryClock, if set, times tool sets' idleness (see WithRegistryClock).
	registryClock func() time.Time
	// tracingOpts configure tracing when the config enables it (see WithTracing).
	tracingOpts []observe.TracingOption
	// pinSaver keeps the registry's pins in the data directory (nil: they live in
	// memory only).
	pinSaver *pinSaver
	// stopped is set once the session store reported it stopped after a failed write
	// (see storeWatch): toolsd is then not ready until it restarts.
	stopped atomic.Bool
	// authn is the running authenticator, whose credentials a reload replaces.
	authn *auth.Authenticator
	// authz is the running authorizer, whose grants a reload replaces.
	authz *auth.Authorizer
	// serverTLS is the listener's TLS (nil: plaintext), whose files a reload replaces.
	serverTLS *auth.ServerTLS
	// reloadMu runs reloads one at a time, so that the reload metrics describe the
	// policy the last one left in force.
	reloadMu sync.Mutex
}

// Option configures [New].
type Option func(*App)

// WithLogger sets the logger (nil → no logs).
func WithLogger(l *zap.Logger) Option { return func(a *App) { a.log = l } }

// WithListener serves gRPC on l instead of listening on the configured address.
func WithListener(l net.Listener) Option { return func(a *App) { a.lis = l } }

// WithAdminListener serves the admin HTTP endpoints on l.
func WithAdminListener(l net.Listener) Option { return func(a *App) { a.adminLis = l } }

// WithSessionStoreWrapper wraps the session store the configuration opens: everything
// toolsd writes to or reads from the log goes through the returned store, and closing
// it must close the wrapped one. For instrumenting the log, or for tests that make it
// fail. toolsd watches the returned store for stopping by itself only if it implements
// session.Stopper, and a WatchSession resumed with expect_epoch checks its session
// again once the store's watch is attached only if it implements session.AttachWatcher.
func WithSessionStoreWrapper(wrap func(session.Store) session.Store) Option {
	return func(a *App) { a.wrapStore = wrap }
}

// WithToolSeriesKeep sets how long a tool's per-call series stay after the last
// registration of its name went (default 10 minutes): long enough for the results of its
// provider's last moments (PROVIDER_GONE) to be scraped and seen by alerts' rate windows.
// A hook name's series stay as long after its last hook left.
func WithToolSeriesKeep(d time.Duration) Option {
	return func(a *App) { a.retired = newRetiredNames(d) }
}

// WithRetiredToolSeries sets how many tool names whose last registration went keep
// their series for the keep time (default 10,000); past it, the names retired longest
// ago lose theirs at once (see WithToolSeriesKeep). It bounds as many hook names whose
// last hook left, apart.
func WithRetiredToolSeries(n int) Option {
	return func(a *App) { a.retiredMax = n }
}

// WithToolSeriesForgetting sets f to run with a retired tool name whose series are about
// to be deleted, once it was found still unregistered: for tests that register the name
// again in between.
func WithToolSeriesForgetting(f func(name string)) Option {
	return func(a *App) { a.forgettingTool = f }
}

// WithApprovalTimer replaces the timer that ends an approval wait after
// limits.approval_timeout (see pipeline.WithApprovalTimer): for tests that decide when
// a wait expires.
func WithApprovalTimer(after func(d time.Duration, f func()) (stop func() bool)) Option {
	return func(a *App) { a.approvalTimer = after }
}

// WithApprovalWaitEnded sets f to run in an approval wait that ended without the
// client's answer (its timer fired, the batch was cancelled, the client half-closed),
// before the wait is withdrawn (see server.Deps.ApprovalWaitEnded): for tests that decide
// whether an answer is read before the withdrawal.
func WithApprovalWaitEnded(f func()) Option {
	return func(a *App) { a.approvalWaitEnded = f }
}

// WithSendClock has toolsd's sends to agents (batch, read and watch streams) and to
// providers timed by clock instead of the monotonic clock, against
// limits.write_timeout (see server.Deps.SendClock and broker.WithSendClock): for tests
// that decide when a peer has waited too long.
func WithSendClock(clock streamgate.Clock) Option { return func(a *App) { a.sendClock = clock } }

// WithRegistryClock has tool sets' idleness, against registry.tool_set_idle, timed by now
// instead of time.Now (see registry.WithClock): for tests that decide when a set has
// been idle too long.
func WithRegistryClock(now func() time.Time) Option {
	return func(a *App) { a.registryClock = now }
}

// WithTracing passes opts to [observe.SetupTracing] when the config enables tracing:
// for tests that record toolsd's spans (observe.WithSpanExporter,
// observe.WithSpanProcessor).
func WithTracing(opts ...observe.TracingOption) Option {
	return func(a *App) { a.tracingOpts = append(a.tracingOpts, opts...) }
}

// WithExampleProvider runs the bundled example provider in-process, connected over
// loopback gRPC like any other provider; write_note appends to notesPath.
func WithExampleProvider(notesPath string) Option { return func(a *App) { a.example = notesPath } }

// New assembles toolsd from cfg. It opens the session store and binds the listeners
// (so the addresses are known before Run) but serves nothing yet. A New that fails
// leaves nothing running, tracing included.
func New(cfg *config.Config, opts ...Option) (_ *App, err error) {
	a := &App{cfg: cfg}
	for _, o := range opts {
		o(a)
	}
	if a.log == nil {
		a.log = zap.NewNop()
	}
	pol, err := policy.ParseNode(&cfg.Policy, cfg.Source, policy.WithMaxResultBytes(int(cfg.Limits.MaxResultBytes)))
	if err != nil {
		return nil, err
	}
	a.metrics = prometheus.NewRegistry()
	a.metrics.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	a.procs = procs.New(procs.Options{}, a.metrics, a.log)
	a.obs = observe.New(a.metrics)
	a.keepSeries()
	a.obs.ConfigLoaded() // the policy parsed above is the one in force
	if a.tracing, err = observe.SetupTracing(context.Background(), cfg.Tracing.Enabled, a.tracingOpts...); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			a.release()
		}
	}()
	if err := a.openSessions(); err != nil {
		return nil, err
	}
	if a.wrapStore != nil {
		a.sessions = a.wrapStore(a.sessions)
	}
	a.stopper, _ = a.sessions.(session.Stopper)
	a.sessions = storeWatch{a.sessions, a}
	if err := a.build(pol); err != nil {
		return nil, err
	}
	if err := a.listen(); err != nil {
		return nil, err
	}
	return a, nil
}

// release stops what a failed New started: the gRPC server's stream workers, the
// session store and tracing's span batcher each run from their creation.
func (a *App) release() {
	if a.grpc != nil {
		a.grpc.Stop()
	}
	if a.sessions != nil {
		_ = a.sessions.Close()
	}
	_ = a.tracing.Shutdown(context.Background())
}

func (a *App) openSessions() error {
	opts := []session.Option{session.WithObserver(a.obs.Session()), session.WithLogger(a.log), session.WithSwept(a.sessionSwept)}
	if ret := a.cfg.Session.Retention; ret.MaxAge > 0 || ret.MaxSessions > 0 {
		opts = append(opts, session.WithRetention(ret.MaxAge.D(), ret.MaxSessions), session.WithSweepInterval(ret.Interval.D()))
	}
	if a.cfg.Session.Store == "memory" {
		a.sessions = session.NewMemory(opts...)
		return nil
	}
	mode := session.SyncAlways
	if a.cfg.Session.Durability == "nosync" {
		mode = session.SyncNone
	}
	opts = append(opts, session.WithDurability(mode))
	if hot := a.cfg.Session.HotFor.D(); hot > 0 {
		opts = append(opts, session.WithHotFor(hot))
	} else {
		opts = append(opts, session.WithHotFor(-1))
	}
	var (
		store session.Store
		err   error
	)
	if a.cfg.Session.Store == "journal" {
		store, err = session.OpenJournal(filepath.Clean(a.cfg.DataDir), opts...)
	} else {
		store, err = session.Open(filepath.Clean(a.cfg.DataDir), opts...)
	}
	if err != nil {
		return err
	}
	a.sessions = store
	return nil
}

// sessionSwept is the session store's retention hook: what DeleteSession ends with a
// session ends with session id, which retention deleted.
func (a *App) sessionSwept(id string) {
	a.endSessionToolSets(id)
	a.forgetOwner(id)
}

// endSessionToolSets ends the tool sets that read the history of session id, which
// retention deleted, as DeleteSession ends them (see
// registry.Registry.EndSessionToolSets): such a set must not admit tools in the id's
// next session. The store opens, and may sweep, before the registry is built; a
// session deleted then has no sets.
func (a *App) endSessionToolSets(id string) {
	if reg := a.sweptReg.Load(); reg != nil {
		reg.EndSessionToolSets(id)
	}
}

// forgetOwner has the authorizer forget the owner of session id, which retention
// deleted with its owner record, as DeleteSession has it forget one (see
// auth.Authorizer.ForgetSession): its former owner must read the free id as any
// identity that does not own it. A session deleted before the authorizer is built has
// no owner in it.
func (a *App) forgetOwner(id string) {
	if z := a.sweptAuthz.Load(); z != nil {
		z.ForgetSession(id)
	}
}

// commitDelay is how long a batch's early results wait for their siblings: only the
// durable stores, where every append is a commit, gain from fewer appends.
func (a *App) commitDelay() time.Duration {
	if a.cfg.Session.Store == "memory" {
		return 0
	}
	return a.cfg.Session.Coalesce.D()
}

// skipLogger adds the call log's line for calls the scheduler skipped, so that every
// call of a batch has one.
type skipLogger struct {
	scheduler.Observer
	calls *observe.CallObserver
}

func (s skipLogger) CallSkipped(c *tool.Call) {
	s.Observer.CallSkipped(c)
	s.calls.Skipped(c)
}

// keepSeries sets up the keeping of the series of tool names no scope registers any more
// and of hook names no hook is connected under, for the keep time and at most
// maxRetiredTools (or WithRetiredToolSeries) names of each.
func (a *App) keepSeries() {
	if a.retired == nil {
		a.retired = newRetiredNames(defaultToolSeriesKeep)
	}
	if a.retiredMax > 0 {
		a.retired.max = a.retiredMax
	}
	a.retiredHooks = newRetiredNames(a.retired.keep)
	a.retiredHooks.max = a.retired.max
	a.retiredHooks.forget = a.obs.ForgetHook
}

// callObserver returns the pipeline's call observer. A tool's per-call series go some
// minutes after the last registration of its name, in any scope, so that providers
// reconnecting under new tool names do not grow /metrics. A call of the tool still in
// flight may recreate its series afterwards (see [observe.CallObserver.ForgetTool]);
// its name is then retired again.
func (a *App) callObserver() *observe.CallObserver {
	calls := observe.NewCallObserver(a.obs,
		observe.WithCallLog(a.log.Named("calls").WithOptions(zap.WithCaller(false))), // always calllog.go
		observe.WithPayloads(a.cfg.Log.Payloads),
		observe.WithTracerProvider(a.tracing.TracerProvider()),
		// A call that ended after its tool's name was forgotten recreated the name's
		// series: retired again, they go like any retired name's.
		observe.WithRevivedTool(func(name string) {
			if !a.reg.Registered(name) {
				a.retired.add(name, time.Now())
			}
		}))
	a.retired.forget = func(name string) {
		if a.reg.Registered(name) { // registered again: a later unregistration retires it anew
			return
		}
		if a.forgettingTool != nil {
			a.forgettingTool(name)
		}
		calls.ForgetTool(name)
		if a.reg.Registered(name) { // registered meanwhile: it gets its series back
			calls.PrepareTool(name)
		}
	}
	a.reg.Subscribe(func(ch registry.Change) {
		switch {
		case ch.Kind == registry.ChangeRegistered:
			a.retired.unretire(ch.Name)
			calls.PrepareTool(ch.Name)
		case ch.Kind == registry.ChangeQuarantined:
			a.retired.unretire(ch.Name) // held back, but registered: its series stay
		case ch.Kind == registry.ChangeUnregistered && !a.reg.Registered(ch.Name):
			a.retired.add(ch.Name, time.Now())
		}
	})
	return calls
}

func (a *App) build(pol *policy.Set) error {
	c := a.cfg
	authn, authz, err := auth.New(auth.FromConfig(c), auth.WithLogger(a.log), auth.WithOwnerStore(ownerStore{a.sessions}))
	if err != nil {
		return err
	}
	a.authn, a.authz = authn, authz
	a.sweptAuthz.Store(authz)
	auth.WarnIfExposed(c.Listen, authn.Enabled(), c.Auth.TLSOn(), a.log)
	if err := a.checkExample(authn.Enabled(), c.Auth); err != nil {
		return err
	}
	var brokerOpts []broker.Option
	if authz.Enabled() {
		brokerOpts = append(brokerOpts, broker.WithScopeGuard(registerGuard(authz)))
	}
	if a.tracing.Enabled() {
		brokerOpts = append(brokerOpts, broker.WithTraceContext(a.tracing.TraceContext))
	}
	pinning := pinMode(c.Registry.Pinning)
	var pins []registry.Pin
	pinPath := pinPathOf(c) // where the pins are kept across restarts: only beside a durable log
	if pinPath != "" {
		if pins, err = loadPins(pinPath); err != nil {
			return err
		}
		if len(pins) > 0 {
			a.log.Info("registry pins loaded", zap.String("path", pinPath), zap.Int("pins", len(pins)))
		}
	}
	a.reg = registry.New(
		registry.WithLogger(a.log),
		registry.WithPins(pins),
		registry.WithLimits(registry.Limits{
			MaxToolsPerScope: c.Limits.MaxToolsPerScope,
			MaxToolsPerOwner: c.Limits.MaxToolsPerProvider,
			MaxSchemaBytes:   int(c.Limits.MaxSchemaBytes),
			Args:             jsonLimits(c),

			MaxToolSetsPerOwner: c.Limits.MaxToolSetsPerIdentity,
		}),
		registry.WithPinning(pinning),
		registry.WithToolSetIdle(c.Registry.ToolSetIdle.D()),
		registry.WithClock(a.registryClock),
	)
	a.sweptReg.Store(a.reg)
	if pinPath != "" {
		a.pinSaver = newPinSaver(a.reg, pinPath, a.log)
	}
	a.obs.RegisteredTools(func() int { n, _ := a.reg.Count(); return n })
	brokerOpts = append(brokerOpts,
		broker.WithLogger(a.log),
		broker.WithObserver(a.obs.Broker()),
		broker.WithErrorMapper(registrationErrorCode),
		broker.WithSendClock(a.sendClock),
		broker.WithLimits(broker.Limits{
			MaxProviders:           c.Limits.MaxProviders,
			MaxInFlightPerProvider: c.Limits.MaxInFlightPerProvider,
			MaxToolsPerRegister:    c.Limits.MaxToolsPerProvider,
			MaxResultBytes:         int(c.Limits.MaxResultBytes),
			SendTimeout:            c.Limits.WriteTimeout.D(),
			HelloTimeout:           c.Limits.FirstMessageTimeout.D(),
			CancelGrace:            cmp.Or(c.Limits.CancelGrace.D(), -1), // 0: do not wait
		}),
	)
	a.broker = broker.New(registrar{a.reg}, brokerOpts...)
	hubOpts := []hook.Option{
		hook.WithLogger(a.log.Named("hooks")),
		hook.WithTimeout(c.Limits.HookTimeout.D()),
		hook.WithSendTimeout(c.Limits.WriteTimeout.D()),
		hook.WithHelloTimeout(c.Limits.FirstMessageTimeout.D()),
		hook.WithObserver(a.obs.Hooks(retiredHooks{a.retiredHooks})),
		hook.WithMaxHooks(c.Limits.MaxHooks),
		hook.WithMaxScopedHooks(c.Limits.MaxScopedHooks),
		hook.WithMaxHooksPerIdentity(c.Limits.MaxHooksPerIdentity),
		hook.WithMaxContexts(c.Limits.MaxHookContexts, int(c.Limits.MaxHookContextBytes)),
	}
	for i, r := range c.Hooks.Required {
		req, err := r.Requirement()
		if err != nil { // Validate refused it already
			return fmt.Errorf("app: hooks.required[%d]: %w", i, err)
		}
		hubOpts = append(hubOpts, hook.WithRequired(req))
	}
	if authz.Enabled() {
		hubOpts = append(hubOpts, hook.WithScopeFilter(func(ctx context.Context) (hook.Scopes, error) {
			allow, err := authz.ScopeFilter(ctx, auth.Subscribe)
			if err != nil {
				return hook.Scopes{}, err
			}
			id, _ := auth.FromContext(ctx)
			return hook.Scopes{Allow: allow, Confined: !authz.Unconfined(ctx, auth.Subscribe), Identity: id.Name}, nil
		}))
	}
	if a.tracing.Enabled() {
		hubOpts = append(hubOpts, hook.WithTraceContext(a.tracing.TraceContext))
	}
	a.hub = hook.New(hubOpts...)
	calls := a.callObserver()
	pipeOpts := []pipeline.Option{
		pipeline.WithPreExecute(a.hub.PreExecute()),
		pipeline.WithPostExecute(a.hub.PostExecute()),
		pipeline.WithResultObservers(a.hub.ResultObserver()),
		pipeline.WithLogger(a.log),
		pipeline.WithPolicy(pol),
		pipeline.WithObserver(a.obs.Pipeline()),
		pipeline.WithStageTracer(calls),
		pipeline.WithResultFits(resultFits),
		pipeline.WithProviderConnected(a.broker.Connected),
		pipeline.WithConfig(pipeline.Config{
			DefaultTimeout:  c.Timeouts.DefaultTool.D(),
			ApprovalTimeout: c.Limits.ApprovalTimeout.D(),
			MaxResultBytes:  int(c.Limits.MaxResultBytes),
			Retry: pipeline.RetryConfig{
				MaxAttempts: c.Retry.MaxAttempts,
				Budget:      c.Retry.Budget.D(),
				BaseDelay:   c.Retry.BaseDelay.D(),
				MaxDelay:    c.Retry.MaxDelay.D(),
			},
		}),
	}
	if a.approvalTimer != nil {
		pipeOpts = append(pipeOpts, pipeline.WithApprovalTimer(a.approvalTimer))
	}
	a.pipe = pipeline.New(resolver{a.reg}, dispatcher{a.broker}, pipeOpts...)
	a.sched = scheduler.New(a.obs.Runner(a.pipe), a.pipe, sessionLog{a.sessions},
		scheduler.WithMaxParallel(c.Scheduler.MaxParallel),
		scheduler.WithMaxContextBytes(int(c.Limits.MaxBatchContextBytes)),
		scheduler.WithCommitDelay(a.commitDelay()),
		scheduler.WithObserver(skipLogger{a.obs.Scheduler(), calls}),
		scheduler.WithLogger(a.log),
	)
	var authorizer server.Authorizer
	if authz.Enabled() {
		authorizer = authzAdapter{authz}
	}
	a.srv = server.New(server.Deps{
		Registry: a.reg, Broker: a.broker, Scheduler: a.sched, Sessions: a.sessions, Logger: a.log,
		Authorizer:        authorizer,
		WrapApprover:      a.obs.Approver,
		ApprovalWaitEnded: a.approvalWaitEnded,
		SendClock:         a.sendClock,
		Limits: server.Limits{
			MaxCallsPerBatch:      c.Limits.MaxCallsPerBatch,
			MaxRequestBytes:       int(c.Limits.MaxRequestBytes),
			OutboxSize:            c.Limits.OutboxSize,
			WriteTimeout:          c.Limits.WriteTimeout.D(),
			AcceptedHold:          c.Limits.AcceptedHold.D(),
			FirstMessageTimeout:   c.Limits.FirstMessageTimeout.D(),
			MaxBatches:            c.Limits.MaxBatches,
			MaxBatchesPerIdentity: c.Limits.MaxBatchesPerIdentity,
			MaxWatches:            c.Limits.MaxWatches,
			MaxWatchesPerIdentity: c.Limits.MaxWatchesPerIdentity,
			MaxHealthWatches:      c.Limits.MaxHealthWatches,
		},
		BatchRefused: a.obs.BatchRefused,
		WatchRefused: a.obs.WatchRefused,
	})
	var grpcMetrics *grpcprom.ServerMetrics
	gc, err := grpcConfig(a, c, authn, authz)
	if err != nil {
		return err
	}
	a.grpc, grpcMetrics = server.NewGRPCServer(gc)
	toolsdv1.RegisterToolServiceServer(a.grpc, a.srv)
	ps := providerService{b: a.broker}
	if authz.Enabled() {
		ps.admit = admitProvider(authz, &providerPlaces{max: c.Limits.MaxProvidersPerIdentity}, a.broker.ShuttingDown)
	}
	toolsdv1.RegisterProviderServiceServer(a.grpc, ps)
	toolsdv1.RegisterHookServiceServer(a.grpc, hookService{h: a.hub})
	// Health answers for the whole server ("") and for each toolsd service by name, as
	// load balancers and Kubernetes gRPC probes ask: NOT_SERVING until Run serves.
	a.health = health.NewServer()
	a.healthNames = []string{"", toolsdv1.ToolService_ServiceDesc.ServiceName,
		toolsdv1.ProviderService_ServiceDesc.ServiceName, toolsdv1.HookService_ServiceDesc.ServiceName}
	a.setServing(healthpb.HealthCheckResponse_NOT_SERVING)
	healthpb.RegisterHealthServer(a.grpc, a.srv.Health(a.health))
	a.srv.RegisterReflection(a.grpc)
	// Spans only for the methods registered above (see observe.Tracing.TraceServices).
	a.tracing.TraceServices(a.grpc.GetServiceInfo())
	if grpcMetrics != nil {
		grpcMetrics.InitializeMetrics(a.grpc)
	}
	return nil
}

func grpcConfig(a *App, c *config.Config, authn *auth.Authenticator, authz *auth.Authorizer) (server.GRPCConfig, error) {
	gc := server.GRPCConfig{
		Logger:  a.log,
		Metrics: a.metrics,
		// Room for the largest result plus framing: a message over the transport limit
		// would end a provider's whole stream instead of failing one call.
		MaxRecvMsgSize:       int(max(c.Limits.MaxRequestBytes, c.Limits.MaxResultBytes+64<<10)),
		MaxHeaderBytes:       uint32(min(c.Limits.MaxHeaderBytes, math.MaxUint32)),
		MaxConcurrentStreams: c.Limits.MaxConcurrentStreams,
		KeepaliveTime:        c.Limits.KeepaliveTime.D(),
		KeepaliveTimeout:     c.Limits.KeepaliveTimeout.D(),
		ConnectionTimeout:    c.Limits.ConnectionTimeout.D(),
		StatsHandler:         a.tracing.StatsHandler(),
		OnPanic:              a.obs.PanicRecovered,
		// Enough workers for the batches a busy machine runs at once; beyond them a
		// stream gets its own goroutine, as without workers.
		StreamWorkers: uint32(32 * runtime.GOMAXPROCS(0)),
		StreamWindow:  int32(c.Limits.StreamWindow),
		ConnWindow:    int32(c.Limits.ConnectionWindow),
	}
	if authn.Enabled() {
		gc.AuthUnary = authn.UnaryServerInterceptor()
		// A stream is authenticated once, as it opens, and authorized for its whole life
		// by the grants in force then: a reload's grants serve the streams opened after it.
		gc.AuthStream = chainStream(authn.StreamServerInterceptor(), authz.StreamServerInterceptor())
	}
	// Any tls setting turns TLS on, so that an incomplete section is an error rather
	// than a plaintext listener carrying bearer tokens in clear.
	if t := c.Auth.TLS; c.Auth.TLSOn() {
		st, err := auth.NewServerTLS(t.CertFile, t.KeyFile, t.ClientCAFile)
		if err != nil {
			return gc, err
		}
		a.serverTLS = st
		gc.Creds = credentials.NewTLS(st.Config())
	}
	return gc, nil
}

// chainStream runs outer, then inner, then the handler.
func chainStream(outer, inner grpc.StreamServerInterceptor) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		return outer(srv, ss, info, func(srv any, ss grpc.ServerStream) error { return inner(srv, ss, info, handler) })
	}
}

// checkExample refuses an auth section the bundled example provider, when it runs,
// cannot connect under: it dials without TLS or credentials.
func (a *App) checkExample(authOn bool, c config.Auth) error {
	if a.example != "" && (authOn || c.TLSOn()) {
		return errors.New("the bundled example provider connects without TLS or credentials, so it cannot run with auth or TLS configured: drop -example-provider, or the auth section")
	}
	return nil
}

// listen binds the listeners not given as options and bounds the gRPC one's open
// connections by limits.max_connections (the admin listener's are not: it serves
// operators, on loopback by default).
func (a *App) listen() error {
	var err error
	if a.lis == nil {
		if a.lis, err = net.Listen("tcp", a.cfg.Listen); err != nil {
			return listenError("grpc listener", "listen", err)
		}
	}
	lim := server.LimitConnections(a.lis, a.cfg.Limits.MaxConnections, a.obs.ConnectionRefused)
	a.obs.OpenConnections(lim.Open)
	a.lis = lim
	if a.adminLis == nil && a.cfg.AdminListen != "" {
		if a.adminLis, err = net.Listen("tcp", a.cfg.AdminListen); err != nil {
			_ = a.lis.Close()
			return listenError("admin listener", "admin_listen", err)
		}
	}
	return nil
}

// listenError is the error of a listener that could not bind the address of key: it
// names the key and its flag, so that an address another process holds says what to
// change rather than only "address already in use".
func listenError(what, key string, err error) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("app: %s: %w (another process, perhaps another toolsd, listens there: give %s, or -%s, a free address)",
			what, err, key, strings.ReplaceAll(key, "_", "-"))
	}
	return fmt.Errorf("app: %s (%s): %w", what, key, err)
}

// Addr is the gRPC listen address.
func (a *App) Addr() string { return a.lis.Addr().String() }

// AdminAddr is the admin HTTP address ("" when disabled).
func (a *App) AdminAddr() string {
	if a.adminLis == nil {
		return ""
	}
	return a.adminLis.Addr().String()
}

// Metrics is the private Prometheus registry.
func (a *App) Metrics() *prometheus.Registry { return a.metrics }

// Procs returns the adaptive GOMAXPROCS controller, whose series the app's registry
// serves. The app never runs it: GOMAXPROCS is the process's, so the program that owns
// the process does (cmd/toolsd, when runtime.adaptive_procs is on).
func (a *App) Procs() *procs.Controller { return a.procs }

// Reload swaps the policy from a freshly loaded config; in-flight calls keep the policy
// they started with. It puts the auth section's grants in force for every unary RPC and
// every stream that opens after it (a stream already open keeps the grants it was
// opened under: its provider registrations, hook scopes and session watch), unless the
// file turns authentication on or off (see config.ReloadsGrants). It reads the auth
// section's token and JWKS files again and puts them, with the jwt claims, in force
// from the next RPC (streams already open keep their identity), unless the file turns
// authentication or client certificates on or off, which takes effect at the next
// start (see config.ReloadsCredentials); likewise the TLS
// certificate, key and client CAs, for the handshakes that begin after it, unless the
// file turns TLS or client certificates on or off (config.ReloadsTLS). Nothing else is
// reloaded, but the file is the one the next start reads, so what a start would refuse
// is refused now and the running policy and credentials stay: a tool's
// max_result_bytes is checked against the running limits.max_result_bytes and the
// file's, the auth section (its grants, token and key files, TLS files) as a start
// builds it, refused under the bundled example provider as at a start, the pin file a
// start would read, and the tracing exporter and resource a start would build from the
// OTEL_* variables when the file turns tracing on. Each reload counts in
// toolsd_config_reloads_total{result} and sets toolsd_config_last_reload_successful
// (and, when it succeeds, its timestamp).
func (a *App) Reload(cfg *config.Config) error {
	a.reloadMu.Lock()
	defer a.reloadMu.Unlock()
	err := a.reload(cfg)
	a.obs.ConfigReloaded(err == nil)
	return err
}

// ReloadFile is what SIGHUP does: it loads the config file at path with the overrides
// (the command line's flags), as a start does, and reloads from it. A file that does not
// load is a failed reload. It returns the loaded config.
func (a *App) ReloadFile(path string, over ...config.Override) (*config.Config, error) {
	cfg, err := config.Load(path, over...)
	if err != nil {
		a.reloadMu.Lock()
		defer a.reloadMu.Unlock()
		a.obs.ConfigReloaded(false)
		return nil, err
	}
	return cfg, a.Reload(cfg)
}

// reload applies cfg's policy and credentials, or refuses cfg as [App.Reload] says:
// everything is built and checked before anything is put in force.
func (a *App) reload(cfg *config.Config) error {
	pol, err := a.reloadPolicy(cfg)
	if err != nil {
		return err
	}
	authn, authz, serverTLS, err := a.buildAuth(cfg)
	if err != nil {
		return err
	}
	if path := pinPathOf(cfg); path != "" {
		if _, err := readPins(path); err != nil { // a start with cfg reads them
			return err
		}
	}
	if err := observe.CheckTracing(context.Background(), cfg.Tracing.Enabled, a.tracingOpts...); err != nil {
		return fmt.Errorf("app: tracing.enabled: %w", err) // a start with cfg turns it on
	}
	a.pipe.SetPolicy(pol)
	if config.ReloadsCredentials(a.cfg.Auth, cfg.Auth) {
		if err := a.authn.ReplaceCredentials(authn); err != nil {
			return err // ReloadsCredentials kept what it refuses
		}
		if authn.Enabled() {
			a.log.Info("auth credentials reloaded", zap.String("token_file", cfg.Auth.TokenFile), zap.String("jwks_file", cfg.Auth.JWKSFile))
		}
	}
	if config.ReloadsGrants(a.cfg.Auth, cfg.Auth) {
		if err := a.authz.ReplaceGrants(authz); err != nil {
			return err // ReloadsGrants kept what it refuses
		}
		if authz.Enabled() {
			a.log.Info("auth grants reloaded", zap.Int("grants", len(cfg.Auth.Grants)))
		}
	}
	if a.serverTLS != nil && config.ReloadsTLS(a.cfg.Auth, cfg.Auth) {
		if err := a.serverTLS.ReplaceFiles(serverTLS); err != nil {
			return err // ReloadsTLS kept what it refuses
		}
		t := cfg.Auth.TLS
		a.log.Info("tls files reloaded", zap.String("cert_file", t.CertFile), zap.String("key_file", t.KeyFile), zap.String("client_ca_file", t.ClientCAFile))
	}
	return nil
}

// reloadPolicy parses cfg's policy as a start would, then, when the file raises
// limits.max_result_bytes, against the running limit, which a reload does not change:
// a tool's max_result_bytes over it is refused saying that the limit it names is the
// running one, not the file's.
func (a *App) reloadPolicy(cfg *config.Config) (*policy.Set, error) {
	file, running := cfg.Limits.MaxResultBytes, a.cfg.Limits.MaxResultBytes
	pol, err := policy.ParseNode(&cfg.Policy, cfg.Source, policy.WithMaxResultBytes(int(file)))
	if err != nil || running >= file {
		return pol, err
	}
	if pol, err = policy.ParseNode(&cfg.Policy, cfg.Source, policy.WithMaxResultBytes(int(running))); err != nil {
		return nil, fmt.Errorf("app: the running limits.max_result_bytes is %d, which a reload keeps (the file's %d takes effect at the next start): %w", running, file, err)
	}
	return pol, nil
}

// pinPathOf is where a toolsd started with c keeps its definition pins across restarts:
// beside a durable log, with pinning on; "" otherwise.
func pinPathOf(c *config.Config) string {
	if pinMode(c.Registry.Pinning) == registry.PinOff || c.Session.Store == "memory" {
		return ""
	}
	return filepath.Join(filepath.Clean(c.DataDir), pinFileName)
}

// buildAuth builds what a start would build of cfg's auth section, compiling its
// grants and reading its token, JWKS and TLS files (serverTLS is nil when cfg has no
// TLS); it refuses one the bundled example provider cannot run under, as a start does.
// Of the authorizer, only the grants are put in force (auth.Authorizer.ReplaceGrants):
// the session owners stay the running one's.
func (a *App) buildAuth(cfg *config.Config) (authn *auth.Authenticator, authz *auth.Authorizer, serverTLS *auth.ServerTLS, err error) {
	if authn, authz, err = auth.New(auth.FromConfig(cfg), auth.WithLogger(a.log)); err != nil {
		return nil, nil, nil, err
	}
	if err := a.checkExample(authn.Enabled(), cfg.Auth); err != nil {
		return nil, nil, nil, err
	}
	if t := cfg.Auth.TLS; cfg.Auth.TLSOn() {
		if serverTLS, err = auth.NewServerTLS(t.CertFile, t.KeyFile, t.ClientCAFile); err != nil {
			return nil, nil, nil, err
		}
	}
	return authn, authz, serverTLS, nil
}

// Run serves until ctx ends, then shuts down gracefully: health goes NOT_SERVING, new
// batches are refused, running batches drain until the shutdown deadline, the rest are
// aborted (and logged), providers are told, and the store is closed.
func (a *App) Run(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	if !a.stopped.Load() {
		a.setServing(healthpb.HealthCheckResponse_SERVING)
		// A store that stopped since the check set NOT_SERVING (storeStopped) before
		// the line above overwrote it; stopped is set before that, so this sees it.
		if a.stopped.Load() {
			a.setServing(healthpb.HealthCheckResponse_NOT_SERVING)
		}
	}
	g.Go(func() error {
		if err := a.grpc.Serve(a.lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			return fmt.Errorf("app: grpc: %w", err)
		}
		return nil
	})
	if a.adminLis != nil {
		a.admin = a.adminServer()
		g.Go(func() error {
			if err := a.admin.Serve(a.adminLis); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("app: admin: %w", err)
			}
			return nil
		})
	}
	if a.stopper != nil {
		g.Go(func() error {
			a.watchStoreStop(gctx)
			return nil
		})
	}
	g.Go(func() error {
		sweepEvery(gctx, time.Minute, func(now time.Time) { a.reg.SweepToolSets(now) })
		return nil
	})
	g.Go(func() error {
		sweepEvery(gctx, min(time.Minute, a.retired.keep), func(now time.Time) {
			a.retired.sweep(now)
			a.retiredHooks.sweep(now)
		})
		return nil
	})
	if a.pinSaver != nil {
		g.Go(func() error {
			sweepEvery(gctx, pinSaveEvery, func(time.Time) { _ = a.pinSaver.save() })
			return nil
		})
	}
	if a.example != "" {
		// The example provider outlives the drain like any provider would: it stops
		// once the broker has said goodbye, not when shutdown begins.
		exampleCtx, stopExample := context.WithCancel(context.WithoutCancel(ctx))
		a.stopExample = stopExample
		g.Go(func() error { return a.runExample(exampleCtx) })
	}
	a.log.Info("toolsd serving", zap.String("grpc", a.Addr()), zap.String("admin", a.AdminAddr()), zap.String("session_store", a.cfg.Session.Store))
	g.Go(func() error {
		<-gctx.Done()
		return a.shutdown() //nolint:contextcheck // gctx is already done: shutdown runs on its own deadlines
	})
	return g.Wait()
}

// hardStopMessage is logged when the gRPC server's graceful stop has not ended within
// its bound, and its remaining streams are cut off.
const hardStopMessage = "graceful stop timed out; closing the remaining streams"

func (a *App) shutdown() error {
	a.log.Info("shutting down")
	// Refuse batches before readiness drops: a client that sees NOT_SERVING must also
	// see new batches refused.
	a.srv.Drain()
	a.health.Shutdown()
	deadline := a.cfg.ShutdownTimeout()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	if err := a.srv.WaitIdle(ctx); err != nil {
		a.log.Warn("shutdown deadline reached; aborting running batches", zap.Int("batches", a.srv.Running()))
		a.srv.AbortRunning()
		// Aborted calls wait up to cancel_grace for their providers to stop the tools.
		grace, cancelGrace := context.WithTimeout(context.Background(), a.cfg.Limits.CancelGrace.D()+5*time.Second)
		_ = a.srv.WaitIdle(grace)
		cancelGrace()
	}
	a.srv.StopWatches()
	a.broker.Shutdown("toolsd is shutting down")
	if a.stopExample != nil {
		a.stopExample()
	}
	a.hub.Shutdown("toolsd is shutting down")
	stopped := make(chan struct{})
	go func() { a.grpc.GracefulStop(); close(stopped) }()
	t := time.NewTimer(5 * time.Second)
	select {
	case <-stopped:
		t.Stop()
	case <-t.C:
		a.log.Warn(hardStopMessage)
		a.grpc.Stop()
		<-stopped
	}
	if a.pinSaver != nil {
		// No provider is left to register and no operator to approve: these are the
		// pins the next start reads.
		_ = a.pinSaver.save()
	}
	if a.admin != nil {
		actx, acancel := context.WithTimeout(context.Background(), 2*time.Second)
		if err := a.admin.Shutdown(actx); err != nil {
			// Shutdown leaves a request still running (a profile or trace asked for an
			// hour, a scrape to a client that stopped reading) to its handler: closing
			// its connection ends it.
			_ = a.admin.Close()
		}
		acancel()
	}
	// A batch that outlived the grace above (its committer blocked writing to a client
	// that stopped reading) ends now that its stream is gone; its results are logged
	// before the store closes.
	idle, cancelIdle := context.WithTimeout(context.Background(), 5*time.Second)
	if err := a.srv.WaitIdle(idle); err != nil {
		a.log.Warn("closing the session store under running batches", zap.Int("batches", a.srv.Running()))
	}
	cancelIdle()
	tctx, tcancel := context.WithTimeout(context.Background(), 5*time.Second)
	if err := a.tracing.Shutdown(tctx); err != nil {
		a.log.Warn("flushing traces", zap.Error(err))
	}
	tcancel()
	if err := a.sessions.Close(); err != nil {
		return fmt.Errorf("app: closing session store: %w", err)
	}
	a.log.Info("stopped")
	return nil
}
