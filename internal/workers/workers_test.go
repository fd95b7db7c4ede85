package workers_test

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/toolsd/toolsd/internal/workers"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// idleWorkers waits until p holds want idle workers, and fails the test if it never
// does.
func idleWorkers[T any](t *testing.T, p *workers.Pool[T], want int) {
	t.Helper()
	for range 2000 {
		if p.Idle() == want {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("idle workers = %d, want %d", p.Idle(), want)
}

// Idle workers take the next tasks before any new worker starts. Should one retire
// between the rounds (its idle time passing on a slow machine), a new one takes its
// place, and the count still holds.
func TestWorkersAreKept(t *testing.T) {
	var ran sync.WaitGroup
	p := workers.New(func(all *sync.WaitGroup) {
		all.Done()
		all.Wait() // every task of the round is running
		ran.Done()
	}, 0)
	round := func() {
		var all sync.WaitGroup
		all.Add(4)
		ran.Add(4)
		for range 4 {
			p.Go(&all)
		}
		ran.Wait()
	}
	round()
	idleWorkers(t, p, 4)
	round()
	idleWorkers(t, p, 4) // a goroutine per task, kept, would make eight
	idleWorkers(t, p, 0) // and then they retire
}

func TestWorkersExitWhenIdle(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	var ran sync.WaitGroup
	p := workers.New(func(int) { ran.Done() }, time.Millisecond)
	ran.Add(8)
	for i := range 8 {
		p.Go(i)
	}
	ran.Wait()
	idleWorkers(t, p, 0)
}

// A worker whose idle timer fires just as Go takes it off the idle list must run that
// task, not exit: with the idle time at a nanosecond, the two race all the time.
func TestWorkersRetireRacesGo(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	var mu sync.Mutex
	got := map[int]int{}
	var ran sync.WaitGroup
	p := workers.New(func(i int) {
		mu.Lock()
		got[i]++
		mu.Unlock()
		ran.Done()
	}, time.Nanosecond)
	const senders, each = 8, 500
	ran.Add(senders * each)
	var wg sync.WaitGroup
	for s := range senders {
		wg.Go(func() {
			for i := range each {
				p.Go(s*each + i)
			}
		})
	}
	wg.Wait()
	ran.Wait()
	if len(got) != senders*each {
		t.Errorf("%d tasks ran, want %d", len(got), senders*each)
	}
	for i, n := range got {
		if n != 1 {
			t.Errorf("task %d ran %d times", i, n)
		}
	}
	idleWorkers(t, p, 0)
}

// A task that ends its goroutine takes its worker with it; the pool carries on.
func TestWorkersGoexit(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	var ran sync.WaitGroup
	p := workers.New(func(exit bool) {
		defer ran.Done()
		if exit {
			runtime.Goexit()
		}
	}, time.Millisecond)
	ran.Add(1)
	p.Go(true)
	ran.Wait()
	ran.Add(1)
	p.Go(false)
	ran.Wait()
	idleWorkers(t, p, 0)
}
