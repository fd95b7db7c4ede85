package session

import (
	"context"
	"sync"
)

// holds are the sessions held against retention ([Store.Hold]) and the ones the running
// sweep is deleting. A sweep deletes a session only after doom has marked it, which a
// held session refuses, and a Hold of a doomed session waits until the sweep has
// deleted it: so a holder never sees its session's owner and events disappear under
// it, and a session is never deleted between a batch's claim and its appends.
type holds struct {
	// sweeping serializes sweeps: endSweep releases every session the sweep doomed.
	sweeping sync.Mutex

	mu     sync.Mutex
	n      map[string]int
	doomed map[string]struct{}
	swept  chan struct{} // closed by endSweep when it releases doomed sessions
}

// hold holds id against retention, after waiting for a sweep deleting it to end.
// closed ends the wait with ErrClosed.
func (h *holds) hold(ctx context.Context, id string, closed <-chan struct{}) (func(), error) {
	h.mu.Lock()
	for {
		if _, ok := h.doomed[id]; !ok {
			break
		}
		swept := h.swept
		h.mu.Unlock()
		select {
		case <-swept:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-closed:
			return nil, ErrClosed
		}
		h.mu.Lock()
	}
	if h.n == nil {
		h.n = make(map[string]int)
	}
	h.n[id]++
	h.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			if h.n[id]--; h.n[id] <= 0 {
				delete(h.n, id)
			}
		})
	}, nil
}

// beginSweep starts a sweep; endSweep must follow.
func (h *holds) beginSweep() { h.sweeping.Lock() }

// doom marks id as being deleted by the running sweep, unless it is held (false).
func (h *holds) doom(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n[id] > 0 {
		return false
	}
	if h.doomed == nil {
		h.doomed = make(map[string]struct{})
	}
	if h.swept == nil {
		h.swept = make(chan struct{})
	}
	h.doomed[id] = struct{}{}
	return true
}

// endSweep ends the running sweep: the sessions it doomed are deleted (or, when it
// failed, kept), and holds waiting for them go on.
func (h *holds) endSweep() {
	h.mu.Lock()
	clear(h.doomed)
	if h.swept != nil {
		close(h.swept)
		h.swept = nil
	}
	h.mu.Unlock()
	h.sweeping.Unlock()
}
