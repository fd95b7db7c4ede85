package broker_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/broker"
	"github.com/toolsd/toolsd/internal/broker/brokertest"
	"github.com/toolsd/toolsd/internal/rpcerr"
	"github.com/toolsd/toolsd/internal/tool"
	"github.com/toolsd/toolsd/pkg/provider"
)

// bigArgs is larger than a stream's default 64 KiB flow-control window, so a provider
// that does not read stops the second such execute inside Send.
var bigArgs = `{"a":"` + strings.Repeat("x", 200<<10) + `"}`

// frozen is a send clock that never moves: no Send counts as waiting too long, however
// long a test's provider leaves it waiting in real time. The tests that run with it and
// a send timeout of a millisecond (checked every millisecond of real time) would be cut
// off by the send timeout if real time counted.
func frozen() int64 { return 1 }

// A provider that stops reading its stream holds an execute in Send. Past the send
// timeout the stream ends as hung: every call returns PROVIDER_GONE (or PROVIDER_UNAVAILABLE, for one
// that comes after the stream ended), none waits forever.
func TestProviderThatStopsReadingIsCutOff(t *testing.T) {
	srv := brokertest.Start(t, brokertest.NewRegistrar(), broker.WithLimits(broker.Limits{SendTimeout: 200 * time.Millisecond}))
	raw := helloRawFixedWindow(t, srv, "deaf") // from here on it reads nothing
	var calls []<-chan tool.Result
	for range 4 {
		calls = append(calls, goCall(context.Background(), srv.Broker, raw.id, execFor("t", bigArgs)))
	}
	gone := 0
	for i, ch := range calls {
		// A call that reaches the broker after the stream ended finds no provider.
		switch r := awaitResult(t, ch); r.Code() {
		case tool.CodeProviderGone:
			gone++
		case tool.CodeProviderUnavailable:
		default:
			t.Errorf("call %d = %+v, want PROVIDER_GONE", i, r)
		}
	}
	if gone == 0 {
		t.Error("no call was in flight when the stream ended")
	}
	err := raw.end()
	if st := status.Convert(err); st.Code() != codes.Unavailable || !hasReason(st, rpcerr.SlowClient) || !strings.Contains(err.Error(), "stopped reading") {
		t.Errorf("stream ended with %v, want Unavailable with reason %s saying the provider stopped reading", err, rpcerr.SlowClient)
	}
}

// The receive loop answers registrations without waiting for the send slot: while an
// execute is stuck in Send (the provider busy elsewhere, not reading), a registration
// and then a result arrive, and the result still reaches its call. A loop that waited
// for the slot would hold the result until the provider read again, and a provider
// whose own receive loop was writing at that moment would never read again.
func TestReceiveLoopDoesNotWaitForTheSendSlot(t *testing.T) {
	srv := brokertest.Start(t, brokertest.NewRegistrar(), broker.WithLimits(broker.Limits{SendTimeout: time.Millisecond}), broker.WithSendClock(frozen))
	raw := helloRawFixedWindow(t, srv, "busy")
	first := goCall(context.Background(), srv.Broker, raw.id, execFor("t", `{}`))
	id := raw.execute().GetRequestId()
	// Executes larger than the window and the send quota: one of them waits in Send,
	// holding the slot.
	for range 4 {
		goCall(context.Background(), srv.Broker, raw.id, execFor("t", bigArgs))
	}
	time.Sleep(200 * time.Millisecond) // not needed to pass; without it the test may not fail on a loop that waits
	raw.send(&toolsdv1.ProviderServiceConnectRequest{Msg: &toolsdv1.ProviderServiceConnectRequest_Register{
		Register: &toolsdv1.RegisterTools{Ref: 7, Scope: "agent/a", Tools: []*toolsdv1.ToolDefinition{
			{Name: "late", ParametersJson: `{"type":"object"}`},
		}},
	}})
	raw.result(&toolsdv1.ExecuteResult{RequestId: id, Content: []byte("done")})
	if r := awaitResult(t, first); r.IsError || r.Content != "done" {
		t.Errorf("first call = %+v, want its result", r)
	}
	// Reading again lets the executes and the queued registration answer through.
	var answered bool
	for range 8 {
		m := raw.next()
		if rr := m.GetRegisterResult(); rr != nil {
			answered = rr.GetRef() == 7 && rr.GetTools()[0].GetErrorCode() == ""
			break
		}
	}
	if !answered {
		t.Error("the registration was not answered once the provider read again")
	}
}

// The SDK sends a result larger than the welcome's max_result_bytes as its size only: a
// result too large for the stream's receive limit (4 MiB here) fails its own call with
// RESULT_TOO_LARGE, and another call in flight on the same stream still gets its result.
func TestSDKOversizedResultFailsOnlyItsCall(t *testing.T) {
	srv := brokertest.Start(t, brokertest.NewRegistrar(), broker.WithLimits(broker.Limits{MaxResultBytes: 64 << 10}))
	huge := strings.Repeat("z", 5<<20)
	release := make(chan struct{})
	p := runSDK(t, srv,
		provider.NewTool("huge", "", func(context.Context, provider.Call, struct{}) (string, error) { return huge, nil }),
		provider.NewTool("wait", "", func(context.Context, provider.Call, struct{}) (string, error) {
			<-release
			return "done", nil
		}))
	waiting := goCall(t.Context(), srv.Broker, p.ProviderID(), execFor("wait", `{}`))
	r := awaitResult(t, goCall(t.Context(), srv.Broker, p.ProviderID(), execFor("huge", `{}`)))
	if r.Code() != tool.CodeResultTooLarge || !strings.Contains(r.Content, "5242880 bytes") {
		t.Errorf("huge result = %+v, want RESULT_TOO_LARGE naming its size", r)
	}
	close(release)
	if r := awaitResult(t, waiting); r.IsError || r.Content != "done" {
		t.Errorf("the other call = %+v, want its result", r)
	}
}

// A provider that keeps registering without reading leaves queued answers, not a
// goroutine each, and once too many wait its stream ends.
func TestRegistrationFloodIsBounded(t *testing.T) {
	srv := brokertest.Start(t, brokertest.NewRegistrar(), broker.WithLimits(broker.Limits{SendTimeout: time.Millisecond}), broker.WithSendClock(frozen))
	raw := helloRawFixedWindow(t, srv, "flood")
	for range 4 { // an execute stuck in Send holds the slot
		goCall(context.Background(), srv.Broker, raw.id, execFor("t", bigArgs))
	}
	time.Sleep(200 * time.Millisecond) // not needed to pass
	register := func(ref int) {
		raw.send(&toolsdv1.ProviderServiceConnectRequest{Msg: &toolsdv1.ProviderServiceConnectRequest_Register{
			Register: &toolsdv1.RegisterTools{Ref: uint64(ref), Scope: "agent/a", Tools: []*toolsdv1.ToolDefinition{
				{Name: fmt.Sprint("t", ref), ParametersJson: `{"type":"object"}`},
			}},
		}})
	}
	before := runtime.NumGoroutine()
	for i := range 2000 {
		register(i + 1)
	}
	srv.Registrar.WaitFor(t, "2000 registrations", func() bool { return srv.Registrar.Registrations() == 2000 })
	if d := runtime.NumGoroutine() - before; d > 20 {
		t.Errorf("2000 registrations left %d more goroutines, want a handful", d)
	}
	for i := range 3000 {
		register(2001 + i)
	}
	// Read only once the stream has ended (its tools are removed): reading would let
	// the queue drain.
	srv.Registrar.WaitFor(t, "the stream to end", func() bool { return slices.Contains(srv.Registrar.Removed(), raw.id) })
	err := raw.end()
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "messages wait to be sent") {
		t.Errorf("stream ended with %v, want Unavailable naming the queued messages", err)
	}
}

// TestCallCancelledBeforeItsSendIsNotDispatched: a call whose context has ended before
// its execute reached the provider's stream never ran: its result says so
// (ABORTED_BEFORE_DISPATCH), not ABORTED, which would leave open whether the tool ran.
// (A call that gives up waiting for the send slot takes the same path, notSent.)
func TestCallCancelledBeforeItsSendIsNotDispatched(t *testing.T) {
	srv := brokertest.Start(t, brokertest.NewRegistrar())
	raw := helloRawFixedWindow(t, srv, "p")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if r := awaitResult(t, goCall(ctx, srv.Broker, raw.id, execFor("t", `{}`))); r.Code() != tool.CodeAbortedBeforeDispatch {
		t.Errorf("Call() cancelled before its send = %+v, want ABORTED_BEFORE_DISPATCH", r)
	}
}

// A registration answer echoes its tools' names, so a provider that sends large
// registrations without reading leaves large answers queued: once they add up to more
// than the queue holds in bytes, its stream ends, long before 4096 of them (gigabytes)
// would.
func TestLargeQueuedAnswersAreBounded(t *testing.T) {
	srv := brokertest.Start(t, brokertest.NewRegistrar(), broker.WithLimits(broker.Limits{SendTimeout: time.Millisecond}), broker.WithSendClock(frozen))
	raw := helloRawFixedWindow(t, srv, "flood")
	for range 4 { // an execute stuck in Send holds the slot
		goCall(context.Background(), srv.Broker, raw.id, execFor("t", bigArgs))
	}
	name := strings.Repeat("n", 1<<20)
	// Sent from a goroutine of its own: once the stream has ended, a Send may wait until
	// the end is read (behind the executes the provider does not read).
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		for i := range 100 { // 100 MiB of names, answered twice over (name and NOT_FOUND message)
			if raw.stream.Send(unregisterMsg(uint64(i+1), "agent/a", name)) != nil {
				return // the stream ended
			}
		}
	}()
	srv.Registrar.WaitFor(t, "the stream to end", func() bool { return slices.Contains(srv.Registrar.Removed(), raw.id) })
	err := raw.end()
	<-sent
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "wait to be sent") {
		t.Errorf("stream ended with %v, want Unavailable naming what waits to be sent", err)
	}
}

// A provider may run max_in_flight_per_provider calls, and each may be cancelled: when
// all of them are, while the provider is busy (not reading for a moment), one cancel
// per call waits for the send slot. That is more than 4096 messages once the limit is
// above it, and the provider must not be cut off as not reading for toolsd's own
// cancels: once it reads again it gets every one, and its stream lives on.
func TestCancellingEveryCallOfALargeLimitKeepsTheStream(t *testing.T) {
	const n = 12000 // far more than the cancels the flow-control windows let through
	srv := brokertest.Start(t, brokertest.NewRegistrar(), broker.WithLimits(broker.Limits{
		MaxInFlightPerProvider: n, SendTimeout: time.Millisecond, CancelGrace: -1,
	}), broker.WithSendClock(frozen))
	raw := helloRawFixedWindow(t, srv, "busy")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	results := make(chan tool.Result, n)
	for range n {
		go func() { results <- srv.Broker.Call(ctx, raw.id, execFor("t", `{}`), 1) }()
	}
	for range n {
		raw.execute()
	}
	// The provider reads nothing more until every call but one has given up, each
	// leaving its cancel to be sent; the one left holds the send slot, its cancel (or
	// another's) stuck in Send until the provider reads.
	cancel()
	for i := range n - 1 {
		if r := awaitResult(t, results); r.Code() != tool.CodeAborted {
			t.Fatalf("result %d = %+v, want ABORTED", i, r)
		}
	}
	for i := range n {
		if m := raw.next(); m.GetCancel() == nil {
			t.Fatalf("server message %d = %v, want cancel", i, m)
		}
	}
	if r := awaitResult(t, results); r.Code() != tool.CodeAborted {
		t.Fatalf("the last call = %+v, want ABORTED", r)
	}
	later := goCall(t.Context(), srv.Broker, raw.id, execFor("t", `{}`))
	raw.result(&toolsdv1.ExecuteResult{RequestId: raw.execute().GetRequestId(), Content: []byte("done")})
	if r := awaitResult(t, later); r.IsError || r.Content != "done" {
		t.Errorf("a later call = %+v, want its result", r)
	}
}
