package scheduler

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/toolsd/toolsd/internal/tool"
)

// seqLog is a Log that numbers events and keeps nothing.
type seqLog struct {
	mu  sync.Mutex
	seq uint64
}

func (l *seqLog) next(n int) []uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	seqs := make([]uint64, n)
	for i := range seqs {
		l.seq++
		seqs[i] = l.seq
	}
	return seqs
}

func (l *seqLog) AppendCalls(_ context.Context, b *Batch) ([]uint64, error) {
	return l.next(len(b.Calls)), nil
}

func (l *seqLog) AppendResults(_ context.Context, _ *Batch, rs []Committed) ([]uint64, error) {
	return l.next(len(rs)), nil
}

func (*seqLog) AppendContexts(context.Context, *Batch, uint64, []string) error { return nil }

// echo answers each call with its call id.
var echo = RunnerFunc(func(_ context.Context, e *tool.Exec) tool.Result {
	return tool.Result{Content: e.CallID}
})

// collect is a Sink keeping each result's content by index.
type collect struct {
	mu  sync.Mutex
	got map[int]string
}

func (c *collect) Result(i int, _, _ uint64, r tool.Result) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got[i] = r.Content
	return nil
}

func (*collect) Progress(tool.Progress) {}

func batchOf(id string, n int) *Batch {
	b := &Batch{SessionID: "s", BatchID: id}
	for i := range n {
		b.Calls = append(b.Calls, tool.Call{CallID: fmt.Sprintf("%s-%d", id, i), Name: "t"})
	}
	return b
}

// runBatch executes a batch of n calls on s and checks every result is its own call's.
func runBatch(t *testing.T, s *Scheduler, id string, n int) {
	t.Helper()
	sink := &collect{got: map[int]string{}}
	settled, err := s.Execute(t.Context(), batchOf(id, n), sink, nil)
	if err != nil || settled.Results != n {
		t.Errorf("batch %s: settled %+v, err %v; want %d results", id, settled, err, n)
		return
	}
	for i := range n {
		if want := fmt.Sprintf("%s-%d", id, i); sink.got[i] != want {
			t.Errorf("batch %s: result %d = %q, want %q", id, i, sink.got[i], want)
		}
	}
}

// idleWorkers waits until the pool holds want idle workers, and fails the test if it
// never does.
func idleWorkers(t *testing.T, ws *workers, want int) {
	t.Helper()
	for range 2000 {
		ws.mu.Lock()
		n := len(ws.idle)
		ws.mu.Unlock()
		if n == want {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	t.Fatalf("idle workers = %d, want %d", len(ws.idle), want)
}

// barrier answers like echo once all n calls of a batch are running at once, so a
// batch of n calls needs n workers.
func barrier(n int) RunnerFunc {
	var mu sync.Mutex
	arrived := map[string]int{}
	all := map[string]chan struct{}{}
	return func(_ context.Context, e *tool.Exec) tool.Result {
		mu.Lock()
		ch, ok := all[e.BatchID]
		if !ok {
			ch = make(chan struct{})
			all[e.BatchID] = ch
		}
		arrived[e.BatchID]++
		if arrived[e.BatchID] == n {
			close(ch)
		}
		mu.Unlock()
		<-ch
		return echo(context.Background(), e)
	}
}

// Idle workers run the next batch's calls before any new worker starts. Should one
// retire between batches (its idle time passing on a slow machine), a new one takes its
// place, and the count still holds.
func TestWorkersAreKeptBetweenBatches(t *testing.T) {
	s := New(barrier(4), nil, &seqLog{})
	runBatch(t, s, "a", 4)
	idleWorkers(t, s.workers, 4)
	runBatch(t, s, "b", 4)
	idleWorkers(t, s.workers, 4) // a worker per call, not kept, would make eight
	idleWorkers(t, s.workers, 0) // and then they retire
}

func TestWorkersExitWhenIdle(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	s := New(echo, nil, &seqLog{})
	s.workers.idleFor = time.Millisecond
	runBatch(t, s, "a", 8)
	idleWorkers(t, s.workers, 0)
}

// A worker whose idle timer fires just as a batch takes it off the idle list must run
// that batch's call, not exit: with the timer at a nanosecond, the two race all the time.
func TestWorkersRetireRacesStart(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	s := New(echo, nil, &seqLog{})
	s.workers.idleFor = time.Nanosecond
	var wg sync.WaitGroup
	for a := range 8 {
		wg.Go(func() {
			for b := range 50 {
				runBatch(t, s, fmt.Sprintf("a%d-b%d", a, b), 8)
			}
		})
	}
	wg.Wait()
	idleWorkers(t, s.workers, 0)
}
