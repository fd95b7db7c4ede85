package hook

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/pipeline"
	"github.com/toolsd/toolsd/internal/tool"
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

// departures is an Observer that labels counts as the metrics layer does: under the
// hook's name while a hook of that name is connected, else under "" — and deletes a
// name's counts when its last hook leaves. A test can hold one failure of a hook, and
// one hook's removal, until it releases them.
type departures struct {
	NopObserver
	holdFailure, holdLeave string
	failed, leaving        chan struct{} // closed when the held event has come
	releaseFailure         chan struct{}
	releaseLeave           chan struct{}

	mu     sync.Mutex
	live   map[string]int
	counts map[string]int // "lost:<label>" and "failure:<label>:<stage>"
}

func newDepartures(holdFailure, holdLeave string) *departures {
	return &departures{
		holdFailure: holdFailure, holdLeave: holdLeave,
		failed: make(chan struct{}), leaving: make(chan struct{}),
		releaseFailure: make(chan struct{}), releaseLeave: make(chan struct{}),
		live: map[string]int{}, counts: map[string]int{},
	}
}

func (d *departures) HookConnected(hook string, delta int) {
	if delta < 0 && hook == d.holdLeave {
		close(d.leaving)
		<-d.releaseLeave
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.live[hook] += delta; d.live[hook] == 0 {
		for k := range d.counts {
			if k == "lost:"+hook || strings.HasPrefix(k, "failure:"+hook+":") {
				delete(d.counts, k)
			}
		}
	}
}

func (d *departures) label(hook string) string {
	if d.live[hook] == 0 {
		return ""
	}
	return hook
}

func (d *departures) HookFailure(hook, stage string, _ bool) {
	if hook == d.holdFailure {
		close(d.failed)
		<-d.releaseFailure
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.counts["failure:"+d.label(hook)+":"+stage]++
}

func (d *departures) NotificationsLost(hook string, n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.counts["lost:"+d.label(hook)] += n
}

func (d *departures) get(key string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.counts[key]
}

// attachedConn is a conn with no writer, welcomed under name with one subscription.
func attachedConn(tb testing.TB, h *Hub, name string, stage Stage, priority int32, failOpen bool) *conn {
	tb.Helper()
	hl, err := parseHello(&toolsdv1.HookHello{Name: name, FailOpen: failOpen, Subscriptions: []*toolsdv1.HookSubscription{
		{Stage: stage.proto(), Priority: priority},
	}})
	if err != nil {
		tb.Fatal(err)
	}
	c := h.newConn(nopSender{}, Scopes{})
	c.hello = hl
	if err := h.attach(c); err != nil {
		tb.Fatal(err)
	}
	return c
}

// TestNotificationLostAsItsHookLeavesIsKept: a result notification for a hook whose
// stream has ended but which is still being removed is counted lost after the removal,
// so under hook="" once no hook of its name is left. It was counted under the hook's
// name just before the removal deleted that name's series, and so lost.
func TestNotificationLostAsItsHookLeavesIsKept(t *testing.T) {
	obs := newDepartures("full", "leaving")
	h := New(WithObserver(obs), WithResultQueue(1))
	full := attachedConn(t, h, "full", StageResult, 0, false)
	leaving := attachedConn(t, h, "leaving", StageResult, 1, false)
	if err := full.notify(&response{}); err != nil { // its queue is full from now on
		t.Fatal(err)
	}
	e := &tool.Exec{Call: tool.Call{CallID: "c", Name: "echo"}}
	observed := make(chan struct{})
	go func() { // the call holds the table with both hooks
		defer close(observed)
		h.ResultObserver()(e, tool.Result{Content: "ok"}, 0)
	}()
	<-obs.failed // the call is between the two hooks
	died := make(chan struct{})
	go func() {
		defer close(died)
		leaving.die(errGone)
	}()
	<-obs.leaving // dead, and being removed
	close(obs.releaseFailure)
	<-observed
	close(obs.releaseLeave)
	<-died
	if got := obs.get("lost:"); got != 1 {
		t.Errorf(`notifications lost under hook="" = %d, want 1 (counts %v)`, got, obs.counts)
	}
	full.die(errGone)
}

// TestRequestFailedAsItsHookLeavesIsKept: a post-execute request to a hook whose stream
// has ended but which is still being removed fails once it is removed, so its failure
// is counted under hook="" once no hook of its name is left. It failed at once, counted
// under the hook's name just before the removal deleted that name's series.
func TestRequestFailedAsItsHookLeavesIsKept(t *testing.T) {
	obs := newDepartures("stuck", "leaving")
	h := New(WithObserver(obs))
	stuck := attachedConn(t, h, "stuck", StagePostExecute, 0, true)
	leaving := attachedConn(t, h, "leaving", StagePostExecute, 1, false)
	for range requestQueue { // stuck's request queue is full: its request fails at once
		stuck.reqs <- outbound{}
	}
	e := &tool.Exec{Call: tool.Call{CallID: "c", Name: "echo"}}
	reviewed := make(chan pipeline.PostVerdict, 1)
	go func() {
		reviewed <- h.PostExecute().PostExecute(t.Context(), e, nil, tool.Result{Content: "ok"})
	}()
	<-obs.failed // the chain is between the two hooks
	died := make(chan struct{})
	go func() {
		defer close(died)
		leaving.die(errGone)
	}()
	<-obs.leaving // dead, and being removed
	close(obs.releaseFailure)
	// The chain asks leaving: its request fails at once, or waits for the removal.
	waitDeadline := time.Now().Add(30 * time.Second)
	for {
		leaving.mu.Lock()
		waiting := len(leaving.pending) > 0
		leaving.mu.Unlock()
		if waiting || len(reviewed) > 0 {
			break
		}
		if time.Now().After(waitDeadline) {
			t.Fatal("the chain never asked the leaving hook")
		}
		time.Sleep(time.Millisecond)
	}
	close(obs.releaseLeave)
	<-died
	v := <-reviewed
	stuck.die(errGone)
	if v.Action != pipeline.Block || v.Code != tool.CodePolicyUnavailable {
		t.Errorf("PostExecute() = %+v, want a block with %s", v, tool.CodePolicyUnavailable)
	}
	if got := obs.get("failure::post_execute"); got != 1 {
		t.Errorf(`post-execute failures under hook="" = %d, want 1 (counts %v)`, got, obs.counts)
	}
}
