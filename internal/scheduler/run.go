package scheduler

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/toolsd/toolsd/internal/textcut"
	"github.com/toolsd/toolsd/internal/tool"
)

// run is the state of one executing batch.
type run struct {
	s        *Scheduler
	b        *Batch
	sink     Sink
	approver tool.Approver
	logCtx   context.Context // never cancelled by the batch: the log is always completed
	callSeqs []uint64
	siblings []string
	slots    []slot
	cancel   context.CancelFunc // stops the batch when the log fails; nil for one call
	sinkGone atomic.Bool        // the sink failed: the client is gone
	cutShort atomic.Bool        // a call was skipped, or failed with its context ended

	// The committer, started only when results are ready while calls remain unstarted.
	ready chan int // indices to commit, in model order; nil until the committer starts
	wg    sync.WaitGroup

	// Owned by whoever commits: the scheduling goroutine, or the committer once started.
	pending   []Committed
	committed int
	logErr    error

	// The coalescing hold (see [WithCommitDelay]), owned by the scheduling goroutine:
	// held is set while a ready prefix waits for more results; flush ends the hold.
	held, flush bool
	holdTimer   *time.Timer

	// Backing arrays of a single-call batch, saving three allocations.
	one        [1]slot
	onePending [1]Committed
	oneName    [1]string
}

// slot is one call of the batch. exec is written before the call starts, result by the
// goroutine running the call, resultSeq by the committer.
type slot struct {
	exec      tool.Exec
	result    tool.Result
	resultSeq uint64
	done      bool // result is final (owned by the scheduling goroutine)
}

// prepare fills call i's Exec: the model's call placed in the batch, and what it may use.
func (r *run) prepare(i int) {
	r.place(i)
	e := &r.slots[i].exec
	e.Siblings = r.siblings
	e.Approver = r.approver
	e.Progress = r.progress(i, e.CallID)
}

// place fills call i's Call: the model's call block, placed in the batch.
func (r *run) place(i int) {
	e := &r.slots[i].exec
	e.Call = r.b.Calls[i]
	e.SessionID = r.b.SessionID
	e.Scope = r.b.Scope
	e.BatchID = r.b.BatchID
	e.ToolSetID = r.b.ToolSetID
	e.Turn = r.b.Turn
	e.Step = r.b.Step
	e.Index = i
}

// progress returns call i's progress forwarder, which tags each update with the call.
func (r *run) progress(i int, callID string) func(tool.Progress) {
	return func(p tool.Progress) {
		if r.sinkGone.Load() {
			return
		}
		p.CallID, p.Index = callID, i
		r.sink.Progress(p)
	}
}

// skip gives prepared call i its synthetic "cancelled before it started" result.
func (r *run) skip(i int) {
	c := &r.slots[i]
	c.result = abortedBeforeDispatch(c.exec.Name)
	c.done = true
	r.cutShort.Store(true)
	r.s.obs.CallSkipped(&c.exec.Call)
}

// ended notes call i's end: a failure with ctx ended is a call the cancellation cut
// short (the pipeline also turns a success that ends after the cancel into one). A
// success the call returned stays one whenever the cancel came, so it never counts.
func (r *run) ended(ctx context.Context, i int) {
	if r.slots[i].result.IsError && tool.Ended(ctx) {
		r.cutShort.Store(true)
	}
}

// abortedBeforeDispatch is the result of a call that never started.
func abortedBeforeDispatch(name string) tool.Result {
	res := tool.Failure(tool.CodeAbortedBeforeDispatch, "call was cancelled before it started")
	res.Err.Tool = tool.NamedInResult(name)
	return res
}

// runCall runs one call's pipeline. A panic becomes an INTERNAL result: a broken stage
// fails its call, never the batch or the process.
func (s *Scheduler) runCall(ctx context.Context, e *tool.Exec) (res tool.Result) {
	defer func() {
		if p := recover(); p != nil {
			s.logger.Error("tool call panicked",
				zap.String("session_id", e.SessionID), zap.String("batch_id", e.BatchID),
				zap.String("call_id", textcut.Ellipsis(e.CallID, textcut.MaxLoggedID)), zap.String("tool", tool.NamedInResult(e.Name)),
				zap.Any("panic", p), zap.Stack("stack"))
			s.obs.Panicked()
			res = tool.Failure(tool.CodeInternal, "internal error")
			res.Err.Tool = tool.NamedInResult(e.Name)
		}
	}()
	return s.run.Run(ctx, e)
}

// modeOf reads call e's mode. A panicking Moder makes the call exclusive, the mode that
// is safe for any tool.
func (s *Scheduler) modeOf(ctx context.Context, e *tool.Exec) (m tool.Mode) {
	defer func() {
		if p := recover(); p != nil {
			s.logger.Error("tool mode lookup panicked",
				zap.String("session_id", e.SessionID), zap.String("batch_id", e.BatchID),
				zap.String("call_id", textcut.Ellipsis(e.CallID, textcut.MaxLoggedID)), zap.String("tool", tool.NamedInResult(e.Name)),
				zap.Any("panic", p), zap.Stack("stack"))
			s.obs.Panicked()
			m = tool.ModeExclusive
		}
	}()
	return s.mode.Mode(ctx, e)
}
