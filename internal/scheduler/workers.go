package scheduler

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/toolsd/toolsd/internal/stack"
)

// workerIdle is how long a worker waits for another call before it exits.
const workerIdle = 200 * time.Millisecond

// task is one pooled call for a worker: call i of run r.
type task struct {
	r    *run
	ctx  context.Context
	i    int
	done chan<- int // told i once the result is in slot i
}

// workers runs a scheduler's pooled calls on goroutines kept between calls. A call
// goroutine's stack grows to hold the pipeline (see [stack.Reserve]); a fresh goroutine
// per call pays that growth, and its release, every time, where a kept one pays it once.
// A worker with nothing to run waits idle for a while, then exits, so an idle toolsd keeps
// no workers and a burst of calls leaves none behind for long.
type workers struct {
	idleFor time.Duration
	mu      sync.Mutex
	idle    []*worker // most recently idle last
}

// worker is one kept goroutine; its channel takes the next task while it is idle.
type worker struct {
	next chan task
}

// start runs t on an idle worker, or on a new one when none is idle.
func (ws *workers) start(t task) {
	ws.mu.Lock()
	if n := len(ws.idle); n > 0 {
		w := ws.idle[n-1]
		ws.idle[n-1] = nil
		ws.idle = ws.idle[:n-1]
		ws.mu.Unlock()
		w.next <- t // buffered: never blocks, the worker is taken off the idle list
		return
	}
	ws.mu.Unlock()
	go ws.loop(t)
}

// loop runs tasks until the worker stays idle for idleFor.
func (ws *workers) loop(t task) {
	stack.Reserve(t.i)
	w := &worker{next: make(chan task, 1)}
	var timer *time.Timer
	for {
		t.r.slots[t.i].result = t.r.s.runCall(t.ctx, &t.r.slots[t.i].exec)
		t.done <- t.i // the batch may end now: t is not used again
		t = task{}
		ws.mu.Lock()
		ws.idle = append(ws.idle, w)
		ws.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(ws.idleFor)
		} else {
			timer.Reset(ws.idleFor)
		}
		select {
		case t = <-w.next:
			timer.Stop()
		case <-timer.C:
			if ws.retire(w) {
				return
			}
			t = <-w.next // taken off the idle list as the timer fired: its task is coming
		}
	}
}

// retire takes w off the idle list and reports whether it was still there.
func (ws *workers) retire(w *worker) bool {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for i, x := range ws.idle {
		if x == w {
			ws.idle = slices.Delete(ws.idle, i, i+1)
			return true
		}
	}
	return false
}
