package scheduler

import (
	"context"
	"fmt"

	"github.com/toolsd/toolsd/internal/stack"
	"github.com/toolsd/toolsd/internal/tool"
)

// Execute runs one batch and returns once every call has a durable result (or the log
// failed) and no goroutine of the batch is left.
//
// The plan (one tool/call per call, model order) is appended before anything runs; if
// that fails nothing runs and the error is returned. Results are appended and handed to
// sink in model order as soon as each prefix of the batch is complete. Tool failures,
// panics included, are results, never errors: the only errors are log failures.
//
// To cancel a batch — the client cancelled, disconnected, or sent a cancel message on its
// stream — cancel ctx. Calls already started see their context cancelled and their results
// are committed when they return; calls not yet started get an ABORTED_BEFORE_DISPATCH
// result without running. A ctx past its deadline counts as ended even while the timer
// that ends it has yet to run. A ctx already cancelled on entry still records the plan and
// those synthetic results, so the log never holds a call without its result. The log is
// written with [context.WithoutCancel] of ctx for the same reason.
//
// A nil sink discards the output. The batch must not be modified until Execute returns.
func (s *Scheduler) Execute(ctx context.Context, b *Batch, sink Sink, approver tool.Approver) (Settled, error) {
	n := len(b.Calls)
	if n == 0 {
		return Settled{}, nil
	}
	if sink == nil {
		sink = discard{}
	}
	logCtx := context.WithoutCancel(ctx)
	callSeqs, err := s.appendCalls(logCtx, b)
	if err != nil {
		return Settled{}, err
	}
	if len(callSeqs) != n {
		return Settled{}, fmt.Errorf("%w: %d call seqs for %d calls", ErrSeqCount, len(callSeqs), n)
	}
	r := &run{s: s, b: b, sink: sink, approver: approver, logCtx: logCtx, callSeqs: callSeqs}
	if a, ok := sink.(Accepter); ok && a.Accepted(b.BatchID, callSeqs) != nil {
		r.sinkGone.Store(true)
	}
	if n == 1 {
		return r.executeOne(ctx)
	}
	return r.executeMany(ctx)
}

// appendCalls appends the batch's plan, turning a panicking log into an error.
func (s *Scheduler) appendCalls(ctx context.Context, b *Batch) (seqs []uint64, err error) {
	defer s.logPanicked("append calls", &err)
	if seqs, err = s.log.AppendCalls(ctx, b); err != nil {
		return nil, &LogError{Op: "append calls", Err: err}
	}
	return seqs, nil
}

// executeOne runs a single-call batch inline in the caller's goroutine: no pool, no
// goroutine, no mode lookup (a lone call runs alone whatever its mode).
func (r *run) executeOne(ctx context.Context) (Settled, error) {
	r.slots = r.one[:]
	r.pending = r.onePending[:0]
	r.siblings = r.oneName[:]
	r.oneName[0] = r.b.Calls[0].Name
	r.prepare(0)
	c := &r.slots[0]
	if tool.Ended(ctx) {
		r.skip(0)
	} else {
		r.s.obs.CallStarted(&c.exec.Call)
		r.s.obs.PoolOccupancy(1)
		stack.Reserve(0)
		c.result = r.s.runCall(ctx, &c.exec)
		r.ended(ctx, 0)
		r.s.obs.PoolOccupancy(0)
	}
	r.commit(0, 1)
	return r.settle(r.cutShort.Load())
}

// executeMany runs the calls through the pool in this goroutine and commits their
// results as they become ready (see [run.advance]).
func (r *run) executeMany(ctx context.Context) (Settled, error) {
	n := len(r.b.Calls)
	bctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r.cancel = cancel
	r.slots = make([]slot, n)
	r.pending = make([]Committed, 0, n)
	r.siblings = make([]string, n)
	for i := range r.b.Calls {
		r.siblings[i] = r.b.Calls[i].Name
	}

	r.schedule(bctx)
	if r.holdTimer != nil {
		r.holdTimer.Stop()
	}
	// The calls ran under bctx, which a log failure cancels too: that is no cancellation.
	cancelled := r.cutShort.Load() && tool.Ended(ctx)
	if r.ready != nil {
		close(r.ready)
		r.wg.Wait()
	}
	return r.settle(cancelled)
}

// discard is the [Sink] of a batch nobody listens to.
type discard struct{}

func (discard) Result(int, uint64, uint64, tool.Result) error { return nil }
func (discard) Progress(tool.Progress)                        {}
