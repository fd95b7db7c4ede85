package observe

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolsd/toolsd/internal/tool"
)

const namespace = "toolsd"

// Metrics holds toolsd's Prometheus metrics and hands out the adapters that feed them.
// Create it once per process with [New]; its adapters are safe for concurrent use.
type Metrics struct {
	pipe  pipelineMetrics
	sched schedulerMetrics
	brk   brokerMetrics
	hook  hookMetrics
	sess  sessionMetrics
	srv   serverMetrics
	conf  configMetrics

	toolCount, connCount lateCount
}

// lateCount is the count a GaugeFunc reports at each scrape, set once toolsd has what
// counts (see [Metrics.RegisteredTools]); it reads 0 until then.
type lateCount struct{ atomic.Pointer[func() int] }

func (c *lateCount) read() float64 {
	if f := c.Load(); f != nil && *f != nil {
		return float64((*f)())
	}
	return 0
}

type pipelineMetrics struct {
	calls         *prometheus.CounterVec   // tool, code
	callDuration  *prometheus.HistogramVec // tool
	stageDuration *prometheus.HistogramVec // tool, stage
	inFlight      prometheus.Gauge
	dispatching   prometheus.Gauge
	retries       *prometheus.CounterVec // tool, code
	approvals     prometheus.Gauge
}

type schedulerMetrics struct {
	running   prometheus.Gauge
	started   prometheus.Counter
	skipped   prometheus.Counter
	contexts  prometheus.Counter
	occupancy prometheus.Histogram
}

type brokerMetrics struct {
	providers prometheus.Gauge
	rejected  *prometheus.CounterVec // code
	stale     prometheus.Counter
	invalid   prometheus.Counter
	malformed prometheus.Counter
}

type hookMetrics struct {
	connected prometheus.Gauge
	failures  *prometheus.CounterVec // hook, stage, outcome
	lost      *prometheus.CounterVec // hook
	contexts  *prometheus.CounterVec // hook
	names     *hookNames
}

// hookNames counts the connected hooks of each name: a name labels failures only while
// it has one.
type hookNames struct {
	mu   sync.RWMutex
	live map[string]int
}

type sessionMetrics struct {
	appendDuration prometheus.Histogram
	appended       prometheus.Counter
	syncDuration   prometheus.Histogram
	journalBytes   prometheus.Gauge
	rewrites       prometheus.Counter
}

type serverMetrics struct {
	panics prometheus.Counter
	// batchesRefused counts the batches refused, by limit.
	batchesRefused *prometheus.CounterVec
	// watchesRefused counts the WatchSession, WatchSchemas and health Watch streams refused, by limit.
	watchesRefused *prometheus.CounterVec
	// connectionsRefused counts the connections the gRPC listener closed at accept,
	// limits.max_connections open (its open ones are a GaugeFunc, see
	// [Metrics.OpenConnections]).
	connectionsRefused prometheus.Counter
}

// refusals returns a server counter of streams refused for a limit, by limit, with a
// series for each of limits at 0 from the start, so that rate() sees the first
// refusals.
func refusals(name, help string, limits ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: "server", Name: name, Help: help}, []string{"limit"})
	for _, limit := range limits {
		c.WithLabelValues(limit)
	}
	return c
}

type configMetrics struct {
	reloads     *prometheus.CounterVec // result
	lastOK      prometheus.Gauge
	lastOKSince prometheus.Gauge
}

// Values of toolsd_config_reloads_total's result label.
const (
	reloadSuccess = "success"
	reloadFailure = "failure"
)

// New creates toolsd's metrics and registers them on reg, the process's private
// registry. It panics if a metric is already registered there, like
// [prometheus.Registerer.MustRegister]: New is meant to run once, at assembly.
func New(reg prometheus.Registerer, opts ...Option) *Metrics {
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	m := &Metrics{}
	m.pipe = newPipelineMetrics(o)
	m.sched = newSchedulerMetrics()
	m.brk = newBrokerMetrics()
	// Both rejection codes start at 0, so that rate() sees the first rejections.
	for _, code := range []tool.Code{tool.CodeProviderUnavailable, tool.CodeProviderOverloaded} {
		m.brk.rejected.WithLabelValues(string(code))
	}
	m.hook = newHookMetrics()
	// Failures after their hook left (requests pending on a dropped stream) count under
	// departedHook, whose series are never deleted: they start at 0 like a name's.
	m.hook.initFailures(departedHook)
	m.sess = newSessionMetrics(o)
	m.srv = serverMetrics{
		panics: counter("server", "panics_recovered_total", "Panics recovered: in gRPC handlers, a call's pipeline stages, batch scheduling (mode lookups, result delivery, session log appends), the handling of a provider's or hook's message, and what a session's deletion ends (its tool sets)."),
		// server.LimitMaxBatches and LimitMaxBatchesPerIdentity.
		batchesRefused: refusals("batches_refused_total",
			"Batches refused (RESOURCE_EXHAUSTED, LIMIT_EXCEEDED) before anything was logged because they would take toolsd past limits.max_batches, or their confined identity past limits.max_batches_per_identity, by limit.",
			"max_batches", "max_batches_per_identity"),
		// server.LimitMaxWatches, LimitMaxWatchesPerIdentity and LimitMaxHealthWatches.
		watchesRefused: refusals("watches_refused_total",
			"Watch streams refused (RESOURCE_EXHAUSTED, LIMIT_EXCEEDED) before they read or sent anything, by limit: WatchSession and WatchSchemas streams that would take toolsd past limits.max_watches open watches, or their confined identity past limits.max_watches_per_identity; health Watch streams past limits.max_health_watches.",
			"max_watches", "max_watches_per_identity", "max_health_watches"),
		connectionsRefused: counter("server", "connections_refused_total",
			"Connections the gRPC listener closed as it accepted them, before any handshake, because limits.max_connections were open."),
	}
	m.conf = newConfigMetrics()
	tools := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: namespace, Subsystem: "registry", Name: "tools",
		Help: "Tools registered across all scopes (quarantined ones excluded).",
	}, m.toolCount.read)
	connections := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: namespace, Subsystem: "server", Name: "connections",
		Help: "Open connections of the gRPC listener, from their accept to their close, handshake included (closes are seen by a sweep at each scrape).",
	}, m.connCount.read)
	p, s, b, h, ss := m.pipe, m.sched, m.brk, m.hook, m.sess
	reg.MustRegister(
		p.calls, p.callDuration, p.stageDuration, p.inFlight, p.dispatching, p.retries, p.approvals,
		s.running, s.started, s.skipped, s.contexts, s.occupancy,
		b.providers, b.rejected, b.stale, b.invalid, b.malformed,
		h.connected, h.failures, h.lost, h.contexts,
		ss.appendDuration, ss.appended, ss.syncDuration, ss.journalBytes, ss.rewrites,
		m.srv.panics, m.srv.batchesRefused, m.srv.watchesRefused, connections, m.srv.connectionsRefused, tools,
		m.conf.reloads, m.conf.lastOK, m.conf.lastOKSince,
	)
	return m
}

func newPipelineMetrics(o options) pipelineMetrics {
	return pipelineMetrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: "pipeline", Name: "calls_total",
			Help: "Tool calls finished, by tool (empty when the call never resolved) and result code (OK for success).",
		}, []string{"tool", "code"}),
		callDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Subsystem: "pipeline", Name: "call_duration_seconds",
			Help:    "Time from the start of a tool call's pipeline to its final result, by tool.",
			Buckets: o.callBuckets,
		}, []string{"tool"}),
		stageDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Subsystem: "pipeline", Name: "stage_duration_seconds",
			Help:    "Time a tool call spent in each pipeline stage (prepare, dispatch, complete), by tool.",
			Buckets: o.stageBuckets,
		}, []string{"tool", "stage"}),
		inFlight:    gauge("pipeline", "calls_in_flight", "Tool calls inside the pipeline, from resolve to final result."),
		dispatching: gauge("pipeline", "dispatches_in_flight", "Tool calls in the execute chain (at a provider or waiting to retry)."),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: "pipeline", Name: "retries_total",
			Help: "Retries of idempotent tool calls, by tool and the transient code that caused them.",
		}, []string{"tool", "code"}),
		approvals: gauge("pipeline", "approvals_pending", "Approval requests waiting for the agent loop's answer."),
	}
}

func newSchedulerMetrics() schedulerMetrics {
	return schedulerMetrics{
		running: gauge("scheduler", "running_calls", "Calls running in batch pools across all batches."),
		started: counter("scheduler", "calls_started_total", "Calls handed from a batch to the pipeline."),
		skipped: counter("scheduler", "calls_skipped_total", "Calls given ABORTED_BEFORE_DISPATCH because their batch was cancelled before they started."),
		contexts: counter("scheduler", "contexts_dropped_total",
			"Additional contexts dropped, from the settled message and the session log, because they would take their batch past limits.max_batch_context_bytes."),
		occupancy: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace, Subsystem: "scheduler", Name: "batch_pool_occupancy",
			Help:    "Running calls of one batch's pool, sampled at every change.",
			Buckets: []float64{0, 1, 2, 4, 8, 16, 32, 64, 128},
		}),
	}
}

func newBrokerMetrics() brokerMetrics {
	return brokerMetrics{
		providers: gauge("broker", "providers_connected", "Provider streams connected."),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: "broker", Name: "calls_rejected_total",
			Help: "Calls refused before reaching a provider, by code (PROVIDER_UNAVAILABLE, PROVIDER_OVERLOADED).",
		}, []string{"code"}),
		stale:     counter("broker", "stale_results_total", "Provider results dropped because their call was no longer pending on that stream."),
		invalid:   counter("broker", "invalid_results_total", "Provider results the broker refused as it decoded them: over limits.max_result_bytes or kept back by the provider as too large (RESULT_TOO_LARGE), or text it reads that is not UTF-8 (or, for a value-only result, not JSON) (INVALID_RESULT). The pipeline's later checks (strict JSON, the output schema, a tool's own max_result_bytes) fail calls counted by toolsd_pipeline_calls_total{tool,code} only."),
		malformed: counter("broker", "malformed_messages_total", "Provider protocol messages ignored as malformed."),
	}
}

func newHookMetrics() hookMetrics {
	return hookMetrics{
		connected: gauge("hook", "hooks_connected", "Remote policy hooks connected."),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: "hook", Name: "failures_total",
			Help: "Hooks that could not be used for a call, by hook (while one of that name is connected, else empty), stage and outcome (fail_open: the call went on; fail_closed: it failed with POLICY_UNAVAILABLE).",
		}, []string{"hook", "stage", "outcome"}),
		lost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: "hook", Name: "result_notifications_lost_total",
			Help: "Result notifications never sent because their hook's stream ended (dropped, or toolsd shut down) first, by hook (while one of that name is connected, else empty).",
		}, []string{"hook"}),
		contexts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: "hook", Name: "contexts_dropped_total",
			Help: "Post-execute add_context entries dropped because they would take their call past limits.max_hook_contexts or limits.max_hook_context_bytes, by hook (while one of that name is connected, else empty).",
		}, []string{"hook"}),
		names: &hookNames{live: map[string]int{}},
	}
}

func newSessionMetrics(o options) sessionMetrics {
	return sessionMetrics{
		appendDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace, Subsystem: "session", Name: "append_duration_seconds",
			Help:    "Latency of a successful session-log append, durable on return.",
			Buckets: o.sessionBuckets,
		}),
		appended: counter("session", "appended_events_total", "Events appended to session logs."),
		syncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace, Subsystem: "session", Name: "sync_duration_seconds",
			Help:    "Latency of one session-log group commit: the write and, when durable, the fsync.",
			Buckets: o.sessionBuckets,
		}),
		journalBytes: gauge("session", "journal_bytes", "Length of the journal store's file (0 with the other stores)."),
		rewrites:     counter("session", "journal_rewrites_total", "Rewrites of the journal store's file that dropped deleted sessions."),
	}
}

func newConfigMetrics() configMetrics {
	c := configMetrics{
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: "config", Name: "reloads_total",
			Help: "Config reloads (SIGHUP), by result (success: the file's policy is in force; failure: the file was refused and the running policy stays).",
		}, []string{"result"}),
		lastOK:      gauge("config", "last_reload_successful", "Whether the last config reload succeeded (1) or was refused (0); 1 from the start, which loaded the config."),
		lastOKSince: gauge("config", "last_reload_success_timestamp_seconds", "Unix time of the last successful config reload, or of the start, which loaded the config."),
	}
	// Both results start at 0, so that rate() and increase() see the first failure.
	c.reloads.WithLabelValues(reloadSuccess)
	c.reloads.WithLabelValues(reloadFailure)
	return c
}

func gauge(subsystem, name, help string) prometheus.Gauge {
	return prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Subsystem: subsystem, Name: name, Help: help})
}

func counter(subsystem, name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Subsystem: subsystem, Name: name, Help: help})
}

// RegisteredTools makes toolsd_registry_tools report count() at each scrape (the
// registry's tool count). Until it is called the gauge reads 0. count must be safe to
// call from the scraping goroutine.
func (m *Metrics) RegisteredTools(count func() int) { m.toolCount.Store(&count) }

// ConfigLoaded records that the config in force was loaded now: toolsd calls it at
// start-up, so the reload gauges read a success at the start's time until a reload.
func (m *Metrics) ConfigLoaded() {
	m.conf.lastOK.Set(1)
	m.conf.lastOKSince.SetToCurrentTime()
}

// ConfigReloaded counts a config reload that succeeded (ok) or was refused, and sets
// toolsd_config_last_reload_successful to match: 0 while the policy in force is not
// the file's, until a reload succeeds.
func (m *Metrics) ConfigReloaded(ok bool) {
	if !ok {
		m.conf.reloads.WithLabelValues(reloadFailure).Inc()
		m.conf.lastOK.Set(0)
		return
	}
	m.conf.reloads.WithLabelValues(reloadSuccess).Inc()
	m.ConfigLoaded()
}

// PanicRecovered counts one panic recovered by the gRPC recovery handler; it fits
// server.GRPCConfig.OnPanic.
func (m *Metrics) PanicRecovered() { m.srv.panics.Inc() }

// BatchRefused counts one batch refused for limit (server.LimitMaxBatches or
// LimitMaxBatchesPerIdentity); it fits server.Deps.BatchRefused.
func (m *Metrics) BatchRefused(limit string) { m.srv.batchesRefused.WithLabelValues(limit).Inc() }

// WatchRefused counts one watch refused for limit (server.LimitMaxWatches,
// LimitMaxWatchesPerIdentity or LimitMaxHealthWatches); it fits
// server.Deps.WatchRefused.
func (m *Metrics) WatchRefused(limit string) { m.srv.watchesRefused.WithLabelValues(limit).Inc() }

// OpenConnections makes toolsd_server_connections report count() at each scrape (the
// gRPC listener's open connections: server.ConnLimiter.Open, which sweeps). Until it
// is called the gauge reads 0. count must be safe to call from the scraping goroutine.
func (m *Metrics) OpenConnections(count func() int) { m.connCount.Store(&count) }

// ConnectionRefused counts a connection the gRPC listener closed at accept,
// limits.max_connections open (server.LimitConnections' refused).
func (m *Metrics) ConnectionRefused() { m.srv.connectionsRefused.Inc() }

// ApprovalsPending is the gauge of approval requests waiting for an answer: Inc when
// one is sent to the agent loop, Dec when it is answered or abandoned. [Metrics.Approver]
// does both around any [tool.Approver].
func (m *Metrics) ApprovalsPending() prometheus.Gauge { return m.pipe.approvals }
