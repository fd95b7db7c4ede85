package scheduler_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolsd/toolsd/internal/scheduler"
	"github.com/toolsd/toolsd/internal/tool"
)

// gatedRunner answers call 0 at once and every other call when its gate opens.
func gatedRunner(gates []chan struct{}) scheduler.Runner {
	return scheduler.RunnerFunc(func(ctx context.Context, e *tool.Exec) tool.Result {
		if e.Index > 0 {
			select {
			case <-gates[e.Index]:
			case <-ctx.Done():
			}
		}
		return tool.Result{Content: "ok"}
	})
}

// With a commit delay, a ready result waits for its siblings: results that finish
// within the delay reach the log in one append.
func TestCommitDelayCoalescesResults(t *testing.T) {
	gates := []chan struct{}{nil, make(chan struct{}), make(chan struct{})}
	l := &fakeLog{}
	sink := &fakeSink{log: l}
	zeroDone := make(chan struct{})
	run := scheduler.RunnerFunc(func(ctx context.Context, e *tool.Exec) tool.Result {
		r := gatedRunner(gates).Run(ctx, e)
		if e.Index == 0 {
			close(zeroDone)
		}
		return r
	})
	s := scheduler.New(run, nil, l, scheduler.WithCommitDelay(time.Hour))
	// Call 0 is done at once and held; the siblings finish while it waits. (The pause
	// gives a scheduler without the hold every chance to append call 0 alone; with the
	// hour-long hold the outcome does not depend on it.)
	go func() {
		<-zeroDone
		time.Sleep(20 * time.Millisecond)
		close(gates[1])
		close(gates[2])
	}()
	if _, err := s.Execute(t.Context(), newBatch(3), sink, nil); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([][]int{{0, 1, 2}}, l.batches); diff != "" {
		t.Errorf("result appends (-want +got):\n%s", diff)
	}
	l.checkComplete(t, 3)
	sink.checkProblems(t)
}

// The hold is bounded: a result does not wait for a sibling that runs past the delay.
func TestCommitDelayIsBounded(t *testing.T) {
	gates := []chan struct{}{nil, make(chan struct{})}
	l := &fakeLog{}
	delivered := make(chan struct{})
	sink := &fakeSink{log: l, onResult: func(n int) {
		if n == 1 {
			close(delivered)
		}
	}}
	s := scheduler.New(gatedRunner(gates), nil, l, scheduler.WithCommitDelay(10*time.Millisecond))
	errc := make(chan error, 1)
	go func() {
		_, err := s.Execute(t.Context(), newBatch(2), sink, nil)
		errc <- err
	}()
	<-delivered // call 0's result arrives while call 1 still runs
	close(gates[1])
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([][]int{{0}, {1}}, l.batches); diff != "" {
		t.Errorf("result appends (-want +got):\n%s", diff)
	}
	l.checkComplete(t, 2)
	sink.checkProblems(t)
}
