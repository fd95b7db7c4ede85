package scheduler_test

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/toolsd/toolsd/internal/scheduler"
	"github.com/toolsd/toolsd/internal/tool"
)

// okRunner returns okResult for every call.
var okRunner = scheduler.RunnerFunc(func(_ context.Context, e *tool.Exec) tool.Result {
	return okResult(e.Index)
})

type approver struct{}

func (approver) Approve(context.Context, tool.ApprovalRequest) (tool.ApprovalDecision, error) {
	return tool.ApprovalDecision{Approved: true}, nil
}

func TestExecuteEmptyBatch(t *testing.T) {
	l := &fakeLog{}
	s := scheduler.New(okRunner, nil, l)
	got, err := s.Execute(t.Context(), newBatch(0), &fakeSink{}, nil)
	if err != nil || !cmp.Equal(got, scheduler.Settled{}) {
		t.Fatalf("Execute(empty batch) = %+v, %v, want zero, nil", got, err)
	}
	if calls, results, _ := l.snapshot(); len(calls)+len(results) != 0 {
		t.Errorf("Execute(empty batch) logged %d calls and %d results, want none", len(calls), len(results))
	}
}

func TestExecuteAppendCallsFailure(t *testing.T) {
	for name, n := range map[string]int{"one call": 1, "batch": 3} {
		t.Run(name, func(t *testing.T) {
			var ran atomic.Int64
			run := scheduler.RunnerFunc(func(context.Context, *tool.Exec) tool.Result {
				ran.Add(1)
				return tool.Result{}
			})
			sink := &fakeSink{}
			s := scheduler.New(run, nil, &fakeLog{failCalls: errDisk}, scheduler.WithLogger(zaptest.NewLogger(t)))
			_, err := s.Execute(t.Context(), newBatch(n), sink, nil)
			if !errors.Is(err, errDisk) {
				t.Errorf("Execute() error = %v, want %v", err, errDisk)
			}
			if d, _ := sink.got(); ran.Load() != 0 || len(d) != 0 {
				t.Errorf("after a failed plan: %d calls ran, %d results delivered, want none", ran.Load(), len(d))
			}
		})
	}
}

func TestExecuteExec(t *testing.T) {
	for name, n := range map[string]int{"one call": 1, "batch": 3} {
		t.Run(name, func(t *testing.T) {
			b := newBatch(n)
			got := make([]tool.Exec, n)
			run := scheduler.RunnerFunc(func(_ context.Context, e *tool.Exec) tool.Result {
				got[e.Index] = *e
				e.Progress(tool.Progress{CallID: "forged", Index: 99, Message: "half", Progress: 1, Total: 2})
				return okResult(e.Index)
			})
			sink := &fakeSink{}
			s := scheduler.New(run, nil, &fakeLog{})
			if _, err := s.Execute(t.Context(), b, sink, approver{}); err != nil {
				t.Fatalf("Execute() error = %v", err)
			}
			var want []tool.Exec
			var wantProgress []tool.Progress
			var siblings []string
			for _, c := range b.Calls {
				siblings = append(siblings, c.Name)
			}
			for i, c := range b.Calls {
				want = append(want, tool.Exec{
					Call: tool.Call{SessionID: "s1", Scope: "agent", BatchID: "b1", ToolSetID: "ts1", Turn: 2, Step: 3,
						Index: i, CallID: c.CallID, Name: c.Name, Arguments: c.Arguments},
					Siblings: siblings,
					Approver: approver{},
				})
				wantProgress = append(wantProgress, tool.Progress{CallID: c.CallID, Index: i, Message: "half", Progress: 1, Total: 2})
			}
			if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(tool.Exec{}, "Progress")); diff != "" {
				t.Errorf("Runner got Exec (-want +got):\n%s", diff)
			}
			_, progress := sink.got()
			sortProgress := cmpopts.SortSlices(func(a, b tool.Progress) bool { return a.Index < b.Index })
			if diff := cmp.Diff(wantProgress, progress, sortProgress); diff != "" {
				t.Errorf("Sink got progress (-want +got):\n%s", diff)
			}
		})
	}
}

func TestExecuteSingleCallRunsInline(t *testing.T) {
	var stack string
	run := scheduler.RunnerFunc(func(context.Context, *tool.Exec) tool.Result {
		buf := make([]byte, 64<<10)
		stack = string(buf[:runtime.Stack(buf, false)])
		return tool.Result{}
	})
	s := scheduler.New(run, nil, &fakeLog{})
	if _, err := s.Execute(t.Context(), newBatch(1), nil, nil); err != nil {
		t.Fatalf("Execute() error = %v", err)
	}
	if !strings.Contains(stack, "TestExecuteSingleCallRunsInline") {
		t.Errorf("a single call ran on another goroutine; its stack:\n%s", stack)
	}
}

func TestExecuteMaxParallel(t *testing.T) {
	tests := map[string]struct {
		opts  []scheduler.Option
		batch int
		want  int
	}{
		"default":             {want: scheduler.DefaultMaxParallel},
		"batch lowers":        {opts: []scheduler.Option{scheduler.WithMaxParallel(8)}, batch: 3, want: 3},
		"batch capped":        {opts: []scheduler.Option{scheduler.WithMaxParallel(2)}, batch: 5, want: 2},
		"batch of one":        {batch: 1, want: 1},
		"config below one":    {opts: []scheduler.Option{scheduler.WithMaxParallel(0)}, want: 1},
		"config larger batch": {opts: []scheduler.Option{scheduler.WithMaxParallel(4)}, want: 4},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			gate := make(chan struct{})
			var tr tracker
			run := scheduler.RunnerFunc(func(ctx context.Context, e *tool.Exec) tool.Result {
				defer tr.end(e.Index, false, tr.begin(e.Index, false))
				if !await(ctx, gate) {
					return tool.Failure(tool.CodeInternal, "never released")
				}
				return okResult(e.Index)
			})
			b := newBatch(tc.want + 3)
			b.MaxParallel = tc.batch
			l := &fakeLog{}
			s := scheduler.New(run, nil, l, tc.opts...)
			done := make(chan error, 1)
			go func() {
				_, err := s.Execute(t.Context(), b, &fakeSink{log: l}, nil)
				done <- err
			}()
			// A call counts itself active, then started: wait for both.
			waitFor(t, "the pool to fill", func() bool {
				return tr.active.Load() == int64(tc.want) && tr.starts.Load() == int64(tc.want)
			})
			for range 200 {
				runtime.Gosched()
			}
			if got := tr.starts.Load(); got != int64(tc.want) {
				t.Errorf("with a full pool, %d calls started, want %d", got, tc.want)
			}
			close(gate)
			if err := <-done; err != nil {
				t.Fatalf("Execute() error = %v", err)
			}
			if got := tr.maxActive.Load(); got != int64(tc.want) {
				t.Errorf("most calls running at once = %d, want %d", got, tc.want)
			}
			for i, r := range l.checkComplete(t, len(b.Calls)) {
				if diff := cmp.Diff(okResult(i), r); diff != "" {
					t.Errorf("result %d (-want +got):\n%s", i, diff)
				}
			}
		})
	}
}

// TestExecuteModeChangeMidBatch: call 0 (exclusive) makes call 2 exclusive while it
// runs; call 2 must then wait for call 1 and run alone, and modes are read one call at
// a time, just before each call starts.
func TestExecuteModeChangeMidBatch(t *testing.T) {
	var ev eventLog
	var tr tracker
	asked2 := make(chan struct{})
	m := &modes{onAsk: func(i int) {
		ev.add("mode %d", i)
		if i == 2 {
			close(asked2)
		}
	}}
	m.set(0, tool.ModeExclusive)
	run := scheduler.RunnerFunc(func(ctx context.Context, e *tool.Exec) tool.Result {
		i := e.Index
		m.mu.Lock()
		exclusive := m.mode[i] == tool.ModeExclusive
		m.mu.Unlock()
		ev.add("start %d", i)
		tok := tr.begin(i, exclusive)
		switch i {
		case 0:
			m.set(2, tool.ModeExclusive)
		case 1:
			// Give a scheduler that ignored the change every chance to start call 2 now.
			await(ctx, asked2)
			for range 200 {
				runtime.Gosched()
			}
			time.Sleep(time.Millisecond)
		}
		tr.end(i, exclusive, tok)
		ev.add("end %d", i)
		return okResult(i)
	})
	l := &fakeLog{}
	s := scheduler.New(run, m, l, scheduler.WithLogger(zaptest.NewLogger(t)))
	if _, err := s.Execute(t.Context(), newBatch(4), &fakeSink{log: l}, nil); err != nil {
		t.Fatalf("Execute() error = %v", err)
	}
	tr.check(t)
	for _, order := range [][2]string{
		{"end 0", "mode 1"}, {"end 0", "mode 2"}, {"end 1", "start 2"}, {"end 2", "mode 3"}, {"end 2", "start 3"},
	} {
		if a, b := ev.pos(order[0]), ev.pos(order[1]); a < 0 || b < 0 || a > b {
			t.Errorf("events %q: want %q before %q", ev.all(), order[0], order[1])
		}
	}
	l.checkComplete(t, 4)
}

// TestExecuteGroupsReadyResults: results that become ready while the log is busy are
// appended together, in one call.
func TestExecuteGroupsReadyResults(t *testing.T) {
	gate1, gate5 := make(chan struct{}), make(chan struct{})
	started5, inFirst, releaseLog := make(chan struct{}), make(chan struct{}), make(chan struct{})
	m := &modes{}
	m.set(5, tool.ModeExclusive)
	run := scheduler.RunnerFunc(func(ctx context.Context, e *tool.Exec) tool.Result {
		switch e.Index {
		case 0:
		case 5:
			close(started5)
			await(ctx, gate5)
		default:
			await(ctx, gate1)
		}
		return okResult(e.Index)
	})
	l := &fakeLog{onResults: func(n int) {
		if n == 1 {
			close(inFirst)
			<-releaseLog
		}
	}}
	sink := &fakeSink{log: l}
	s := scheduler.New(run, m, l)
	done := make(chan error, 1)
	go func() {
		_, err := s.Execute(t.Context(), newBatch(6), sink, nil)
		done <- err
	}()
	<-inFirst
	close(gate1)
	<-started5 // calls 1-4 are finished and ready
	close(releaseLog)
	waitFor(t, "the second append", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.batches) == 2
	})
	close(gate5)
	if err := <-done; err != nil {
		t.Fatalf("Execute() error = %v", err)
	}
	if diff := cmp.Diff([][]int{{0}, {1, 2, 3, 4}, {5}}, l.batches); diff != "" {
		t.Errorf("AppendResults batches (-want +got):\n%s", diff)
	}
	l.checkComplete(t, 6)
	sink.checkProblems(t)
	d, _ := sink.got()
	if len(d) != 6 {
		t.Errorf("sink got %d results, want 6", len(d))
	}
	for i := range d {
		if d[i].Index != i {
			t.Errorf("delivery %d is result %d, want model order", i, d[i].Index)
		}
	}
}

func TestExecuteConcludesTurn(t *testing.T) {
	tests := map[string]struct {
		n, concluding int // concluding < 0: none
		want          bool
	}{
		"none":             {n: 3, concluding: -1, want: false},
		"one of a batch":   {n: 3, concluding: 1, want: true},
		"the last":         {n: 3, concluding: 2, want: true},
		"single call":      {n: 1, concluding: 0, want: true},
		"single call none": {n: 1, concluding: -1, want: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			run := scheduler.RunnerFunc(func(_ context.Context, e *tool.Exec) tool.Result {
				r := okResult(e.Index)
				r.ConcludesTurn = e.Index == tc.concluding
				return r
			})
			l := &fakeLog{}
			got, err := scheduler.New(run, nil, l).Execute(t.Context(), newBatch(tc.n), &fakeSink{log: l}, nil)
			if err != nil || got.ConcludesTurn != tc.want || got.Results != tc.n || got.Cancelled {
				t.Errorf("Execute() = %+v, %v, want ConcludesTurn %v, Results %d", got, err, tc.want, tc.n)
			}
		})
	}
}

func TestExecuteAdditionalContexts(t *testing.T) {
	contexts := map[int][]string{0: {"a", "b"}, 2: {"c"}}
	finished2 := make(chan struct{})
	run := scheduler.RunnerFunc(func(ctx context.Context, e *tool.Exec) tool.Result {
		r := okResult(e.Index)
		r.AdditionalContexts = contexts[e.Index]
		switch e.Index {
		case 0:
			await(ctx, finished2) // finish after call 2
		case 2:
			close(finished2)
		}
		return r
	})
	l := &fakeLog{}
	got, err := scheduler.New(run, nil, l).Execute(t.Context(), newBatch(3), &fakeSink{log: l}, nil)
	if err != nil {
		t.Fatalf("Execute() error = %v", err)
	}
	if diff := cmp.Diff([]string{"a", "b", "c"}, got.AdditionalContexts); diff != "" {
		t.Errorf("Settled.AdditionalContexts (-want +got):\n%s", diff)
	}
	l.checkComplete(t, 3)
	_, results, ctxEvents := l.snapshot()
	want := []logEvent{
		{Kind: "context", Cites: results[0].Seq, Context: "a"},
		{Kind: "context", Cites: results[0].Seq, Context: "b"},
		{Kind: "context", Cites: results[2].Seq, Context: "c"},
	}
	if diff := cmp.Diff(want, ctxEvents, cmpopts.IgnoreFields(logEvent{}, "Seq")); diff != "" {
		t.Errorf("logged contexts (-want +got):\n%s", diff)
	}
	for _, e := range ctxEvents {
		if e.Seq < results[2].Seq {
			t.Errorf("context %q logged at seq %d, before the last result (seq %d)", e.Context, e.Seq, results[2].Seq)
		}
	}
}

func TestExecuteAppendContextsFailure(t *testing.T) {
	run := scheduler.RunnerFunc(func(_ context.Context, e *tool.Exec) tool.Result {
		r := okResult(e.Index)
		r.AdditionalContexts = []string{"x"}
		return r
	})
	l := &fakeLog{failContexts: errDisk}
	sink := &fakeSink{log: l}
	got, err := scheduler.New(run, nil, l, scheduler.WithLogger(zaptest.NewLogger(t))).Execute(t.Context(), newBatch(2), sink, nil)
	if !errors.Is(err, errDisk) {
		t.Errorf("Execute() error = %v, want %v", err, errDisk)
	}
	if d, _ := sink.got(); got.Results != 2 || len(d) != 2 {
		t.Errorf("Execute() = %+v with %d deliveries, want 2 results delivered", got, len(d))
	}
}

// A session log that panics fails the batch as a log error does, whichever append it
// panics in: the panic never leaves Execute, and no goroutine of the batch outlives it.
func TestExecuteLogPanicsAreErrors(t *testing.T) {
	run := scheduler.RunnerFunc(func(_ context.Context, e *tool.Exec) tool.Result {
		r := okResult(e.Index)
		r.AdditionalContexts = []string{"x"}
		return r
	})
	for name, tc := range map[string]struct {
		log         *fakeLog
		wantResults int
	}{
		"plan":     {&fakeLog{panicCalls: true}, 0},
		"contexts": {&fakeLog{panicContexts: true}, 3},
	} {
		t.Run(name, func(t *testing.T) {
			panics := &panicCount{}
			s := scheduler.New(run, nil, tc.log, scheduler.WithLogger(zaptest.NewLogger(t)), scheduler.WithObserver(panics))
			got, err := s.Execute(t.Context(), newBatch(3), &fakeSink{log: tc.log}, nil)
			if err == nil || !strings.Contains(err.Error(), "log panicked: store broke") {
				t.Errorf("Execute() error = %v, want the log's panic as an error", err)
			}
			if got.Results != tc.wantResults {
				t.Errorf("Execute() = %+v, want %d results", got, tc.wantResults)
			}
			if n := panics.n.Load(); n != 1 {
				t.Errorf("panics counted = %d, want 1", n)
			}
		})
	}
}

func TestExecuteSinkErrorKeepsLogging(t *testing.T) {
	for name, n := range map[string]int{"one call": 1, "batch": 5} {
		t.Run(name, func(t *testing.T) {
			l := &fakeLog{}
			failed := make(chan struct{})
			sink := &fakeSink{log: l, failAt: 1, onResult: func(k int) {
				if k == 1 {
					close(failed)
				}
			}}
			var progressAfter atomic.Bool
			run := scheduler.RunnerFunc(func(ctx context.Context, e *tool.Exec) tool.Result {
				if n > 1 && e.Index == n-1 {
					if !await(ctx, failed) {
						return tool.Failure(tool.CodeInternal, "the sink never failed")
					}
					e.Progress(tool.Progress{Message: "after"})
					progressAfter.Store(true)
				}
				return okResult(e.Index)
			})
			s := scheduler.New(run, nil, l, scheduler.WithLogger(zaptest.NewLogger(t)))
			got, err := s.Execute(t.Context(), newBatch(n), sink, nil)
			if err != nil || got.Results != n {
				t.Fatalf("Execute() = %+v, %v, want %d results, nil", got, err, n)
			}
			for i, r := range l.checkComplete(t, n) {
				if diff := cmp.Diff(okResult(i), r); diff != "" {
					t.Errorf("logged result %d (-want +got):\n%s", i, diff)
				}
			}
			sink.checkProblems(t)
			// Progress is not counted: an update may legitimately race the failing Result
			// call (the contract only covers calls after it has returned its error).
			if d, _ := sink.got(); len(d) != 1 {
				t.Errorf("sink got %d results, want 1 (the sink failed on the second)", len(d))
			}
			if n > 1 && !progressAfter.Load() {
				t.Error("the last call did not report progress")
			}
		})
	}
}

func TestExecuteAppendResultsFailure(t *testing.T) {
	var sawCancel, ran [4]atomic.Bool
	run := scheduler.RunnerFunc(func(ctx context.Context, e *tool.Exec) tool.Result {
		ran[e.Index].Store(true)
		if e.Index == 0 {
			return okResult(0)
		}
		if await(ctx, nil) && ctx.Err() != nil {
			sawCancel[e.Index].Store(true)
		}
		return tool.Failure(tool.CodeAborted, "stopped")
	})
	l := &fakeLog{failResults: errDisk, failAt: 1}
	sink := &fakeSink{log: l}
	s := scheduler.New(run, nil, l, scheduler.WithMaxParallel(2), scheduler.WithLogger(zaptest.NewLogger(t)))
	got, err := s.Execute(t.Context(), newBatch(4), sink, nil)
	if !errors.Is(err, errDisk) {
		t.Errorf("Execute() error = %v, want %v", err, errDisk)
	}
	if got.Results != 0 {
		t.Errorf("Execute() Results = %d, want 0", got.Results)
	}
	if d, _ := sink.got(); len(d) != 0 {
		t.Errorf("sink got %d results that are not durable", len(d))
	}
	if _, results, _ := l.snapshot(); len(results) != 0 || len(l.batches) != 1 {
		t.Errorf("after the log failed: %d results logged in %d appends, want one failed append", len(results), len(l.batches))
	}
	if !ran[1].Load() {
		t.Error("call 1 never ran")
	}
	for i := 1; i < 4; i++ {
		if ran[i].Load() && !sawCancel[i].Load() {
			t.Errorf("call %d was not cancelled after the log failed", i)
		}
	}
}

// A result over the log's event limit costs its own call (RESULT_TOO_LARGE), not the
// batch: its siblings, also those that would have shared its append, are logged and
// delivered.
func TestExecuteResultTooLargeForTheLog(t *testing.T) {
	for _, n := range []int{1, 4} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			big := n / 2
			siblingsDone := make(chan struct{})
			var done atomic.Int32
			run := scheduler.RunnerFunc(func(ctx context.Context, e *tool.Exec) tool.Result {
				if e.Index == 0 && n > 1 {
					<-siblingsDone // the others become ready first, to commit with this one
				}
				defer func() {
					if e.Index != 0 && int(done.Add(1)) == n-1 {
						close(siblingsDone)
					}
				}()
				if e.Index == big {
					return tool.Result{Content: strings.Repeat("x", 1000), Value: []byte(`"` + strings.Repeat("v", 498) + `"`),
						ConcludesTurn: true, AdditionalContexts: []string{"remember the quota"}}
				}
				return okResult(e.Index)
			})
			l := &fakeLog{maxContent: 200}
			sink := &fakeSink{log: l}
			s := scheduler.New(run, nil, l, scheduler.WithMaxParallel(n), scheduler.WithLogger(zaptest.NewLogger(t)))
			got, err := s.Execute(t.Context(), newBatch(n), sink, nil)
			if err != nil || got.Results != n {
				t.Fatalf("Execute() = %+v, %v, want %d results, nil", got, err, n)
			}
			// What the result asked of the turn survives its replacement.
			if !got.ConcludesTurn || !slices.Equal(got.AdditionalContexts, []string{"remember the quota"}) {
				t.Errorf("Execute() = %+v, want the big result's ConcludesTurn and context kept", got)
			}
			for i, r := range l.checkComplete(t, n) {
				if i == big {
					if r.Code() != tool.CodeResultTooLarge || !strings.Contains(r.Err.Message, "(1500 bytes)") {
						t.Errorf("logged result %d = %+v, want RESULT_TOO_LARGE naming 1500 bytes (content and value)", i, r)
					}
				} else if diff := cmp.Diff(okResult(i), r); diff != "" {
					t.Errorf("logged result %d (-want +got):\n%s", i, diff)
				}
			}
			d, _ := sink.got()
			if len(d) != n || d[big].Result.Code() != tool.CodeResultTooLarge {
				t.Errorf("sink got %+v, want %d results with %d RESULT_TOO_LARGE", d, n, big)
			}
			sink.checkProblems(t)
		})
	}
}

// TestResultTooLargeLineCutsTheCallID: a call id is the model's (only the request size
// bounds it); the warning about a result the log refused as too large quotes it cut,
// so a call with a megabyte id cannot write as much log with it.
func TestResultTooLargeLineCutsTheCallID(t *testing.T) {
	const msg = "tool result over the session log's event limit; recorded as RESULT_TOO_LARGE"
	run := scheduler.RunnerFunc(func(context.Context, *tool.Exec) tool.Result {
		return tool.Result{Content: strings.Repeat("x", 1000)}
	})
	observed, logs := observer.New(zap.WarnLevel)
	l := &fakeLog{maxContent: 200}
	s := scheduler.New(run, nil, l, scheduler.WithLogger(zap.New(observed)))
	b := newBatch(1)
	b.Calls[0].CallID = strings.Repeat("c", 1<<20)
	if _, err := s.Execute(t.Context(), b, &fakeSink{log: l}, nil); err != nil {
		t.Fatalf("Execute() = %v", err)
	}
	lines := logs.FilterMessage(msg).All()
	if len(lines) != 1 {
		t.Fatalf("%d %q lines, want 1", len(lines), msg)
	}
	if id, _ := lines[0].ContextMap()["call_id"].(string); len(id) > 256 || !strings.HasPrefix(id, "cccc") {
		t.Errorf("call_id logged as %d bytes, want its start, at most 256", len(id))
	}
}

func TestExecuteRunnerPanic(t *testing.T) {
	tests := map[string]struct {
		n, panicking int
		exclusive    bool
	}{
		"single call": {n: 1, panicking: 0},
		"pooled":      {n: 3, panicking: 1},
		"exclusive":   {n: 3, panicking: 1, exclusive: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m := &modes{}
			if tc.exclusive {
				m.set(tc.panicking, tool.ModeExclusive)
			}
			run := scheduler.RunnerFunc(func(_ context.Context, e *tool.Exec) tool.Result {
				if e.Index == tc.panicking {
					panic("boom")
				}
				return okResult(e.Index)
			})
			core, logs := observer.New(zap.ErrorLevel)
			l := &fakeLog{}
			panics := &panicCount{}
			s := scheduler.New(run, m, l, scheduler.WithLogger(zap.New(core)), scheduler.WithObserver(panics))
			if _, err := s.Execute(t.Context(), newBatch(tc.n), &fakeSink{log: l}, nil); err != nil {
				t.Fatalf("Execute() error = %v", err)
			}
			for i, r := range l.checkComplete(t, tc.n) {
				want := okResult(i)
				if i == tc.panicking {
					want = tool.Failure(tool.CodeInternal, "internal error")
					want.Err.Tool = newBatch(tc.n).Calls[i].Name
				}
				if diff := cmp.Diff(want, r); diff != "" {
					t.Errorf("result %d (-want +got):\n%s", i, diff)
				}
			}
			if got := logs.FilterMessage("tool call panicked").FilterField(zap.String("tool", "tool-"+strconv.Itoa(tc.panicking))).Len(); got != 1 {
				t.Errorf("logged %d panics of the tool, want 1; all: %v", got, logs.All())
			}
			if n := panics.n.Load(); n != 1 {
				t.Errorf("observer counted %d panics, want 1", n)
			}
		})
	}
}

// A panic of a call whose model-chosen name and id are huge is logged with both cut.
func TestRunnerPanicLogIsBounded(t *testing.T) {
	run := scheduler.RunnerFunc(func(context.Context, *tool.Exec) tool.Result { panic("boom") })
	core, logs := observer.New(zap.ErrorLevel)
	l := &fakeLog{}
	b := newBatch(1)
	b.Calls[0].Name, b.Calls[0].CallID = strings.Repeat("n", 100_000), strings.Repeat("c", 100_000)
	s := scheduler.New(run, nil, l, scheduler.WithLogger(zap.New(core)))
	if _, err := s.Execute(t.Context(), b, &fakeSink{log: l}, nil); err != nil {
		t.Fatalf("Execute() error = %v", err)
	}
	lines := logs.FilterMessage("tool call panicked").All()
	if len(lines) != 1 {
		t.Fatalf("logged %d panic lines, want 1", len(lines))
	}
	for _, key := range []string{"tool", "call_id"} {
		if v, _ := lines[0].ContextMap()[key].(string); v == "" || len(v) > 200 {
			t.Errorf("panic line's %s is %d bytes, want it cut", key, len(v))
		}
	}
}

// panicCount counts the panics the scheduler reports.
type panicCount struct {
	scheduler.NopObserver
	n atomic.Int64
}

func (p *panicCount) Panicked() { p.n.Add(1) }

func TestExecuteModerPanicRunsAlone(t *testing.T) {
	var tr tracker
	m := scheduler.ModerFunc(func(_ context.Context, e *tool.Exec) tool.Mode {
		if e.Index == 2 {
			panic("registry bug")
		}
		return tool.ModeParallel
	})
	run := scheduler.RunnerFunc(func(_ context.Context, e *tool.Exec) tool.Result {
		defer tr.end(e.Index, e.Index == 2, tr.begin(e.Index, e.Index == 2))
		for range 50 {
			runtime.Gosched()
		}
		return okResult(e.Index)
	})
	core, logs := observer.New(zap.ErrorLevel)
	l := &fakeLog{}
	if _, err := scheduler.New(run, m, l, scheduler.WithLogger(zap.New(core))).Execute(t.Context(), newBatch(5), nil, nil); err != nil {
		t.Fatalf("Execute() error = %v", err)
	}
	tr.check(t)
	l.checkComplete(t, 5)
	if got := logs.FilterMessage("tool mode lookup panicked").Len(); got != 1 {
		t.Errorf("logged %d mode panics, want 1", got)
	}
}

// contextDrops counts the additional contexts the scheduler reports dropped.
type contextDrops struct {
	scheduler.NopObserver
	n atomic.Int64
}

func (d *contextDrops) ContextsDropped(n int) { d.n.Add(int64(n)) }

// TestExecuteContextBytesLimit: the batch's additional contexts, which settle delivers
// in one message, are held to WithMaxContextBytes as encoded in that message (an
// entry of fewer than 128 bytes takes 2 more). One that would take the batch past it
// is dropped, from Settled and from the log alike, counted and logged; later ones that
// fit are kept, in FIFO order.
func TestExecuteContextBytesLimit(t *testing.T) {
	contexts := map[int][]string{0: {"aaaa", "bbbb"}, 1: {"cccccccccc"}, 2: {"dd"}, 3: {"eeee"}}
	run := scheduler.RunnerFunc(func(_ context.Context, e *tool.Exec) tool.Result {
		r := okResult(e.Index)
		r.AdditionalContexts = contexts[e.Index]
		return r
	})
	core, logs := observer.New(zap.WarnLevel)
	drops := &contextDrops{}
	l := &fakeLog{}
	s := scheduler.New(run, nil, l, scheduler.WithMaxContextBytes(20), scheduler.WithObserver(drops), scheduler.WithLogger(zap.New(core)))
	got, err := s.Execute(t.Context(), newBatch(4), &fakeSink{log: l}, nil)
	if err != nil {
		t.Fatalf("Execute() error = %v", err)
	}
	// 6 + 6 fit in 20; 12 more do not; 4 do; 6 more do not.
	if diff := cmp.Diff([]string{"aaaa", "bbbb", "dd"}, got.AdditionalContexts); diff != "" {
		t.Errorf("Settled.AdditionalContexts (-want +got):\n%s", diff)
	}
	l.checkComplete(t, 4)
	_, resultEvents, ctxEvents := l.snapshot()
	want := []logEvent{
		{Kind: "context", Cites: resultEvents[0].Seq, Context: "aaaa"},
		{Kind: "context", Cites: resultEvents[0].Seq, Context: "bbbb"},
		{Kind: "context", Cites: resultEvents[2].Seq, Context: "dd"},
	}
	if diff := cmp.Diff(want, ctxEvents, cmpopts.IgnoreFields(logEvent{}, "Seq")); diff != "" {
		t.Errorf("logged contexts (-want +got):\n%s", diff)
	}
	if n := drops.n.Load(); n != 2 {
		t.Errorf("ContextsDropped() total = %d, want 2", n)
	}
	if n := logs.FilterMessage("additional contexts dropped").Len(); n != 1 {
		t.Errorf("logged %d lines about dropped contexts, want 1", n)
	}
}
