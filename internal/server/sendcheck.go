package server

import (
	"sync"
	"time"

	"github.com/toolsd/toolsd/internal/streamgate"
)

// sendCheck cuts off the peer of a stream whose Sends sends times, once one Send has
// waited for longer than the write timeout allows (one more per [streamgate.DrainRate]
// bytes of the message before it; see [streamgate.SendWatch.Stalled]). Its timer fires
// every write timeout while a Send is in progress; once it finds none (the writer idle,
// or gone) it stays stopped until the next Send arms it again, so that an idle stream
// costs no timer. The batch stream's outbox and WatchSession use it.
type sendCheck struct {
	sends   *streamgate.SendWatch
	timeout time.Duration
	onStall func()

	mu      sync.Mutex
	t       *time.Timer // set before the timer could fire, under mu
	stopped bool        // under mu: stop ran, and check must not arm the timer again
}

// startSendCheck starts checking sends every timeout; onStall runs, once, from the
// timer's goroutine when a Send has stalled. A Send that sends times before it is
// called is checked from the first timer on.
func startSendCheck(sends *streamgate.SendWatch, timeout time.Duration, onStall func()) *sendCheck {
	c := &sendCheck{sends: sends, timeout: timeout, onStall: onStall}
	c.mu.Lock()
	c.t = time.AfterFunc(timeout, c.check)
	c.mu.Unlock()
	sends.OnWake(func() { c.t.Reset(timeout) })
	return c
}

// check runs when the timer fires: it calls onStall for a stalled Send, and otherwise
// arms the timer again unless no Send is in progress. It runs under mu, so that once
// stop has returned no check is under way: the stream's handler then knows for sure
// whether its client was cut off.
func (c *sendCheck) check() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped { // a check that fired as stop ran must not cut, or keep the stream a timeout more
		return
	}
	if c.sends.Stalled(c.timeout) {
		c.onStall()
		return
	}
	if !c.sends.Park() {
		c.t.Reset(c.timeout)
	}
}

// stop stops the timer once the stream's writer is done with it, or the timer would
// keep the stream for up to a write timeout after. It waits for a check under way, so
// that a cut it made is visible when stop returns.
func (c *sendCheck) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped = true
	c.t.Stop()
}
