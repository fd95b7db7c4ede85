package broker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/broker"
	"github.com/toolsd/toolsd/internal/broker/brokertest"
	"github.com/toolsd/toolsd/internal/logtest"
	"github.com/toolsd/toolsd/internal/tool"
)

// TestReceiveLoopLinesEndWithAStuckStream: a stream whose send slot is held by an
// execute stuck in Send (the provider stopped reading) ends without its goodbye, and
// the receive loop, which the handler does not wait for, must still write nothing
// after the stream's end: a line about a message it read (here a result nobody asked
// for, its line slow to write) is written before the stream's calls fail and its
// handler returns, not when the broker, and the test that owns the logger, may be gone.
func TestReceiveLoopLinesEndWithAStuckStream(t *testing.T) {
	const stray = "dropped result for a request id never issued"
	observed, logs := observer.New(zap.InfoLevel)
	writing := make(chan struct{}, 1)
	// Slower to write than the stall takes to be noticed (SendTimeout) plus the
	// teardown's wait for the stuck send (a second).
	core := logtest.SlowLineCore{Core: observed, Msg: stray, Delay: 2 * time.Second, Writing: writing}
	srv := brokertest.Start(t, brokertest.NewRegistrar(), broker.WithLogger(zap.New(core)),
		broker.WithLimits(broker.Limits{SendTimeout: 200 * time.Millisecond}))
	raw := helloRawFixedWindow(t, srv, "deaf") // from here on it reads nothing
	raw.result(&toolsdv1.ExecuteResult{RequestId: 1 << 60, Content: []byte("unasked")})
	select {
	case <-writing: // the loop is in the middle of the stray result
	case <-time.After(waitTimeout):
		t.Fatal("the stray result was never logged")
	}
	// Executes larger than the window: one of them waits in Send, holding the slot,
	// until the stream is cut off as stuck.
	var calls []<-chan tool.Result
	for range 4 {
		calls = append(calls, goCall(context.Background(), srv.Broker, raw.id, execFor("t", bigArgs)))
	}
	for _, ch := range calls {
		awaitResult(t, ch) // the stream's calls fail in its teardown
	}
	if n := logs.FilterMessage(stray).Len(); n != 1 {
		t.Errorf("%d lines for the stray result when the stream had ended, want 1", n)
	}
	if n := logs.FilterMessage("provider stream send blocked; closing without goodbye").Len(); n != 1 {
		t.Errorf("%d lines saying the send was blocked at teardown, want 1 (else the test proves nothing)", n)
	}
}

// TestHelloNameIsLoggedBounded: a provider's name and version are its own choice and
// only bounded by the message limit; the "provider connected" line quotes them cut, so
// a provider reconnecting in a loop cannot write megabytes of log per connection.
func TestHelloNameIsLoggedBounded(t *testing.T) {
	observed, logs := observer.New(zap.InfoLevel)
	srv := brokertest.Start(t, brokertest.NewRegistrar(), broker.WithLogger(zap.New(observed)))
	r := openRaw(t, srv)
	big := strings.Repeat("n", 1<<20)
	r.send(&toolsdv1.ProviderServiceConnectRequest{Msg: &toolsdv1.ProviderServiceConnectRequest_Hello{
		Hello: &toolsdv1.ProviderHello{Name: big, Version: big},
	}})
	if w := r.next().GetWelcome(); w == nil {
		t.Fatal("no welcome for a provider with a 1 MiB name")
	}
	// The line follows the welcome's send: wait for it.
	lines := logs.FilterMessage("provider connected").All()
	for deadline := time.Now().Add(brokertest.WaitTimeout); len(lines) == 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
		lines = logs.FilterMessage("provider connected").All()
	}
	if len(lines) != 1 {
		t.Fatalf("%d \"provider connected\" lines, want 1", len(lines))
	}
	for _, key := range []string{"provider", "version"} {
		if v, _ := lines[0].ContextMap()[key].(string); len(v) > 256 || !strings.HasPrefix(v, "nnnn") {
			t.Errorf("%s logged as %d bytes, want its start, at most 256", key, len(v))
		}
	}
}

// TestInvalidResultLineCutsTheCallID: a call id is the model's (only the request size
// bounds it); the "invalid result" warning quotes it cut, so a batch of calls with
// megabyte ids whose provider answers invalidly cannot write megabytes of log per call.
func TestInvalidResultLineCutsTheCallID(t *testing.T) {
	observed, logs := observer.New(zap.InfoLevel)
	srv := brokertest.Start(t, brokertest.NewRegistrar(), broker.WithLogger(zap.New(observed)))
	raw := helloRaw(t, srv, "p", 0)
	e := execFor("t", `{}`)
	e.CallID = strings.Repeat("c", 1<<20)
	ch := goCall(context.Background(), srv.Broker, raw.id, e)
	raw.result(&toolsdv1.ExecuteResult{RequestId: raw.execute().GetRequestId(), OversizedBytes: 1 << 30})
	if r := awaitResult(t, ch); r.Code() != tool.CodeResultTooLarge {
		t.Fatalf("Call() code = %s, want %s", r.Code(), tool.CodeResultTooLarge)
	}
	lines := logs.FilterMessage("invalid result").All()
	if len(lines) != 1 {
		t.Fatalf("%d \"invalid result\" lines, want 1", len(lines))
	}
	if id, _ := lines[0].ContextMap()["call_id"].(string); len(id) > 256 || !strings.HasPrefix(id, "cccc") {
		t.Errorf("call_id logged as %d bytes, want its start, at most 256", len(id))
	}
}

// TestRejectedToolNameIsLoggedBounded: a refused tool's name is the provider's, of any
// size its message may have (a name that long is refused for its length); the "tool
// registration rejected" line quotes it cut, as it does the scope, so a provider
// registering megabyte names cannot write megabytes of log per tool.
func TestRejectedToolNameIsLoggedBounded(t *testing.T) {
	observed, logs := observer.New(zap.InfoLevel)
	srv := brokertest.Start(t, brokertest.NewRegistrar(), broker.WithLogger(zap.New(observed)))
	r := helloRaw(t, srv, "raw", 0)
	def := toolDef(strings.Repeat("n", 1<<20))
	def.MaxContentBytes = -1 // refused by the broker itself
	r.send(registerMsg(1, "", def))
	if sts := r.next().GetRegisterResult().GetTools(); len(sts) != 1 || sts[0].GetErrorCode() == "" {
		t.Fatalf("register statuses = %v, want one refusal", sts)
	}
	lines := logs.FilterMessage("tool registration rejected").All()
	if len(lines) != 1 {
		t.Fatalf("%d \"tool registration rejected\" lines, want 1", len(lines))
	}
	if v, _ := lines[0].ContextMap()["tool"].(string); len(v) > 256 || !strings.HasPrefix(v, "nnnn") {
		t.Errorf("tool logged as %d bytes, want its start, at most 256", len(v))
	}
}

// TestRejectedRegistrationsLogBounded: a provider whose registrations are refused
// writes a bounded number of info lines about them, the rest at debug: an empty
// definition is two bytes on the wire and its line hundreds, and a provider may send
// register messages without end. Every tool still gets its refusal.
func TestRejectedRegistrationsLogBounded(t *testing.T) {
	observed, logs := observer.New(zap.DebugLevel)
	srv := brokertest.Start(t, brokertest.NewRegistrar(), broker.WithLogger(zap.New(observed)))
	r := helloRaw(t, srv, "raw", 0)
	defs := make([]*toolsdv1.ToolDefinition, 50)
	for i := range defs {
		defs[i] = &toolsdv1.ToolDefinition{Name: "t", MaxContentBytes: -1} // refused by the broker itself
	}
	for ref := range uint64(2) {
		r.send(registerMsg(ref+1, "", defs...))
		sts := r.next().GetRegisterResult().GetTools()
		if len(sts) != len(defs) || sts[len(sts)-1].GetErrorCode() == "" {
			t.Fatalf("register statuses = %v, want %d refusals", sts, len(defs))
		}
	}
	rejected := logs.FilterMessage("tool registration rejected")
	if n := rejected.Filter(func(e observer.LoggedEntry) bool { return e.Level == zap.InfoLevel }).Len(); n != 10 {
		t.Errorf("%d info lines for 100 rejected registrations, want the first 10", n)
	}
	if n := rejected.Filter(func(e observer.LoggedEntry) bool { return e.Level == zap.DebugLevel }).Len(); n != 90 {
		t.Errorf("%d debug lines for 100 rejected registrations, want the 90 after the first 10", n)
	}
	if n := logs.FilterMessage("further rejected registrations on this stream are logged at debug").Len(); n != 1 {
		t.Errorf("%d notes that further rejections go to debug, want 1", n)
	}
}
