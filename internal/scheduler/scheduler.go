package scheduler

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/toolsd/toolsd/internal/tool"
)

// ErrSeqCount is returned when the [Log] answers an append with a different number of
// seqs than events it was given: the scheduler can no longer cite them.
var ErrSeqCount = errors.New("scheduler: log returned a wrong number of seqs")

// ErrResultTooLarge is wrapped by a [Log]'s AppendResults error when one of the events is
// over the log's size cap and nothing was appended. The scheduler then appends the results
// one by one and records a result the log refuses on its own as RESULT_TOO_LARGE, so one
// huge result costs its own call, not the batch.
var ErrResultTooLarge = errors.New("scheduler: result too large for the session log")

// LogError is the error of a batch whose [Log] failed: Op says what was being appended
// ("append calls", "append results", "append contexts") and Err is what the log
// returned, or its panic. Its text names both, for toolsd's log; a client is told Err,
// the log's own error, which says what went wrong in the store's terms.
type LogError struct {
	Op  string
	Err error
}

func (e *LogError) Error() string { return "scheduler: " + e.Op + ": " + e.Err.Error() }
func (e *LogError) Unwrap() error { return e.Err }

// Batch is one model step's tool calls, in model order, and where they run. The batch
// fields (session, scope, batch, tool set, turn, step) override those of each call.
type Batch struct {
	SessionID string
	Scope     string
	BatchID   string
	ToolSetID string
	Turn      uint64
	Step      uint64
	Calls     []tool.Call
	// MaxParallel bounds the rolling pool of this batch; 0 means the scheduler's maximum,
	// and a larger value is capped at it.
	MaxParallel int
}

// Settled is what a batch leaves for the agent loop once every call has its result.
type Settled struct {
	// ConcludesTurn is true when any committed result asked to end the turn.
	ConcludesTurn bool
	// AdditionalContexts are the committed results' contexts in FIFO order: model order
	// of the results, then order within each result; those past [WithMaxContextBytes]
	// left out, as they are from the log.
	AdditionalContexts []string
	// Cancelled is true when the batch's cancellation cut a call short: a call got
	// ABORTED_BEFORE_DISPATCH without starting, or failed with the batch's context ended.
	// A cancel that comes once every call has finished leaves it false.
	Cancelled bool
	// Results is the number of results made durable (len(Calls) unless the log failed).
	Results int
}

// Committed is one result handed to the [Log], with the seq of the call it answers.
type Committed struct {
	Index   int
	CallSeq uint64
	Result  tool.Result
}

// Runner runs one call's whole pipeline (prepare, dispatch, complete) and always returns
// its result. It must observe ctx: the scheduler cancels it when the batch is cancelled.
type Runner interface {
	Run(ctx context.Context, e *tool.Exec) tool.Result
}

// RunnerFunc adapts a function to [Runner].
type RunnerFunc func(ctx context.Context, e *tool.Exec) tool.Result

// Run calls f.
func (f RunnerFunc) Run(ctx context.Context, e *tool.Exec) tool.Result { return f(ctx, e) }

// Moder tells the concurrency mode of a call. It is asked just before the call would
// start, so a registry change during a batch is honoured by the calls not yet started.
// It is given the Exec the [Runner] then runs, and may pin it (see [tool.Exec].Pin) to
// what it decided the mode under; a single-call batch asks no mode.
type Moder interface {
	Mode(ctx context.Context, e *tool.Exec) tool.Mode
}

// ModerFunc adapts a function to [Moder].
type ModerFunc func(ctx context.Context, e *tool.Exec) tool.Mode

// Mode calls f.
func (f ModerFunc) Mode(ctx context.Context, e *tool.Exec) tool.Mode { return f(ctx, e) }

// Log is the part of the session log a batch writes. Every method is durable on return
// and is called with a context that is never cancelled by the batch's cancellation, so a
// cancelled batch still leaves a complete log.
type Log interface {
	// AppendCalls appends one tool/call event per call, in model order, and returns their seqs.
	AppendCalls(ctx context.Context, b *Batch) (callSeqs []uint64, err error)
	// AppendResults appends one tool/result event per committed result, in the given
	// (model) order, each citing its call's seq, and returns their seqs. Consecutive ready
	// results come in one call so they can share one sync. An event over the log's size
	// cap fails the append with an error wrapping [ErrResultTooLarge], appending nothing.
	AppendResults(ctx context.Context, b *Batch, rs []Committed) (resultSeqs []uint64, err error)
	// AppendContexts appends one user/message event per context, citing resultSeq.
	AppendContexts(ctx context.Context, b *Batch, resultSeq uint64, contexts []string) error
}

// Sink receives a batch's output for the client.
//
// Result is called in model order from a single goroutine at a time, only after the
// result is durable in the log. A non-nil error means the client is gone: the batch keeps
// running and logging, but Result and Progress are not called again.
//
// Progress is called from the goroutines running calls, possibly concurrently, with the
// call id and index filled in; it must be safe for concurrent use and must not block for
// long, because it holds up the call that reported it.
type Sink interface {
	Result(index int, callSeq, resultSeq uint64, r tool.Result) error
	Progress(p tool.Progress)
}

// Accepter is an optional [Sink] extension told once, right after the plan is durable,
// the batch id and the seq of every call's tool/call event. A non-nil error means the
// client is gone, exactly as for [Sink.Result].
type Accepter interface {
	Accepted(batchID string, callSeqs []uint64) error
}

// Scheduler executes batches. It holds no per-batch state: one Scheduler serves any
// number of concurrent [Scheduler.Execute] calls.
type Scheduler struct {
	run         Runner
	mode        Moder
	log         Log
	maxParallel int
	// maxContextBytes bounds a batch's additional contexts as encoded in settled.
	maxContextBytes int
	logger          *zap.Logger
	obs             Observer
	commitDelay     time.Duration
}

// New returns a Scheduler that runs calls with run, reads their modes from mode (nil: every
// call is parallel) and records batches in log. run and log are required.
func New(run Runner, mode Moder, log Log, opts ...Option) *Scheduler {
	if run == nil || log == nil {
		panic("scheduler: New needs a Runner and a Log")
	}
	if mode == nil {
		mode = ModerFunc(func(context.Context, *tool.Exec) tool.Mode { return tool.ModeParallel })
	}
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	return &Scheduler{run: run, mode: mode, log: log, maxParallel: o.maxParallel, maxContextBytes: o.maxContextBytes,
		logger: o.logger, obs: o.observer, commitDelay: o.commitDelay}
}

// limit is the pool bound of a batch asking for req parallel calls.
func (s *Scheduler) limit(req int) int {
	if req > 0 && req < s.maxParallel {
		return req
	}
	return s.maxParallel
}
