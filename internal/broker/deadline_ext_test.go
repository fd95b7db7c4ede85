package broker_test

import (
	"context"
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
	srv := brokertest.Start(t, brokertest.NewRegistrar(), broker.WithLimits(broker.Limits{SendTimeout: time.Hour}))
	r := helloRawFixedWindow(t, srv, "slow")
	// Executes larger than the window: while the provider does not read, one of them
	// waits in Send holding the slot, and the rest wait for it.
	for range 4 {
		goCall(context.Background(), srv.Broker, r.id, execFor("t", bigArgs))
	}
	waitInFlight(t, srv.Broker, r.id, 4)
	passed := &atomic.Bool{}
	e := execFor("t", "{}")
	e.CallID = "late"
	call := goCall(tooltest.LateTimer{Context: t.Context(), Passed: passed}, srv.Broker, r.id, e)
	waitInFlight(t, srv.Broker, r.id, 5) // past its entry, waiting for the slot
	passed.Store(true)
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
