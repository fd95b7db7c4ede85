package scheduler_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap/zaptest"

	"github.com/toolsd/toolsd/internal/scheduler"
	"github.com/toolsd/toolsd/internal/tool"
)

// Where a randomised batch gets cancelled.
const (
	cancelNever = iota
	cancelInMode
	cancelInRun
	cancelInSink
)

// callPlan is what one call of a randomised batch does.
type callPlan struct {
	mode     tool.Mode
	yields   int
	sleep    time.Duration
	flip     int // when >= 0, this call makes call flip exclusive while it runs
	result   tool.Result
	progress bool
}

// batchPlan is one randomised batch.
type batchPlan struct {
	calls             []callPlan
	config, maxParall int
	limit             int
	cancelWhere       int
	cancelAt          int // call index (mode, run) or delivery count (sink)
	sinkFailAt        int
}

func newBatchPlan(seed uint64) batchPlan {
	rng := rand.New(rand.NewPCG(seed, 0x5c4ed))
	n := 1 + rng.IntN(20)
	p := batchPlan{config: 1 + rng.IntN(8), maxParall: rng.IntN(10)}
	p.limit = p.config
	if p.maxParall > 0 && p.maxParall < p.config {
		p.limit = p.maxParall
	}
	for i := range n {
		c := callPlan{yields: rng.IntN(40), flip: -1, result: okResult(i), progress: rng.IntN(4) == 0}
		switch rng.IntN(10) {
		case 0, 1:
			c.mode = tool.ModeExclusive
		case 2:
			c.mode = tool.ModeUnspecified
		default:
			c.mode = tool.ModeParallel
		}
		if rng.IntN(10) == 0 {
			c.sleep = time.Duration(rng.IntN(500)) * time.Microsecond
		}
		if i+1 < n && rng.IntN(8) == 0 {
			c.flip = i + 1 + rng.IntN(n-i-1)
		}
		switch rng.IntN(10) {
		case 0:
			c.result.ConcludesTurn = true
		case 1:
			c.result = tool.Failure(tool.CodeToolError, fmt.Sprintf("tool %d failed", i))
		case 2, 3:
			for j := range 1 + rng.IntN(2) {
				c.result.AdditionalContexts = append(c.result.AdditionalContexts, fmt.Sprintf("ctx %d.%d", i, j))
			}
		}
		p.calls = append(p.calls, c)
	}
	if rng.IntN(2) == 0 {
		p.cancelWhere = 1 + rng.IntN(3)
		p.cancelAt = rng.IntN(n)
		if p.cancelWhere == cancelInSink {
			p.cancelAt++ // after this many deliveries
		}
	}
	if rng.IntN(5) == 0 {
		p.sinkFailAt = 1 + rng.IntN(n)
	}
	return p
}

// occupancy is an [scheduler.Observer] that checks the pool bound from the scheduler's side.
type occupancy struct {
	scheduler.NopObserver
	limit            int
	max              atomic.Int64
	started, skipped atomic.Int64
}

func (o *occupancy) PoolOccupancy(n int) {
	for m := o.max.Load(); int64(n) > m && !o.max.CompareAndSwap(m, int64(n)); m = o.max.Load() {
	}
}
func (o *occupancy) CallStarted(*tool.Call) { o.started.Add(1) }
func (o *occupancy) CallSkipped(*tool.Call) { o.skipped.Add(1) }

// TestExecuteRandomised runs every third seed with a commit delay (results held for
// their siblings), the rest without.
func TestExecuteRandomised(t *testing.T) {
	for seed := range uint64(200) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			var delay time.Duration
			if seed%3 == 2 {
				delay = time.Millisecond
			}
			runRandomised(t, newBatchPlan(seed), delay)
		})
	}
}

func runRandomised(t *testing.T, p batchPlan, commitDelay time.Duration) {
	n := len(p.calls)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var fired atomic.Bool
	fire := func() {
		fired.Store(true)
		cancel()
	}

	// The mode table the Moder reads; calls may flip later calls while they run. used
	// is the mode the scheduler was last told for each call.
	var mu sync.Mutex
	table := make([]tool.Mode, n)
	used := make([]tool.Mode, n)
	for i, c := range p.calls {
		table[i] = c.mode
	}
	moder := scheduler.ModerFunc(func(_ context.Context, e *tool.Exec) tool.Mode {
		if p.cancelWhere == cancelInMode && e.Index == p.cancelAt {
			fire()
		}
		mu.Lock()
		defer mu.Unlock()
		used[e.Index] = table[e.Index]
		return table[e.Index]
	})

	var tr tracker
	invoked := make([]atomic.Int64, n)
	returned := make([]tool.Result, n)
	run := scheduler.RunnerFunc(func(ctx context.Context, e *tool.Exec) tool.Result {
		i := e.Index
		c := p.calls[i]
		invoked[i].Add(1)
		mu.Lock()
		exclusive := n > 1 && used[i] == tool.ModeExclusive
		mu.Unlock()
		tok := tr.begin(i, exclusive)
		defer tr.end(i, exclusive, tok)
		if p.cancelWhere == cancelInRun && i == p.cancelAt {
			fire()
		}
		if c.flip >= 0 {
			mu.Lock()
			table[c.flip] = tool.ModeExclusive
			mu.Unlock()
		}
		if c.progress {
			e.Progress(tool.Progress{Message: "working"})
		}
		r := c.result
		for range c.yields {
			if ctx.Err() != nil {
				break
			}
			runtime.Gosched()
		}
		if c.sleep > 0 {
			timer := time.NewTimer(c.sleep)
			select {
			case <-timer.C:
			case <-ctx.Done():
			}
			timer.Stop()
		}
		if ctx.Err() != nil && !r.IsError {
			r = tool.Failure(tool.CodeAborted, "cancelled while running")
		}
		returned[i] = r
		return r
	})

	l := &fakeLog{}
	sink := &fakeSink{log: l, failAt: p.sinkFailAt}
	if p.cancelWhere == cancelInSink {
		sink.onResult = func(k int) {
			if k == p.cancelAt {
				fire()
			}
		}
	}
	obs := &occupancy{limit: p.limit}
	s := scheduler.New(run, moder, l, scheduler.WithMaxParallel(p.config), scheduler.WithObserver(obs),
		scheduler.WithLogger(zaptest.NewLogger(t)), scheduler.WithCommitDelay(commitDelay))
	b := newBatch(n)
	b.MaxParallel = p.maxParall

	st, err := s.Execute(ctx, b, sink, nil)
	if err != nil {
		t.Fatalf("Execute() error = %v", err)
	}

	// Pool bound and exclusivity.
	tr.check(t)
	if got := tr.maxActive.Load(); got > int64(p.limit) {
		t.Errorf("%d calls ran at once, want at most %d", got, p.limit)
	}
	if got := obs.max.Load(); got > int64(p.limit) {
		t.Errorf("pool occupancy reached %d, want at most %d", got, p.limit)
	}

	// Exactly one result per call, in model order; started calls keep what their runner
	// returned, and the started calls are a prefix of the batch.
	got := l.checkComplete(t, n)
	ran := 0
	for i := range n {
		switch k := invoked[i].Load(); {
		case k > 1:
			t.Errorf("call %d ran %d times", i, k)
		case k == 1:
			if ran != i {
				t.Errorf("call %d ran but call %d did not: calls start in model order", i, ran)
			}
			ran = i + 1
			if diff := cmp.Diff(returned[i], got[i]); diff != "" {
				t.Errorf("result %d (-runner +logged):\n%s", i, diff)
			}
		default:
			if diff := cmp.Diff(abortedBeforeDispatch(b.Calls[i].Name), got[i]); diff != "" {
				t.Errorf("unstarted call %d result (-want +got):\n%s", i, diff)
			}
		}
	}
	if int(obs.started.Load()) != ran || int(obs.skipped.Load()) != n-ran {
		t.Errorf("observer saw %d started and %d skipped, want %d and %d", obs.started.Load(), obs.skipped.Load(), ran, n-ran)
	}
	switch {
	case !fired.Load():
		if ran != n || st.Cancelled {
			t.Errorf("without cancellation: %d of %d calls ran, Cancelled = %v", ran, n, st.Cancelled)
		}
	case p.cancelWhere == cancelInMode:
		if ran != p.cancelAt || !st.Cancelled {
			t.Errorf("cancelled reading call %d's mode: %d calls ran, Cancelled = %v", p.cancelAt, ran, st.Cancelled)
		}
	case p.cancelWhere == cancelInRun:
		if !st.Cancelled {
			t.Errorf("cancelled inside call %d: Cancelled = false", p.cancelAt)
		}
	}

	// Sink: model order, durable first, stopped after its failure.
	sink.checkProblems(t)
	_, results, ctxEvents := l.snapshot()
	wantDeliveries := n
	if p.sinkFailAt > 0 {
		wantDeliveries = p.sinkFailAt
	}
	deliveries, _ := sink.got()
	if len(deliveries) != wantDeliveries {
		t.Errorf("sink got %d results, want %d", len(deliveries), wantDeliveries)
	}
	for k, d := range deliveries {
		want := delivery{Index: k, CallSeq: results[k].Cites, ResultSeq: results[k].Seq, Result: results[k].Result}
		if diff := cmp.Diff(want, d); diff != "" {
			t.Errorf("delivery %d (-want +got):\n%s", k, diff)
		}
	}

	// Settlement: concludes_turn and contexts in FIFO order, logged citing their result.
	wantSt := scheduler.Settled{Cancelled: st.Cancelled, Results: n}
	var wantCtx []logEvent
	for _, r := range results {
		wantSt.ConcludesTurn = wantSt.ConcludesTurn || r.Result.ConcludesTurn
		wantSt.AdditionalContexts = append(wantSt.AdditionalContexts, r.Result.AdditionalContexts...)
		for _, c := range r.Result.AdditionalContexts {
			wantCtx = append(wantCtx, logEvent{Kind: "context", Cites: r.Seq, Context: c})
		}
	}
	if diff := cmp.Diff(wantSt, st); diff != "" {
		t.Errorf("Settled (-want +got):\n%s", diff)
	}
	for k := range ctxEvents {
		ctxEvents[k].Seq = 0
	}
	if diff := cmp.Diff(wantCtx, ctxEvents); diff != "" {
		t.Errorf("logged contexts (-want +got):\n%s", diff)
	}
	if slices.ContainsFunc(l.batches, func(b []int) bool { return len(b) == 0 }) {
		t.Errorf("AppendResults batches %v include an empty one", l.batches)
	}
}
