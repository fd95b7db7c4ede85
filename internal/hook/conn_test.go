package hook

import (
	"errors"
	"testing"
)

// TestRequestQueueFull checks that a request that cannot be queued for a stream's
// writer (the hook stopped reading) fails at once instead of waiting.
func TestRequestQueueFull(t *testing.T) {
	h := New()
	c := h.newConn(nopSender{}, Scopes{}) // no writer runs
	ch := make(chan answer, requestQueue+1)
	for i := range requestQueue + 1 {
		c.request(uint64(i+1), i, ch, &response{})
	}
	select {
	case a := <-ch:
		if a.slot != requestQueue || !errors.Is(a.err, errOverloaded) {
			t.Errorf("answer = %+v, want slot %d failing with %v", a, requestQueue, errOverloaded)
		}
	default:
		t.Fatal("the request over the queue limit did not fail at once")
	}
	if n := len(c.info().Subscriptions); n != 0 {
		t.Errorf("subscriptions = %d", n)
	}
	if c.isPending(requestQueue + 1) {
		t.Error("the failed request is still pending")
	}
	// The stream's death fails every queued request, once.
	c.die(errGone)
	if got := len(ch); got != requestQueue {
		t.Errorf("answers after die = %d, want %d", got, requestQueue)
	}
}
