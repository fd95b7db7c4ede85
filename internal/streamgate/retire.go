package streamgate

import "sync"

// Retire guards the work of a goroutine a stream's handler does not wait for (a receive
// loop blocked in Recv, a writer blocked in Send): the handler retires it before it
// returns, so nothing the goroutine does, a log line included, comes after the stream's
// end. The zero value is live.
type Retire struct {
	mu      sync.Mutex
	retired bool
}

// Do runs f unless retired, and reports whether it ran. The handler's [Retire.Retire]
// waits for an f in progress, so f must not wait on the handler.
func (r *Retire) Do(f func()) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.retired {
		return false
	}
	f()
	return true
}

// Retire waits for an f in progress and turns later calls of Do into no-ops.
func (r *Retire) Retire() {
	r.mu.Lock()
	r.retired = true
	r.mu.Unlock()
}
