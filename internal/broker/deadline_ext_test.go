package broker_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/broker"
	"github.com/toolsd/toolsd/internal/broker/brokertest"
	"github.com/toolsd/toolsd/internal/tool"
	"github.com/toolsd/toolsd/internal/tool/tooltest"
)

// A call past its deadline is not sent, even before its context's timer has run: its
// provider would get a deadline already past, and one that ignores it would run the tool
// for a caller that has given up.
func TestCallPastItsDeadlineIsNotSent(t *testing.T) {
	srv := brokertest.Start(t, brokertest.NewRegistrar())
	r := helloRaw(t, srv, "raw", 0)
	passed := &atomic.Bool{}
	passed.Store(true)
	call := goCall(tooltest.LateTimer{Context: t.Context(), Passed: passed}, srv.Broker, r.id, execFor("t", "{}"))
	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	select {
	case res := <-call:
		if res.Code() != tool.CodeAbortedBeforeDispatch {
			t.Errorf("Call() past its deadline = %+v, want ABORTED_BEFORE_DISPATCH", res)
		}
	case m := <-r.msgs:
		t.Errorf("a call past its deadline was sent: %v", m)
		r.result(&toolsdv1.ExecuteResult{RequestId: m.GetExecute().GetRequestId(), Content: []byte("ran")})
		awaitResult(t, call)
	case <-timer.C:
		t.Fatal("timed out waiting for Call to return or send")
	}
}

// A provider honouring the deadline it was sent may answer that the call stopped before
// toolsd's own timer for that deadline has run, so before toolsd cancelled the call.
// Past the deadline, that is the call cancelled (ABORTED; the pipeline makes it
// TOOL_TIMEOUT when the deadline was the tool's), not the tool's failure. Before the
// deadline, a call toolsd did not cancel keeps what its provider said.
func TestStopAtTheDeadlineBeforeToolsdsTimer(t *testing.T) {
	srv := brokertest.Start(t, brokertest.NewRegistrar(), broker.WithLimits(broker.Limits{CancelGrace: time.Hour}))
	r := helloRaw(t, srv, "raw", 0)
	for name, tc := range map[string]struct {
		pass bool
		code tool.Code
	}{
		"past the deadline":   {pass: true, code: tool.CodeAborted},
		"before the deadline": {pass: false, code: tool.CodeToolError},
	} {
		t.Run(name, func(t *testing.T) {
			passed := &atomic.Bool{}
			call := goCall(tooltest.LateTimer{Context: t.Context(), Passed: passed}, srv.Broker, r.id, execFor("t", "{}"))
			id := r.execute().GetRequestId()
			passed.Store(tc.pass)
			r.result(&toolsdv1.ExecuteResult{RequestId: id, IsError: true, ErrorMessage: []byte("context deadline exceeded"), Cancelled: true, ConcludesTurn: true})
			if res := awaitResult(t, call); res.Code() != tc.code || !res.ConcludesTurn {
				t.Errorf("Call() = %+v, want %s with the tool's ConcludesTurn", res, tc.code)
			}
		})
	}
}

// A call whose deadline passes while it waits for the send slot is not sent once it gets
// the slot, even before its context's timer has run: its provider would get a deadline
// already past, as for a call past its deadline on entry. It never reached the stream:
// ABORTED_BEFORE_DISPATCH.
func TestCallPastItsDeadlineInTheSendSlotIsNotSent(t *testing.T) {
	starts, srv, r, base := slotHeld(t)
	passed := &atomic.Bool{}
	e := execFor("t", "{}")
	e.CallID = "late"
	call := goCall(tooltest.LateTimer{Context: t.Context(), Passed: passed}, srv.Broker, r.id, e)
	// Past its entry, so waiting for the slot, which the stuck Send holds until the
	// test reads.
	waitInFlight(t, srv.Broker, r.id, 5)
	passed.Store(true)
	// No Send began after the stuck one, so the late call has not reached the stream;
	// had one, the slot was not held as this test needs (a change in gRPC's buffering).
	if n := starts.count(); n != base+stuckSend {
		t.Fatalf("%d Sends began before the test read, want %d (the last stuck)", n-base, stuckSend)
	}
	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	for {
		select {
		case res := <-call:
			if res.Code() != tool.CodeAbortedBeforeDispatch {
				t.Errorf("Call() past its deadline in the send slot = %+v, want ABORTED_BEFORE_DISPATCH", res)
			}
			return
		case m := <-r.msgs: // reading frees the slot
			if ex := m.GetExecute(); ex.GetCallId() == "late" {
				t.Errorf("a call past its deadline was sent: %v", ex)
				r.result(&toolsdv1.ExecuteResult{RequestId: ex.GetRequestId(), Content: []byte("ran")})
			}
		case <-timer.C:
			t.Fatal("timed out waiting for Call to return")
		}
	}
}

// An execute carries, beside its deadline, the time left until it as it is written to
// the stream: a provider times the call by that from when it receives it, as its clock
// may not agree with toolsd's. A call that waited for the send slot is sent the time
// left after the wait, not when it began.
func TestExecuteTimeoutIsTheTimeLeftWhenSent(t *testing.T) {
	t.Run("free slot", func(t *testing.T) {
		srv := brokertest.Start(t, brokertest.NewRegistrar())
		r := helloRaw(t, srv, "free", 0)
		deadline := time.Now().Add(time.Hour)
		ctx, cancel := context.WithDeadline(t.Context(), deadline)
		defer cancel()
		before := time.Now()
		call := goCall(ctx, srv.Broker, r.id, execFor("t", "{}"))
		ex := r.execute()
		checkTimeout(t, ex, deadline, before, time.Now())
		r.result(&toolsdv1.ExecuteResult{RequestId: ex.GetRequestId(), Content: []byte("ok")})
		awaitResult(t, call)
	})
	t.Run("after waiting for the slot", func(t *testing.T) {
		starts, srv, r, base := slotHeld(t)
		deadline := time.Now().Add(time.Hour)
		ctx, cancel := context.WithDeadline(t.Context(), deadline)
		defer cancel()
		e := execFor("t", "{}")
		e.CallID = "late"
		launched := time.Now()
		call := goCall(ctx, srv.Broker, r.id, e)
		waitInFlight(t, srv.Broker, r.id, 5) // past its entry, waiting for the slot
		// Not waiting for an event: time must pass between building the execute and
		// sending it, for a timeout read at the build to show (clocks may be coarse).
		time.Sleep(20 * time.Millisecond)
		for k := 0; ; k++ { // reading frees the slot
			ex := r.execute()
			if ex.GetCallId() != "late" {
				continue
			}
			// Sent once the slot was free, after the Send before it began, and before
			// its own.
			after, before := starts.at(base+k), launched
			if k > 0 && starts.at(base+k-1).After(before) {
				before = starts.at(base + k - 1)
			}
			checkTimeout(t, ex, deadline, before, after)
			r.result(&toolsdv1.ExecuteResult{RequestId: ex.GetRequestId(), Content: []byte("ok")})
			awaitResult(t, call)
			return
		}
	})
}

// slotHeld starts a broker whose provider, on a fixed window, does not read, and calls
// it with executes larger than the window until one of them waits in Send
// holding the send slot (the stuckSend-th) and the rest wait for the slot. It returns
// the Sends' clock, the broker, the provider's stream and the count of Sends before the
// first execute's (the welcome's; one Send per message from there on).
func slotHeld(t *testing.T) (*sendStarts, *brokertest.Server, *rawStream, int) {
	t.Helper()
	starts := newSendStarts()
	srv := brokertest.Start(t, brokertest.NewRegistrar(), broker.WithLimits(broker.Limits{SendTimeout: time.Hour}), broker.WithSendClock(starts.clock))
	r := helloRawFixedWindow(t, srv, "slow")
	base := starts.count()
	for range 4 {
		goCall(t.Context(), srv.Broker, r.id, execFor("t", bigArgs))
	}
	starts.waitFor(t, base+stuckSend)
	return starts, srv, r, base
}

// stuckSend is the Send, counted from the first execute's, that cannot return until
// the test reads, when executes larger than the window go to a provider on
// [helloRawFixedWindow]: its stream's reader goroutine takes the first, the second
// fills the 64 KiB window and queues its rest against the stream's 64 KiB write quota
// (a Send returns once its message is queued), and the third waits for that quota. A
// test that needs a call to wait for the slot starts it once this Send has begun: the
// calls in flight before then reach the slot in any order, so counting them says
// nothing about which of them waits.
const stuckSend = 3

// sendStarts is a send clock that notes when each Send on its broker's streams begins
// (a stall check reads it too, every half send timeout).
type sendStarts struct {
	epoch time.Time
	mu    sync.Mutex
	times []time.Time
}

func newSendStarts() *sendStarts { return &sendStarts{epoch: time.Now()} }

func (s *sendStarts) clock() int64 {
	now := time.Now()
	s.mu.Lock()
	s.times = append(s.times, now)
	s.mu.Unlock()
	return int64(now.Sub(s.epoch)) + 1
}

func (s *sendStarts) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.times)
}

// at is when the i-th Send began.
func (s *sendStarts) at(i int) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.times[i]
}

// waitFor waits until n Sends have begun.
func (s *sendStarts) waitFor(tb testing.TB, n int) {
	tb.Helper()
	deadline := time.Now().Add(waitTimeout)
	for s.count() < n {
		if time.Now().After(deadline) {
			tb.Fatalf("%d Sends began, want %d", s.count(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// checkTimeout checks that ex carries deadline and, as its timeout, the time left until
// it at some moment between before and after.
func checkTimeout(tb testing.TB, ex *toolsdv1.ExecuteRequest, deadline, before, after time.Time) {
	tb.Helper()
	if got := ex.GetDeadline().AsTime(); !got.Equal(deadline) {
		tb.Errorf("execute deadline = %v, want %v", got, deadline)
	}
	if ex.GetTimeout() == nil {
		tb.Fatalf("execute timeout = nil, want the time left until %v", deadline)
	}
	got, most, least := ex.GetTimeout().AsDuration(), deadline.Sub(before), deadline.Sub(after)
	if got > most || got < least {
		tb.Errorf("execute timeout = %v, want between %v and %v (the time left when it was sent)", got, least, most)
	}
}
