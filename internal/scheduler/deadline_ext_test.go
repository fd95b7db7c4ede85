package scheduler_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap/zaptest"

	"github.com/toolsd/toolsd/internal/scheduler"
	"github.com/toolsd/toolsd/internal/tool"
	"github.com/toolsd/toolsd/internal/tool/tooltest"
)

// A batch whose caller's deadline has passed starts no more calls, even when the
// context's timer has not yet run: the rest are aborted before dispatch, as they are
// once it has run, rather than sent to their providers past the deadline.
func TestExecuteStartsNoCallPastTheDeadline(t *testing.T) {
	tests := map[string]struct {
		n         int
		passAt    int // the deadline passes while this call runs; -1: before Execute
		exclusive bool
		wantRun   int
	}{
		"one call, passed on entry":  {n: 1, passAt: -1, wantRun: 0},
		"batch, passed on entry":     {n: 3, passAt: -1, wantRun: 0},
		"passes during a call":       {n: 3, passAt: 0, wantRun: 1},
		"passes during an exclusive": {n: 3, passAt: 1, exclusive: true, wantRun: 2},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			passed := &atomic.Bool{}
			passed.Store(tc.passAt < 0)
			ctx := tooltest.LateTimer{Context: t.Context(), Passed: passed}
			m := &modes{}
			if tc.exclusive {
				m.set(tc.passAt, tool.ModeExclusive)
			}
			invoked := make([]atomic.Int64, tc.n)
			returned := make([]tool.Result, tc.n)
			run := scheduler.RunnerFunc(func(_ context.Context, e *tool.Exec) tool.Result {
				invoked[e.Index].Add(1)
				if e.Index == tc.passAt {
					passed.Store(true)
				}
				returned[e.Index] = okResult(e.Index)
				return returned[e.Index]
			})
			l := &fakeLog{}
			s := scheduler.New(run, m, l, scheduler.WithMaxParallel(1), scheduler.WithLogger(zaptest.NewLogger(t)))
			st, err := s.Execute(ctx, newBatch(tc.n), &fakeSink{log: l}, nil)
			if err != nil || !st.Cancelled || st.Results != tc.n {
				t.Errorf("Execute() = %+v, %v, want Cancelled with %d results", st, err, tc.n)
			}
			got := l.checkComplete(t, tc.n)
			b := newBatch(tc.n)
			for i := range tc.n {
				want, wantInvoked := abortedBeforeDispatch(b.Calls[i].Name), int64(0)
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
		})
	}
}
