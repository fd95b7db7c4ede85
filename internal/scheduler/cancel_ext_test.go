package scheduler_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap/zaptest"

	"github.com/toolsd/toolsd/internal/scheduler"
	"github.com/toolsd/toolsd/internal/tool"
)

func TestExecuteCancel(t *testing.T) {
	never := -1
	tests := map[string]struct {
		n, limit    int
		exclusive   int  // index of an exclusive call, or -1
		onEntry     bool // ctx cancelled before Execute
		inMode      int  // cancel when this call's mode is read, or -1
		inRun       int  // cancel from inside this call, or -1
		whenStarted int  // cancel once this many calls run (blocking on ctx), or 0
		wantRun     int  // calls 0..wantRun-1 run, the rest are aborted before dispatch
	}{
		"on entry, one call":     {n: 1, limit: 8, exclusive: never, onEntry: true, inMode: never, inRun: never, wantRun: 0},
		"on entry, batch":        {n: 4, limit: 8, exclusive: never, onEntry: true, inMode: never, inRun: never, wantRun: 0},
		"single call running":    {n: 1, limit: 8, exclusive: never, inMode: never, inRun: 0, wantRun: 1},
		"pool full":              {n: 5, limit: 2, exclusive: never, inMode: never, inRun: never, whenStarted: 2, wantRun: 2},
		"reading a mode":         {n: 4, limit: 8, exclusive: never, inMode: 2, inRun: never, wantRun: 2},
		"exclusive running":      {n: 4, limit: 8, exclusive: 1, inMode: never, inRun: 1, wantRun: 2},
		"waiting on a barrier":   {n: 4, limit: 8, exclusive: 2, inMode: never, inRun: never, whenStarted: 2, wantRun: 2},
		"last call running":      {n: 3, limit: 1, exclusive: never, inMode: never, inRun: 2, wantRun: 3},
		"reading the first mode": {n: 3, limit: 8, exclusive: never, inMode: 0, inRun: never, wantRun: 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			if tc.onEntry {
				cancel()
			}
			m := &modes{onAsk: func(i int) {
				if i == tc.inMode {
					cancel()
				}
			}}
			if tc.exclusive >= 0 {
				m.set(tc.exclusive, tool.ModeExclusive)
			}
			var running atomic.Int64
			invoked := make([]atomic.Int64, tc.n)
			returned := make([]tool.Result, tc.n)
			run := scheduler.RunnerFunc(func(ctx context.Context, e *tool.Exec) tool.Result {
				i := e.Index
				invoked[i].Add(1)
				running.Add(1)
				if i == tc.inRun {
					cancel()
				}
				r := okResult(i)
				if tc.whenStarted > 0 {
					if !await(ctx, nil) {
						r = tool.Failure(tool.CodeInternal, "never cancelled")
					}
				}
				if ctx.Err() != nil {
					r = tool.Failure(tool.CodeAborted, "stopped")
				}
				returned[i] = r
				return r
			})
			l := &fakeLog{}
			sink := &fakeSink{log: l}
			s := scheduler.New(run, m, l, scheduler.WithMaxParallel(tc.limit), scheduler.WithLogger(zaptest.NewLogger(t)))
			type outcome struct {
				st  scheduler.Settled
				err error
			}
			done := make(chan outcome, 1)
			go func() {
				st, err := s.Execute(ctx, newBatch(tc.n), sink, nil)
				done <- outcome{st, err}
			}()
			if tc.whenStarted > 0 {
				waitFor(t, "calls to start", func() bool { return running.Load() == int64(tc.whenStarted) })
				cancel()
			}
			out := <-done
			if out.err != nil || !out.st.Cancelled || out.st.Results != tc.n {
				t.Errorf("Execute() = %+v, %v, want Cancelled with %d results", out.st, out.err, tc.n)
			}
			b := newBatch(tc.n)
			got := l.checkComplete(t, tc.n)
			for i := range tc.n {
				want := abortedBeforeDispatch(b.Calls[i].Name)
				wantInvoked := int64(0)
				if i < tc.wantRun {
					want, wantInvoked = returned[i], 1
				}
				if n := invoked[i].Load(); n != wantInvoked {
					t.Errorf("call %d ran %d times, want %d", i, n, wantInvoked)
				}
				if diff := cmp.Diff(want, got[i]); diff != "" {
					t.Errorf("result %d (-want +got):\n%s", i, diff)
				}
			}
			sink.checkProblems(t)
			if d, _ := sink.got(); len(d) != tc.n {
				t.Errorf("sink got %d results, want %d", len(d), tc.n)
			}
		})
	}
}

// TestExecuteCancelAfterLastResult: a cancel that comes once every call has finished
// (here: while the last result is delivered, before the batch settles) cut nothing
// short, so the batch does not settle as cancelled; one that did cut a call short does.
func TestExecuteCancelAfterLastResult(t *testing.T) {
	tests := map[string]struct {
		n, limit int
		inRun    int // cancel from inside this call, which then fails, or -1
		want     bool
	}{
		"pool":                     {n: 3, limit: 8, inRun: -1, want: false},
		"committer":                {n: 3, limit: 1, inRun: -1, want: false},
		"two calls":                {n: 2, limit: 2, inRun: -1, want: false},
		"a call cut short as well": {n: 3, limit: 8, inRun: 1, want: true},
		"the lone call cut short":  {n: 1, limit: 8, inRun: 0, want: true},
		"a pooled call cut short":  {n: 3, limit: 1, inRun: 2, want: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			run := scheduler.RunnerFunc(func(ctx context.Context, e *tool.Exec) tool.Result {
				if e.Index == tc.inRun {
					cancel()
				}
				if ctx.Err() != nil {
					return tool.Failure(tool.CodeAborted, "stopped")
				}
				return okResult(e.Index)
			})
			l := &fakeLog{}
			sink := &fakeSink{log: l, onResult: func(n int) {
				if n == tc.n {
					cancel()
				}
			}}
			s := scheduler.New(run, nil, l, scheduler.WithMaxParallel(tc.limit), scheduler.WithLogger(zaptest.NewLogger(t)))
			st, err := s.Execute(ctx, newBatch(tc.n), sink, nil)
			if err != nil || st.Cancelled != tc.want || st.Results != tc.n {
				t.Errorf("Execute() = %+v, %v, want Cancelled %v with %d results", st, err, tc.want, tc.n)
			}
			l.checkComplete(t, tc.n)
			sink.checkProblems(t)
		})
	}
}
