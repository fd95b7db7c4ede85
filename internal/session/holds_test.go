package session

import (
	"context"
	"errors"
	"testing"
)

// A sweep deletes only what doom marked, and doom refuses a held session; a Hold of a
// session the running sweep is deleting waits for the sweep to end.
func TestHoldWaitsForTheSweepDeletingItsSession(t *testing.T) {
	var h holds
	release, err := h.hold(t.Context(), "held", nil)
	if err != nil {
		t.Fatal(err)
	}
	h.beginSweep()
	if h.doom("held") {
		t.Error("doom(held) = true, want a held session refused")
	}
	if !h.doom("doomed") {
		t.Fatal("doom(doomed) = false, want true")
	}
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := h.hold(cancelled, "doomed", nil); !errors.Is(err, context.Canceled) {
		t.Errorf("hold(doomed) during its sweep = %v, want it to wait (until its ctx ends)", err)
	}
	closed := make(chan struct{})
	close(closed)
	if _, err := h.hold(t.Context(), "doomed", closed); !errors.Is(err, ErrClosed) {
		t.Errorf("hold(doomed) on a closing store = %v, want ErrClosed", err)
	}
	other, err := h.hold(cancelled, "other", nil)
	if err != nil {
		t.Errorf("hold(other) during a sweep that does not delete it = %v, want nil", err)
	} else {
		other()
	}

	got := make(chan error, 1)
	go func() {
		rel, err := h.hold(t.Context(), "doomed", nil)
		if err == nil {
			rel()
		}
		got <- err
	}()
	h.endSweep()
	if err := <-got; err != nil {
		t.Errorf("hold(doomed) after its sweep = %v, want nil", err)
	}

	release()
	h.beginSweep()
	defer h.endSweep()
	if !h.doom("held") {
		t.Error("doom(held) after its release = false, want true")
	}
}
