// Package workers runs short tasks on goroutines kept between tasks.
//
// A task of toolsd's call path (a pooled tool call in the scheduler, a handler in the
// provider SDK) runs deep enough that its goroutine's stack grows (see [stack.Reserve]).
// A fresh goroutine per task pays that growth, and the release of the grown stack, every
// time; a kept goroutine pays it once. (A collection may shrink the stack of a worker
// that is idle as it runs; the worker's next task then grows it back as it goes, which
// under load happens to a worker once in many tasks. Reserving again before every task
// would cost a clear of the reservation each time instead.) A [Pool] hands each task to an idle worker when
// there is one and starts a worker when there is none; a worker left idle for the pool's
// idle time exits, so an idle process keeps no workers and a burst leaves none behind for
// long.
package workers

import (
	"slices"
	"sync"
	"time"

	"github.com/toolsd/toolsd/internal/stack"
)

// DefaultIdle is how long a worker of [New] waits for another task before it exits.
const DefaultIdle = 200 * time.Millisecond

// Pool runs tasks of type T with one function, each on a worker goroutine of its own
// while it runs. The zero Pool is not usable: use [New].
type Pool[T any] struct {
	run     func(T)
	idleFor time.Duration
	mu      sync.Mutex
	idle    []*worker[T] // most recently idle last
}

// worker is one kept goroutine; its channel takes the next task while it is idle.
type worker[T any] struct {
	next chan T
}

// New returns a Pool running each task with run. A worker waits idle for idleFor
// ([DefaultIdle] when idleFor <= 0) before it exits.
//
// run may end its goroutine (runtime.Goexit): the worker then ends with it, and a later
// task gets another. A panic in run is not recovered.
func New[T any](run func(T), idleFor time.Duration) *Pool[T] {
	if idleFor <= 0 {
		idleFor = DefaultIdle
	}
	return &Pool[T]{run: run, idleFor: idleFor}
}

// Go runs t on an idle worker, or on a new one when none is idle. It does not wait for
// t to run.
func (p *Pool[T]) Go(t T) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		w := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		w.next <- t // buffered, and w is off the idle list: never blocks
		return
	}
	p.mu.Unlock()
	go p.loop(t)
}

// Idle reports how many workers are waiting for a task.
func (p *Pool[T]) Idle() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}

// loop runs tasks until the worker stays idle for the pool's idle time.
func (p *Pool[T]) loop(t T) {
	stack.Reserve(0)
	w := &worker[T]{next: make(chan T, 1)}
	var timer *time.Timer
	for {
		p.run(t)
		var zero T
		t = zero // keeps nothing of the task alive while idle
		p.mu.Lock()
		p.idle = append(p.idle, w)
		p.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(p.idleFor)
		} else {
			timer.Reset(p.idleFor)
		}
		select {
		case t = <-w.next:
			timer.Stop()
		case <-timer.C:
			if p.retire(w) {
				return
			}
			t = <-w.next // taken off the idle list as the timer fired: its task is coming
		}
	}
}

// retire takes w off the idle list and reports whether it was still there.
func (p *Pool[T]) retire(w *worker[T]) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := slices.Index(p.idle, w)
	if i < 0 {
		return false
	}
	p.idle = slices.Delete(p.idle, i, i+1)
	return true
}
