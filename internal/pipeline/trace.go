package pipeline

import (
	"context"

	"github.com/toolsd/toolsd/internal/tool"
)

// Stage names one stage of a call for a [StageTracer].
type Stage string

// The stages of a call, in the order they run.
const (
	// StagePrepare runs from resolve through the dispatch gate: validation, pre-execute
	// policy, approval and guards.
	StagePrepare Stage = "prepare"
	// StageDispatch is the execute chain: timeout, retries and the provider call.
	StageDispatch Stage = "dispatch"
	// StageComplete is post-execute policy and normalization of a dispatched result.
	StageComplete Stage = "complete"
)

// StageTracer follows calls through their stages, so that stage latencies can be
// measured and traced without this package importing a metrics or tracing library.
// Its methods, and those of the [CallTrace]s it returns, run synchronously on the
// call's goroutine and must return quickly.
type StageTracer interface {
	// StartCall is called as [Pipeline.Run] begins. The returned context carries the
	// call through its stages; a nil CallTrace leaves the call untraced.
	StartCall(ctx context.Context, e *tool.Exec) (context.Context, CallTrace)
}

// CallTrace follows one call. Stages come in order: every call has a prepare stage; a
// call that passes the dispatch gate then has dispatch and complete. Each started stage
// is ended exactly once, before the next starts and before End, panics included.
type CallTrace interface {
	// StartStage begins stage. For prepare and dispatch the returned context carries
	// the stage's work (hook and provider calls); complete runs with the call's context
	// and its returned context is not used.
	StartStage(ctx context.Context, stage Stage) context.Context
	// EndStage ends the stage begun last.
	EndStage(stage Stage)
	// End is called once, after the result observers, with the tool the call resolved
	// to (the last one when a retry re-resolved it; nil when it never resolved) and
	// the call's final result.
	End(t Tool, r tool.Result)
}

type traceKey struct{}

// callTrace is the pipeline's side of one traced call.
type callTrace struct {
	ct CallTrace
	// outer is the call's context before the prepare stage's: dispatch and complete
	// continue with it, so their spans are the prepare span's siblings. The prepare
	// layers pass ctx on unchanged, so nothing else is lost.
	outer context.Context
	open  Stage // the stage begun and not yet ended; "" when none
	tool  Tool  // the resolved tool, once the call has left prepare
}

func (tr *callTrace) start(ctx context.Context, stage Stage) context.Context {
	tr.open = stage
	return tr.ct.StartStage(ctx, stage)
}

func (tr *callTrace) end() {
	if tr.open != "" {
		tr.ct.EndStage(tr.open)
		tr.open = ""
	}
}

func traceOf(ctx context.Context) *callTrace {
	tr, _ := ctx.Value(traceKey{}).(*callTrace)
	return tr
}

// traced runs one call under the tracer.
func (s *snapshot) traced(ctx context.Context, e *tool.Exec, tracer StageTracer) tool.Result {
	ctx, ct := tracer.StartCall(ctx, e)
	if ct == nil {
		return s.finish(ctx, e)
	}
	tr := &callTrace{ct: ct}
	r := s.finish(context.WithValue(ctx, traceKey{}, tr), e)
	ct.End(tr.tool, r)
	return r
}

// traceOf returns the call's trace when the pipeline has a tracer and the call is traced.
func (s *snapshot) traceOf(ctx context.Context) *callTrace {
	if s.p.opts.tracer == nil {
		return nil
	}
	return traceOf(ctx)
}

// closePrepare runs as the prepare stage returns, panics included: it closes whatever
// stage is still open (prepare after a prepare failure, complete after a dispatch, any
// stage a panic left) and notes the tool the call resolved to.
func (tr *callTrace) closePrepare(ctx context.Context) {
	tr.end()
	tr.tool = stateOf(ctx).tool
}

// traceDispatch is the outermost execute layer: it brackets the dispatch stage and
// opens complete, which the prepare stage closes as it returns.
func (s *snapshot) traceDispatch(ctx context.Context, e *tool.Exec, t Tool, next Handler) tool.Result {
	tr := traceOf(ctx)
	if tr == nil {
		return next(ctx, e, t)
	}
	r := next(tr.start(ctx, StageDispatch), e, t)
	tr.end()
	tr.start(ctx, StageComplete)
	return r
}
