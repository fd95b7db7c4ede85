package hook

import (
	"errors"
	"testing"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
)

// TestRequestQueueFull checks that a request that cannot be queued for a stream's
// writer (the hook stopped reading) fails at once instead of waiting.
func TestRequestQueueFull(t *testing.T) {
	h := New()
	c := h.newConn(nopSender{}, Scopes{}) // no writer runs
	ch := make(chan answer, requestQueue+1)
	var last uint64
	for i := range requestQueue + 1 {
		last = c.request(i, ch, &response{})
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
	if c.forget(last) {
		t.Error("the failed request is still pending")
	}
	// The stream's death fails every queued request, once.
	c.die(errGone)
	if got := len(ch); got != requestQueue {
		t.Errorf("answers after die = %d, want %d", got, requestQueue)
	}
}

// TestDecisionBeforeSendIgnored checks that a decision resolves only a request the
// stream has sent: request ids count up per stream, so a hook can guess the id of a
// request still waiting for the writer, and must not decide a call it never saw.
func TestDecisionBeforeSendIgnored(t *testing.T) {
	h := New()
	c := h.newConn(nopSender{}, Scopes{}) // no writer runs: the test plays it
	ch := make(chan answer, 1)
	c.request(0, ch, requestMsg(StagePreExecute, &toolsdv1.HookCall{}, nil, nil))
	guess := &toolsdv1.HookDecision{RequestId: 1, Verdict: toolsdv1.HookVerdict_HOOK_VERDICT_ALLOW}
	if c.resolve(guess) {
		t.Fatal("resolve() = true for a request not sent yet, want false")
	}
	msg := c.number(<-c.reqs)
	if id := msg.GetRequest().GetRequestId(); id != 1 {
		t.Fatalf("first request id = %d, want 1", id)
	}
	if !c.resolve(guess) {
		t.Fatal("resolve() = false for the request sent, want true")
	}
	if a := <-ch; a.d != guess || a.err != nil {
		t.Errorf("answer = %+v, want the decision", a)
	}
}

// lostCounter counts NotificationsLost.
type lostCounter struct {
	NopObserver
	lost map[string]int
}

func (l *lostCounter) NotificationsLost(hook string, n int) { l.lost[hook] += n }

// TestDieCountsQueuedNotifications checks that the notifications queued when a stream
// dies are counted lost, and that none is queued after it died.
func TestDieCountsQueuedNotifications(t *testing.T) {
	obs := &lostCounter{lost: map[string]int{}}
	c := New(WithObserver(obs)).newConn(nopSender{}, Scopes{}) // no writer runs
	c.hello.name = "audit"
	for range 2 {
		if err := c.notify(requestMsg(StageResult, &toolsdv1.HookCall{}, &toolsdv1.HookResult{}, nil)); err != nil {
			t.Fatalf("notify() = %v, want nil", err)
		}
	}
	c.die(errGone)
	if got := obs.lost["audit"]; got != 2 {
		t.Errorf("lost after die = %d, want 2", got)
	}
	if err := c.notify(requestMsg(StageResult, &toolsdv1.HookCall{}, &toolsdv1.HookResult{}, nil)); !errors.Is(err, errGone) {
		t.Errorf("notify() after die = %v, want %v", err, errGone)
	}
	if n := len(c.notes); n != 0 {
		t.Errorf("queued notifications after die = %d, want 0", n)
	}
}
