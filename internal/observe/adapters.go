package observe

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolsd/toolsd/internal/broker"
	"github.com/toolsd/toolsd/internal/pipeline"
	"github.com/toolsd/toolsd/internal/scheduler"
	"github.com/toolsd/toolsd/internal/session"
	"github.com/toolsd/toolsd/internal/tool"
)

// codeOK labels a successful call, whose result has no code.
const codeOK = "OK"

func codeLabel(c tool.Code) string {
	if c == "" {
		return codeOK
	}
	return string(c)
}

// Broker returns the adapter for broker.WithObserver.
func (m *Metrics) Broker() broker.Observer { return brokerObserver{&m.brk, m.srv.panics} }

type brokerObserver struct {
	m      *brokerMetrics
	panics prometheus.Counter
}

var _ broker.Observer = brokerObserver{}

func (o brokerObserver) ProviderConnected(delta int) { o.m.providers.Add(float64(delta)) }
func (o brokerObserver) CallRejected(code tool.Code) {
	o.m.rejected.WithLabelValues(string(code)).Inc()
}
func (o brokerObserver) StaleResult()      { o.m.stale.Inc() }
func (o brokerObserver) InvalidResult()    { o.m.invalid.Inc() }
func (o brokerObserver) MalformedMessage() { o.m.malformed.Inc() }
func (o brokerObserver) Panicked()         { o.panics.Inc() }

// Pipeline returns the adapter for pipeline.WithObserver: dispatches in flight and
// retries. Call counts and durations come from [CallObserver] instead, which knows the
// resolved tool.
func (m *Metrics) Pipeline() pipeline.Observer { return pipelineObserver{&m.pipe, m.srv.panics} }

type pipelineObserver struct {
	m      *pipelineMetrics
	panics prometheus.Counter
}

var _ pipeline.Observer = pipelineObserver{}

func (o pipelineObserver) DispatchStarted(string) { o.m.dispatching.Inc() }

func (o pipelineObserver) DispatchFinished(string, tool.Code, time.Duration) { o.m.dispatching.Dec() }

func (o pipelineObserver) Retried(toolName string, code tool.Code, _ int) {
	o.m.retries.WithLabelValues(toolName, codeLabel(code)).Inc()
}

func (o pipelineObserver) Panicked(string) { o.panics.Inc() }

// Scheduler returns the adapter for scheduler.WithObserver: calls started and skipped,
// and the per-batch pool occupancy distribution. The observer cannot tell batches apart,
// so the server-wide gauge of running calls comes from [Metrics.Runner].
func (m *Metrics) Scheduler() scheduler.Observer {
	return schedulerObserver{&m.sched, m.srv.panics}
}

type schedulerObserver struct {
	m      *schedulerMetrics
	panics prometheus.Counter
}

var _ scheduler.Observer = schedulerObserver{}

func (o schedulerObserver) PoolOccupancy(running int) { o.m.occupancy.Observe(float64(running)) }
func (o schedulerObserver) CallStarted(*tool.Call)    { o.m.started.Inc() }
func (o schedulerObserver) CallSkipped(*tool.Call)    { o.m.skipped.Inc() }
func (o schedulerObserver) Panicked()                 { o.panics.Inc() }
func (o schedulerObserver) ContextsDropped(n int)     { o.m.contexts.Add(float64(n)) }

// Runner wraps the scheduler's runner so that toolsd_scheduler_running_calls counts the
// calls running in every batch's pool: up when the scheduler hands a call over, down
// when its result comes back, panics included.
func (m *Metrics) Runner(r scheduler.Runner) scheduler.Runner {
	g := m.sched.running
	return scheduler.RunnerFunc(func(ctx context.Context, e *tool.Exec) tool.Result {
		g.Inc()
		defer g.Dec()
		return r.Run(ctx, e)
	})
}

// Session returns the adapter for session.WithObserver.
func (m *Metrics) Session() session.Observer { return sessionObserver{&m.sess, m.srv.panics} }

type sessionObserver struct {
	m      *sessionMetrics
	panics prometheus.Counter
}

var (
	_ session.Observer        = sessionObserver{}
	_ session.JournalObserver = sessionObserver{}
	_ session.PanicObserver   = sessionObserver{}
)

func (o sessionObserver) AppendDone(events int, d time.Duration) {
	o.m.appendDuration.Observe(d.Seconds())
	o.m.appended.Add(float64(events))
}

func (o sessionObserver) SyncDone(d time.Duration) { o.m.syncDuration.Observe(d.Seconds()) }

func (o sessionObserver) JournalBytes(n int64) { o.m.journalBytes.Set(float64(n)) }

func (o sessionObserver) JournalRewritten(time.Duration) { o.m.rewrites.Inc() }

func (o sessionObserver) Panicked() { o.panics.Inc() }

// HookObserver is what the hook hub reports; it has the methods of hook.Observer.
type HookObserver interface {
	// HookConnected is called with +1 when a hook named hook is welcomed and -1 when
	// it leaves.
	HookConnected(hook string, delta int)
	// HookFailure counts a hook that could not be used for a call at stage; failOpen
	// tells whether the call went on without it.
	HookFailure(hook, stage string, failOpen bool)
	// NotificationsLost counts n result notifications for hook that its stream's end
	// kept from being sent.
	NotificationsLost(hook string, n int)
	// ContextsDropped counts n add_context entries of hook's that were over their
	// call's limits.
	ContextsDropped(hook string, n int)
	// Panicked counts a panic recovered while a hook's message was handled.
	Panicked()
}

// departedHook is the hook label of failures counted when no hook of their hook's name
// was connected any more (requests pending on a dropped stream fail just after the
// hook leaves). Hook names are never empty.
const departedHook = ""

// hookStages are the stage label's values (hook.Stage's names).
var hookStages = []string{"pre_execute", "post_execute", "result"}

// HookSeriesKeeper keeps the series of a hook name whose last hook left for a while,
// so that the counts of its last moments (a hook failing closed, then killed) are
// scraped and seen by alerts' rate windows; it should bound how many names it keeps.
type HookSeriesKeeper interface {
	// Retire is called, with no lock of the metrics held, once the last hook of name
	// left; the keeper later passes name to [Metrics.ForgetHook].
	Retire(hook string)
	// Unretire is called when a hook of name connects: its series are in use again.
	Unretire(hook string)
}

// Hooks returns the adapter for hook.WithObserver. Hooks choose their own names, so a
// name labels failures only while a hook of that name is connected: failures counted
// after the last one left go to hook="". Its series are kept by keep until it calls
// [Metrics.ForgetHook] (nil: they are deleted at once), and a hook of the name that
// connects before then counts on in them. The series are thus bounded by the hooks
// connected at once and the names keep holds.
func (m *Metrics) Hooks(keep HookSeriesKeeper) HookObserver {
	return hookObserver{&m.hook, m.srv.panics, keep}
}

type hookObserver struct {
	m      *hookMetrics
	panics prometheus.Counter
	keep   HookSeriesKeeper
}

func (o hookObserver) HookConnected(hook string, delta int) {
	o.m.connected.Add(float64(delta))
	if o.connected(hook, delta) || o.keep == nil {
		return
	}
	// Outside the lock: the keeper may forget other names at once. A hook of the name
	// connecting meanwhile leaves the name retired while in use, which ForgetHook allows.
	o.keep.Retire(hook)
}

// connected counts delta hooks of name hook and reports whether one is left. When the
// last leaves, its series are deleted unless they are kept.
func (o hookObserver) connected(hook string, delta int) bool {
	names := o.m.names
	names.mu.Lock()
	defer names.mu.Unlock()
	if n := names.live[hook] + delta; n > 0 {
		if names.live[hook] == 0 {
			// Created at 0, so that rate() sees the first failure of the connection.
			o.m.initFailures(hook)
			if o.keep != nil {
				o.keep.Unretire(hook)
			}
		}
		names.live[hook] = n
		return true
	}
	delete(names.live, hook)
	if o.keep == nil {
		o.m.forget(hook)
	}
	return false
}

// ForgetHook deletes the series of hook unless a hook of that name is connected: the
// end of the keep time of a [HookSeriesKeeper].
func (m *Metrics) ForgetHook(hook string) {
	names := m.hook.names
	names.mu.Lock()
	defer names.mu.Unlock()
	if names.live[hook] == 0 && hook != departedHook {
		m.hook.forget(hook)
	}
}

// forget deletes hook's series; the caller holds names.mu.
func (m *hookMetrics) forget(hook string) {
	m.failures.DeletePartialMatch(prometheus.Labels{"hook": hook})
	m.lost.DeleteLabelValues(hook)
	m.contexts.DeleteLabelValues(hook)
}

// initFailures creates hook's failure, lost-notification and dropped-context series at 0: a series born
// at its first count shows no increase to rate(), so alerts would miss that count.
func (m *hookMetrics) initFailures(hook string) {
	for _, stage := range hookStages {
		for _, outcome := range []string{"fail_open", "fail_closed"} {
			m.failures.WithLabelValues(hook, stage, outcome)
		}
	}
	m.lost.WithLabelValues(hook)
	m.contexts.WithLabelValues(hook)
}

func (o hookObserver) HookFailure(hook, stage string, failOpen bool) {
	outcome := "fail_closed"
	if failOpen {
		outcome = "fail_open"
	}
	o.count(hook, func(hook string) { o.m.failures.WithLabelValues(hook, stage, outcome).Inc() })
}

// NotificationsLost counts like HookFailure: under hook="" when no hook of that name is
// connected any more, which is the rule, since a stream's end loses them.
func (o hookObserver) NotificationsLost(hook string, n int) {
	o.count(hook, func(hook string) { o.m.lost.WithLabelValues(hook).Add(float64(n)) })
}

// ContextsDropped counts like HookFailure.
func (o hookObserver) ContextsDropped(hook string, n int) {
	o.count(hook, func(hook string) { o.m.contexts.WithLabelValues(hook).Add(float64(n)) })
}

func (o hookObserver) Panicked() { o.panics.Inc() }

// count runs add with the hook label to count under: hook while a hook of that name is
// connected, else departedHook. Read-locked so that no series is created for a name
// whose last hook is leaving.
func (o hookObserver) count(hook string, add func(hook string)) {
	names := o.m.names
	names.mu.RLock()
	defer names.mu.RUnlock()
	if names.live[hook] == 0 {
		hook = departedHook
	}
	add(hook)
}

// Approver wraps a batch's approver so toolsd_pipeline_approvals_pending counts the
// requests it is waiting on. A nil approver stays nil (nobody can answer).
func (m *Metrics) Approver(a tool.Approver) tool.Approver {
	if a == nil {
		return nil
	}
	return countingApprover{a: a, pending: m.pipe.approvals}
}

type countingApprover struct {
	a       tool.Approver
	pending prometheus.Gauge
}

func (c countingApprover) Approve(ctx context.Context, req tool.ApprovalRequest) (tool.ApprovalDecision, error) {
	c.pending.Inc()
	defer c.pending.Dec()
	return c.a.Approve(ctx, req)
}
