package observe

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/toolsd/toolsd/internal/pipeline"
	"github.com/toolsd/toolsd/internal/textcut"
	"github.com/toolsd/toolsd/internal/tool"
)

// DefaultPayloadCap bounds each payload in a debug payload line.
const DefaultPayloadCap = 4 << 10

// CallObserver follows every tool call through the pipeline as its
// [pipeline.StageTracer]: it counts and times calls and stages, writes the call's log
// line and, when tracing is on, records a span per call with a child span per stage.
// Install it with pipeline.WithStageTracer.
//
// It is a stage tracer rather than a [pipeline.ResultObserver] because only the tracer
// learns which tool a call resolved to: its provider goes in the log line, and metrics
// label calls with registered tool names only, so names a model invents cannot grow
// the series without bound (unresolved calls get an empty tool label).
type CallObserver struct {
	m          *Metrics
	series     sync.Map // tool name → *toolSeries
	log        *zap.Logger
	payloads   bool
	payloadCap int
	tracer     trace.Tracer
	revived    func(name string)
}

var _ pipeline.StageTracer = (*CallObserver)(nil)

// CallOption configures a [CallObserver].
type CallOption func(*CallObserver)

// WithCallLog writes one info line per call to l: ids, tool, provider, code, duration,
// and the size and a SHA-256 prefix of the arguments and of the result, never their
// text. nil means no call log.
func WithCallLog(l *zap.Logger) CallOption { return func(o *CallObserver) { o.log = l } }

// WithPayloads adds, when on and the call log is at debug level, a debug line per call
// with the arguments and the result, each cut at the payload cap (config log.payloads).
func WithPayloads(on bool) CallOption { return func(o *CallObserver) { o.payloads = on } }

// WithPayloadCap sets the byte limit of each logged payload; values below 1 keep
// [DefaultPayloadCap].
func WithPayloadCap(n int) CallOption {
	return func(o *CallObserver) {
		if n > 0 {
			o.payloadCap = n
		}
	}
}

// WithTracerProvider records spans through tp (see [Tracing.TracerProvider]); nil
// means no spans.
func WithTracerProvider(tp trace.TracerProvider) CallOption {
	return func(o *CallObserver) {
		o.tracer = nil
		if tp != nil {
			o.tracer = tp.Tracer(instrumentationName)
		}
	}
}

// WithRevivedTool calls fn with a tool name after a call of the tool ended and counted
// into series that [CallObserver.ForgetTool] had deleted, recreating them (the call was
// still running when its name was forgotten). fn should forget the name again, as it
// forgets any name no longer registered: else those series stay for good.
func WithRevivedTool(fn func(name string)) CallOption {
	return func(o *CallObserver) { o.revived = fn }
}

// NewCallObserver returns a call observer that feeds m (nil: no metrics).
func NewCallObserver(m *Metrics, opts ...CallOption) *CallObserver {
	o := &CallObserver{m: m, payloadCap: DefaultPayloadCap}
	for _, opt := range opts {
		opt(o)
	}
	if o.log == nil {
		o.log = zap.NewNop()
	}
	return o
}

// StartCall implements [pipeline.StageTracer].
func (o *CallObserver) StartCall(ctx context.Context, e *tool.Exec) (context.Context, pipeline.CallTrace) {
	c := &callRecord{o: o, e: e, start: time.Now()}
	if o.m != nil {
		o.m.pipe.inFlight.Inc()
	}
	if o.tracer != nil {
		ctx, c.span = o.tracer.Start(ctx, "execute_tool "+textcut.Ellipsis(e.Name, textcut.MaxLoggedID),
			trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(callAttributes(e)...))
	}
	return ctx, c
}

// callRecord is one call's measurements, owned by the call's goroutine.
type callRecord struct {
	o     *CallObserver
	e     *tool.Exec
	start time.Time

	stageStart time.Time
	stageSpan  trace.Span
	stages     [numStages]time.Duration
	ran        [numStages]bool

	span trace.Span // nil when tracing is off
}

const numStages = 3

func stageIndex(s pipeline.Stage) int {
	switch s {
	case pipeline.StagePrepare:
		return 0
	case pipeline.StageDispatch:
		return 1
	case pipeline.StageComplete:
		return 2
	}
	return -1
}

var stageNames = [numStages]string{string(pipeline.StagePrepare), string(pipeline.StageDispatch), string(pipeline.StageComplete)}

// StartStage implements [pipeline.CallTrace].
func (c *callRecord) StartStage(ctx context.Context, s pipeline.Stage) context.Context {
	c.stageStart = time.Now()
	if c.span != nil {
		ctx, c.stageSpan = c.o.tracer.Start(ctx, "toolsd."+string(s), trace.WithSpanKind(trace.SpanKindInternal))
	}
	return ctx
}

// EndStage implements [pipeline.CallTrace].
func (c *callRecord) EndStage(s pipeline.Stage) {
	if i := stageIndex(s); i >= 0 {
		c.stages[i], c.ran[i] = time.Since(c.stageStart), true
	}
	if c.stageSpan != nil {
		c.stageSpan.End()
		c.stageSpan = nil
	}
}

// End implements [pipeline.CallTrace].
func (c *callRecord) End(t pipeline.Tool, r tool.Result) {
	d := time.Since(c.start)
	name, owner := "", ""
	if t != nil {
		name, owner = t.Definition().Name, t.Owner()
	}
	code := codeLabel(r.Code())
	if m := c.o.m; m != nil {
		m.pipe.inFlight.Dec()
		ts, created := c.o.seriesOf(name)
		if code == codeOK {
			ts.okCalls(&m.pipe).Inc()
		} else {
			m.pipe.calls.WithLabelValues(name, code).Inc()
		}
		ts.callDuration(&m.pipe).Observe(d.Seconds())
		for i, ran := range c.ran {
			if ran {
				ts.stage(&m.pipe, i).Observe(c.stages[i].Seconds())
			}
		}
		// Checked after counting: a ForgetTool that marks ts later deletes what was
		// counted here.
		if (created || ts.forgotten.Load()) && name != "" && c.o.revived != nil {
			c.o.revived(name)
		}
	}
	c.o.logCall(c.e, owner, code, r, d)
	if c.span != nil {
		if t == nil {
			// The name did not resolve: the model chose it, and a span name per
			// invented name would grow span metrics without bound. gen_ai.tool.name
			// keeps it.
			c.span.SetName("execute_tool")
		}
		endSpan(c.span, owner, r)
	}
}

// Skipped writes the info line of a call that never started: its batch was cancelled
// first, and the scheduler gave it ABORTED_BEFORE_DISPATCH without running the pipeline
// (so it has no provider, duration, span or per-tool series; the scheduler's
// calls_skipped_total counts it).
func (o *CallObserver) Skipped(c *tool.Call) {
	r := tool.Failure(tool.CodeAbortedBeforeDispatch, "call was cancelled before it started")
	o.logCall(&tool.Exec{Call: *c}, "", codeLabel(r.Code()), r, 0)
}

// alertedCodes are the failures on the service side, which the shipped alerts
// (deploy/prometheus/alerts.yml) watch per tool: a provider's first crash is a burst of
// PROVIDER_GONE in series that do not exist yet.
var alertedCodes = []tool.Code{
	tool.CodeInternal, tool.CodeProviderGone, tool.CodeProviderUnavailable, tool.CodeProviderOverloaded,
	tool.CodeToolTimeout, tool.CodeInvalidResult, tool.CodePolicyUnavailable,
}

// retriedCodes are the code label values of retries_total: the codes the pipeline
// retries after.
var retriedCodes = pipeline.RetryableCodes()

// PrepareTool creates the tool's calls_total series of code OK and of the alerted
// failure codes, its call_duration_seconds, and its retries_total series of every
// code a retry follows, at zero. Call it when the tool is registered: a series born at
// its first count hides that count from rate() and increase(), which need an earlier
// sample.
func (o *CallObserver) PrepareTool(name string) {
	if o.m == nil {
		return
	}
	ts, _ := o.seriesOf(name)
	ts.okCalls(&o.m.pipe)
	ts.callDuration(&o.m.pipe)
	for _, code := range alertedCodes {
		o.m.pipe.calls.WithLabelValues(name, string(code))
	}
	for _, code := range retriedCodes {
		o.m.pipe.retries.WithLabelValues(name, string(code))
	}
}

// ForgetTool deletes the series labelled with the tool name — calls, call and stage
// durations, retries — and the handles cached for them. Call it once no scope
// registers name any more: providers choose tool names, so series kept for every name
// ever registered would grow without bound (a provider reconnecting under new names).
//
// A call of the tool still in flight may observe after this: it either recreates its
// series, which then hold that call alone until the name is forgotten again, or counts
// into a handle it looked up before, which is no longer exported. Both lose or keep
// at most the in-flight calls, which is acceptable for a tool that is gone.
//
// The series go before the cached handles: a registration of the name racing this
// ([CallObserver.PrepareTool]) may then find the old handles, which are dropped just
// after, but never caches a handle to a series already deleted for good. A call that
// ends after the series went recreates them and is reported to [WithRevivedTool]'s
// function: the handles are marked forgotten first, so a call that counts through them
// is either reported or counted before the series are deleted.
func (o *CallObserver) ForgetTool(name string) {
	if ts, ok := o.series.Load(name); ok {
		ts.(*toolSeries).forgotten.Store(true)
	}
	if o.m != nil {
		p, byTool := &o.m.pipe, prometheus.Labels{"tool": name}
		p.calls.DeletePartialMatch(byTool)
		p.callDuration.DeleteLabelValues(name)
		p.stageDuration.DeletePartialMatch(byTool)
		p.retries.DeletePartialMatch(byTool)
	}
	o.series.Delete(name)
}

// toolSeries are one tool's per-call series, looked up once each: a label lookup
// hashes the label values on every call. Each series is created on its first use, as
// WithLabelValues would, or, for the OK count and the duration, when the tool is
// registered ([CallObserver.PrepareTool]). Names
// are registered tool names (or ""), and [CallObserver.ForgetTool] drops those no longer
// registered, so the cache is bounded like the series themselves.
type toolSeries struct {
	name     string
	ok       atomic.Pointer[counterRef]
	duration atomic.Pointer[observerRef]
	stages   [numStages]atomic.Pointer[observerRef]
	// forgotten is set by ForgetTool before it deletes the series.
	forgotten atomic.Bool
}

type (
	counterRef  struct{ c prometheus.Counter }
	observerRef struct{ o prometheus.Observer }
)

// seriesOf returns name's series handles; created reports that they were not cached.
func (o *CallObserver) seriesOf(name string) (ts *toolSeries, created bool) {
	if ts, ok := o.series.Load(name); ok {
		return ts.(*toolSeries), false
	}
	v, loaded := o.series.LoadOrStore(name, &toolSeries{name: name})
	return v.(*toolSeries), !loaded
}

// okCalls is calls_total{tool, code="OK"}.
func (ts *toolSeries) okCalls(p *pipelineMetrics) prometheus.Counter {
	if r := ts.ok.Load(); r != nil {
		return r.c
	}
	// Racing first uses store the same child: WithLabelValues returns one per labels.
	r := &counterRef{p.calls.WithLabelValues(ts.name, codeOK)}
	ts.ok.Store(r)
	return r.c
}

// callDuration is call_duration_seconds{tool}.
func (ts *toolSeries) callDuration(p *pipelineMetrics) prometheus.Observer {
	if r := ts.duration.Load(); r != nil {
		return r.o
	}
	r := &observerRef{p.callDuration.WithLabelValues(ts.name)}
	ts.duration.Store(r)
	return r.o
}

// stage is stage_duration_seconds{tool, stage} of stage index i.
func (ts *toolSeries) stage(p *pipelineMetrics, i int) prometheus.Observer {
	if r := ts.stages[i].Load(); r != nil {
		return r.o
	}
	r := &observerRef{p.stageDuration.WithLabelValues(ts.name, stageNames[i])}
	ts.stages[i].Store(r)
	return r.o
}
