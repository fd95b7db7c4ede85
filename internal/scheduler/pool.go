package scheduler

import (
	"context"
	"time"

	"github.com/toolsd/toolsd/internal/stack"
	"github.com/toolsd/toolsd/internal/tool"
)

// schedule starts the calls in model order and commits each result once it and every
// result before it are final. It returns when every call has its result.
//
// A parallel call starts as soon as the pool has room. An exclusive call waits for the
// pool to drain and then runs alone, inline in this goroutine. The mode of call i is read
// only once call i is next and the pool has room, so a change made while earlier calls
// run is honoured. Once ctx ends, or its deadline passes, no call starts: the rest get
// synthetic results.
func (r *run) schedule(ctx context.Context) {
	n := len(r.slots)
	limit := r.s.limit(r.b.MaxParallel)
	done := make(chan int, n) // completions of pooled calls
	next, head, running := 0, 0, 0
	exclusive := false // call next was read as exclusive and waits for the pool to drain
	for {
		for next < n && running < limit {
			c := &r.slots[next]
			if !exclusive {
				r.prepare(next)
				exclusive = r.s.modeOf(ctx, &c.exec) == tool.ModeExclusive
			}
			if exclusive && running > 0 {
				break
			}
			if tool.Ended(ctx) {
				for ; next < n; next++ {
					r.place(next)
					r.skip(next)
				}
				break
			}
			r.s.obs.CallStarted(&c.exec.Call)
			if exclusive {
				// The pool is empty: commit what it left before running alone.
				head = r.advance(head, next)
				exclusive = false
				r.s.obs.PoolOccupancy(1)
				c.result = r.s.runCall(ctx, &c.exec)
				r.ended(ctx, next)
				r.s.obs.PoolOccupancy(0)
				c.done = true
				next++
				continue
			}
			running++
			r.s.obs.PoolOccupancy(running)
			go r.work(ctx, next, done)
			next++
		}
		if !r.holding(head, running) {
			head = r.advance(head, next)
			if head == n {
				return
			}
		}
		// Here running > 0: the loop above only stops with calls unstarted while
		// some are running, and with none unstarted some are unfinished.
		var holdEnds <-chan time.Time
		if r.held {
			holdEnds = r.holdTimer.C
		}
		select {
		case i := <-done:
			r.slots[i].done = true
			running--
		case <-holdEnds:
			r.held, r.flush = false, true
			continue
		}
		for more := true; more; {
			select {
			case i := <-done:
				r.slots[i].done = true
				running--
			default:
				more = false
			}
		}
		r.s.obs.PoolOccupancy(running)
	}
}

// work runs pooled call i and reports its completion; the send is its last action.
func (r *run) work(ctx context.Context, i int, done chan<- int) {
	stack.Reserve(i)
	r.slots[i].result = r.s.runCall(ctx, &r.slots[i].exec)
	r.ended(ctx, i)
	done <- i
}

// holding reports whether the ready results from head stay uncommitted for now. With a
// commit delay, the first result that could be committed while other calls still run
// waits up to the delay for them, so that results finishing close together reach the
// log in one append instead of one each (a durable log pays a commit per append). The
// hold ends at the delay, or earlier when no call is left running.
func (r *run) holding(head, running int) bool {
	d := r.s.commitDelay
	if d <= 0 || running == 0 || head == len(r.slots) || !r.slots[head].done {
		return false
	}
	if r.flush {
		r.flush = false
		return false
	}
	if !r.held {
		r.held = true
		if r.holdTimer == nil {
			r.holdTimer = time.NewTimer(d)
		} else {
			r.holdTimer.Reset(d)
		}
	}
	return true
}

// unhold ends a hold because its results are being committed.
func (r *run) unhold() {
	if r.held {
		r.held = false
		r.holdTimer.Stop()
	}
	r.flush = false
}

// advance commits the final prefix from head and returns the new head. Once every call
// has started, this goroutine has nothing left to do but commit, so it commits inline.
// Before that, a slow log or client must not hold up starting the next calls: the
// results go to a committer goroutine, started the first time it is needed and used for
// the rest of the batch so that commits stay in order.
func (r *run) advance(head, next int) int {
	n := len(r.slots)
	end := head
	for end < n && r.slots[end].done {
		end++
	}
	if end == head {
		return head
	}
	r.unhold()
	if r.ready == nil {
		if next == n {
			r.commit(head, end)
			return end
		}
		r.ready = make(chan int, n)
		r.wg.Go(func() { r.commitLoop(r.ready) })
	}
	for ; head < end; head++ {
		r.ready <- head
	}
	return end
}
