package broker_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/broker"
	"github.com/toolsd/toolsd/internal/broker/brokertest"
	"github.com/toolsd/toolsd/internal/tool"
	"github.com/toolsd/toolsd/pkg/provider"
)

type greetArgs struct {
	Name  string `json:"name"`
	Times int    `json:"times"`
}

type point struct {
	X int `json:"x"`
	Y int `json:"y"`
}

func TestCallRoundTripWithSDK(t *testing.T) {
	srv := brokertest.Start(t, brokertest.NewRegistrar(), broker.WithLogger(zaptest.NewLogger(t)))
	p := runSDK(t, srv,
		provider.NewTool("greet", "greets", func(_ context.Context, _ provider.Call, a greetArgs) (string, error) {
			return strings.Repeat("hi "+a.Name+";", a.Times), nil
		}),
		provider.NewTool("point", "a struct value", func(context.Context, provider.Call, struct{}) (point, error) {
			return point{X: 1, Y: 2}, nil
		}),
		provider.NewTool("quote", "a JSON string value", func(context.Context, provider.Call, struct{}) (json.RawMessage, error) {
			return json.RawMessage(`"quoted <text>"`), nil
		}),
		provider.NewTool("boom", "fails", func(context.Context, provider.Call, struct{}) (string, error) {
			return "", errors.New("disk on fire")
		}),
		provider.NewTool("meta", "full result", func(context.Context, provider.Call, struct{}) (provider.Result, error) {
			return provider.Result{Content: "done", Value: map[string]int{"n": 1}, Meta: map[string]string{"k": "v"}, ConcludesTurn: true}, nil
		}),
	)
	for name, tc := range map[string]struct {
		tool, args string
		want       tool.Result
	}{
		"typed args, string result": {tool: "greet", args: `{"name":"bo","times":2}`, want: tool.Result{Content: "hi bo;hi bo;"}},
		"struct value": {tool: "point", args: `{}`,
			want: tool.Result{Content: `{"x":1,"y":2}`, Value: json.RawMessage(`{"x":1,"y":2}`)}},
		"string value": {tool: "quote", args: `{}`,
			want: tool.Result{Content: "quoted <text>", Value: json.RawMessage(`"quoted <text>"`)}},
		"error result": {tool: "boom", args: `{}`, want: tool.Failure(tool.CodeToolError, "disk on fire")},
		"undecodable args": {tool: "greet", args: `{"times":"many"}`,
			want: tool.Failure(tool.CodeInvalidArguments, "invalid arguments: json: cannot unmarshal string into Go struct field greetArgs.times of type int")},
		"full result": {tool: "meta", args: `{}`, want: tool.Result{
			Content: "done", Value: json.RawMessage(`{"n":1}`), Meta: json.RawMessage(`{"k":"v"}`), ConcludesTurn: true,
		}},
		"unknown tool": {tool: "nope", args: `{}`, want: tool.Failure(tool.CodeToolError, `provider "sdk-test" has no tool "nope"`)},
	} {
		t.Run(name, func(t *testing.T) {
			got := srv.Broker.Call(t.Context(), p.ProviderID(), execFor(tc.tool, tc.args), 1)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Call(%s, %s) mismatch (-want +got):\n%s", tc.tool, tc.args, diff)
			}
		})
	}
}

func TestProgressIsForwarded(t *testing.T) {
	srv := brokertest.Start(t, brokertest.NewRegistrar())
	p := runSDK(t, srv, provider.NewTool("work", "reports progress",
		func(_ context.Context, call provider.Call, _ struct{}) (string, error) {
			call.Progress("half", 1, 2)
			call.Progress("all", 2, 2)
			return "ok", nil
		}))
	var (
		mu  sync.Mutex
		got []tool.Progress
	)
	e := execFor("work", "{}")
	e.Progress = func(pr tool.Progress) { mu.Lock(); got = append(got, pr); mu.Unlock() }
	if res := srv.Broker.Call(t.Context(), p.ProviderID(), e, 1); res.IsError {
		t.Fatalf("Call() = %+v, want success", res)
	}
	want := []tool.Progress{
		{CallID: "call-1", Index: 2, Message: "half", Progress: 1, Total: 2},
		{CallID: "call-1", Index: 2, Message: "all", Progress: 2, Total: 2},
	}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("progress mismatch (-want +got):\n%s", diff)
	}
}

func TestCancellationReachesTheHandler(t *testing.T) {
	srv := brokertest.Start(t, brokertest.NewRegistrar())
	started, observed := make(chan struct{}), make(chan error, 1)
	p := runSDK(t, srv, provider.NewTool("wait", "waits for cancellation",
		func(ctx context.Context, _ provider.Call, _ struct{}) (string, error) {
			close(started)
			<-ctx.Done()
			observed <- ctx.Err()
			return "too late", nil
		}))
	ctx, cancel := context.WithCancel(t.Context())
	call := goCall(ctx, srv.Broker, p.ProviderID(), execFor("wait", "{}"))
	<-started
	cancel()
	if res := awaitResult(t, call); res.Code() != tool.CodeAborted || res.Err.Message != "call was cancelled" {
		t.Errorf("Call() = %+v, want ABORTED: call was cancelled", res)
	}
	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	select {
	case err := <-observed:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("handler ctx.Err() = %v, want context.Canceled", err)
		}
	case <-timer.C:
		t.Fatal("the handler never saw its context end")
	}
	if n := srv.Broker.Providers()[0].InFlight; n != 0 {
		t.Errorf("InFlight = %d after cancellation, want 0", n)
	}
}

func TestExecuteAndCancelMessages(t *testing.T) {
	srv := brokertest.Start(t, brokertest.NewRegistrar())
	r := helloRaw(t, srv, "raw", 0)
	deadline := time.Now().Add(time.Hour)
	ctx, cancel := context.WithDeadline(t.Context(), deadline)
	call := goCall(ctx, srv.Broker, r.id, execFor("t", `{"a":1}`))
	ex := r.execute()
	want := &toolsdv1.ExecuteRequest{
		RequestId: ex.GetRequestId(), CallId: "call-1", SessionId: "s-1", Scope: "agent/a", Tool: "t",
		ArgumentsJson: `{"a":1}`, Deadline: ex.GetDeadline(), Timeout: ex.GetTimeout(), Turn: 3, Step: 4, Attempt: 1,
	}
	if !cmp.Equal(want, ex, cmpProto) {
		t.Errorf("execute = %v, want %v", ex, want)
	}
	if got := ex.GetDeadline().AsTime(); !got.Equal(deadline) {
		t.Errorf("execute deadline = %v, want %v", got, deadline)
	}
	cancel()
	c := r.next().GetCancel()
	if c.GetRequestId() != ex.GetRequestId() || c.GetReason() == "" {
		t.Errorf("cancel = %v, want request_id %d with a reason", c, ex.GetRequestId())
	}
	if res := awaitResult(t, call); res.Code() != tool.CodeAborted {
		t.Errorf("Call() code = %q, want ABORTED", res.Code())
	}
}

func TestProviderGoneMidCall(t *testing.T) {
	reg := brokertest.NewRegistrar()
	srv := brokertest.Start(t, reg)
	r := helloRaw(t, srv, "raw", 0)
	call := goCall(t.Context(), srv.Broker, r.id, execFor("t", "{}"))
	r.execute()
	r.cancel() // the provider process dies
	res := awaitResult(t, call)
	if diff := cmp.Diff(tool.Failure(tool.CodeProviderGone, "provider disconnected while the call was running"), res); diff != "" {
		t.Errorf("Call() mismatch (-want +got):\n%s", diff)
	}
	reg.WaitFor(t, "RemoveOwner", func() bool { return len(reg.Removed()) == 1 })
	if got := srv.Broker.Call(t.Context(), r.id, execFor("t", "{}"), 1); got.Code() != tool.CodeProviderUnavailable {
		t.Errorf("Call() after disconnect code = %q, want PROVIDER_UNAVAILABLE", got.Code())
	}
}

func TestSDKProviderKilledMidCall(t *testing.T) {
	reg := brokertest.NewRegistrar()
	srv := brokertest.Start(t, reg)
	started := make(chan struct{})
	p := provider.New("killed", provider.WithLogger(zaptest.NewLogger(t)))
	p.Add(provider.NewTool("hang", "hangs", func(ctx context.Context, _ provider.Call, _ struct{}) (string, error) {
		close(started)
		<-ctx.Done()
		return "", ctx.Err()
	}))
	conn := srv.Dial(t)
	ctx, kill := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx, conn) }()
	<-p.Ready()
	id := p.ProviderID()
	call := goCall(t.Context(), srv.Broker, id, execFor("hang", "{}"))
	<-started
	kill()
	if res := awaitResult(t, call); res.Code() != tool.CodeProviderGone {
		t.Errorf("Call() code = %q, want PROVIDER_GONE", res.Code())
	}
	if err := <-done; err != nil {
		t.Errorf("Serve() = %v, want nil after its context ended", err)
	}
	reg.WaitFor(t, "RemoveOwner", func() bool { return len(reg.Removed()) == 1 && reg.Removed()[0] == id })
}

func TestInvalidResultsFailOnlyTheirCall(t *testing.T) {
	obs := newRecorder()
	srv := brokertest.Start(t, brokertest.NewRegistrar(), broker.WithObserver(obs),
		broker.WithLimits(broker.Limits{MaxResultBytes: 16}), broker.WithLogger(zaptest.NewLogger(t)))
	r := helloRaw(t, srv, "raw", 0)
	for name, tc := range map[string]struct {
		res  *toolsdv1.ExecuteResult
		code tool.Code
	}{
		"content not UTF-8":       {res: &toolsdv1.ExecuteResult{Content: []byte("bad \xff")}, code: tool.CodeInvalidResult},
		"error message not UTF-8": {res: &toolsdv1.ExecuteResult{IsError: true, ErrorMessage: []byte("\xc3\x28")}, code: tool.CodeInvalidResult},
		"value not JSON":          {res: &toolsdv1.ExecuteResult{ValueJson: []byte("{nope")}, code: tool.CodeInvalidResult},
		"too large":               {res: &toolsdv1.ExecuteResult{Content: []byte("twelve bytes"), MetaJson: []byte(`{"k":"v"}`)}, code: tool.CodeResultTooLarge},
		"kept back for its size":  {res: &toolsdv1.ExecuteResult{OversizedBytes: 1}, code: tool.CodeResultTooLarge},
	} {
		t.Run(name, func(t *testing.T) {
			before := obs.get("invalid")
			call := goCall(t.Context(), srv.Broker, r.id, execFor("t", "{}"))
			tc.res.RequestId = r.execute().GetRequestId()
			r.result(tc.res)
			if got := awaitResult(t, call); got.Code() != tc.code {
				t.Errorf("Call() = %+v, want code %s", got, tc.code)
			}
			if got := obs.get("invalid"); got != before+1 {
				t.Errorf("InvalidResult count = %d, want %d", got, before+1)
			}
			// The stream survives: the next call on it succeeds.
			next := goCall(t.Context(), srv.Broker, r.id, execFor("t", "{}"))
			r.result(&toolsdv1.ExecuteResult{RequestId: r.execute().GetRequestId(), Content: []byte("fine")})
			if got := awaitResult(t, next); got.IsError || got.Content != "fine" {
				t.Errorf("next Call() = %+v, want content fine", got)
			}
		})
	}
}

func TestStaleAndForeignResultsAreDropped(t *testing.T) {
	obs := newRecorder()
	srv := brokertest.Start(t, brokertest.NewRegistrar(), broker.WithObserver(obs), broker.WithLogger(zaptest.NewLogger(t)))
	a, b := helloRaw(t, srv, "a", 0), helloRaw(t, srv, "b", 0)

	// Never issued.
	a.result(&toolsdv1.ExecuteResult{RequestId: 1 << 60, Content: []byte("x")})
	a.result(&toolsdv1.ExecuteResult{RequestId: 0, Content: []byte("x")})
	obs.waitFor(t, "stale", 2)

	// Finished: a second answer to an answered call.
	first := goCall(t.Context(), srv.Broker, a.id, execFor("t", "{}"))
	id := a.execute().GetRequestId()
	a.result(&toolsdv1.ExecuteResult{RequestId: id, Content: []byte("one")})
	a.result(&toolsdv1.ExecuteResult{RequestId: id, Content: []byte("two")})
	if got := awaitResult(t, first); got.Content != "one" {
		t.Errorf("Call() content = %q, want one", got.Content)
	}
	obs.waitFor(t, "stale", 3)

	// Cancelled: the answer arrives after the caller gave up.
	ctx, cancel := context.WithCancel(t.Context())
	cancelled := goCall(ctx, srv.Broker, a.id, execFor("t", "{}"))
	id = a.execute().GetRequestId()
	cancel()
	awaitResult(t, cancelled)
	a.next() // the cancel message
	a.result(&toolsdv1.ExecuteResult{RequestId: id, Content: []byte("late")})
	obs.waitFor(t, "stale", 4)

	// Foreign: b answers a's pending call.
	pending := goCall(t.Context(), srv.Broker, a.id, execFor("t", "{}"))
	id = a.execute().GetRequestId()
	b.result(&toolsdv1.ExecuteResult{RequestId: id, Content: []byte("forged")})
	obs.waitFor(t, "stale", 5)
	if n := providerInfo(t, srv.Broker, a.id).InFlight; n != 1 {
		t.Errorf("a's InFlight = %d after a foreign result, want 1", n)
	}
	a.result(&toolsdv1.ExecuteResult{RequestId: id, Content: []byte("genuine")})
	if got := awaitResult(t, pending); got.Content != "genuine" {
		t.Errorf("Call() content = %q, want genuine", got.Content)
	}
}

// TestRequestIDsArePerStream checks that each provider stream numbers its own requests
// 1, 2, 3, … however the calls of two providers interleave (ids counted across streams
// would show each provider how many calls the others get), and that two calls holding
// the same id on different streams are each answered by their own provider only.
func TestRequestIDsArePerStream(t *testing.T) {
	obs := newRecorder()
	srv := brokertest.Start(t, brokertest.NewRegistrar(), broker.WithObserver(obs), broker.WithLogger(zaptest.NewLogger(t)))
	a, b := helloRaw(t, srv, "a", 0), helloRaw(t, srv, "b", 0)
	for want := uint64(1); want <= 3; want++ {
		onA := goCall(t.Context(), srv.Broker, a.id, execFor("t", "{}"))
		idA := a.execute().GetRequestId()
		onB := goCall(t.Context(), srv.Broker, b.id, execFor("t", "{}"))
		idB := b.execute().GetRequestId()
		if idA != want || idB != want {
			t.Fatalf("round %d: request ids a=%d b=%d, want %d on both streams", want, idA, idB, want)
		}
		b.result(&toolsdv1.ExecuteResult{RequestId: idB, Content: []byte("from b")})
		if got := awaitResult(t, onB); got.Content != "from b" {
			t.Errorf("round %d: Call(b) content = %q, want from b", want, got.Content)
		}
		a.result(&toolsdv1.ExecuteResult{RequestId: idA, Content: []byte("from a")})
		if got := awaitResult(t, onA); got.Content != "from a" {
			t.Errorf("round %d: Call(a) content = %q, want from a", want, got.Content)
		}
	}
	if n := obs.get("stale"); n != 0 {
		t.Errorf("stale results = %d, want 0", n)
	}
	// An id past the stream's last one was never issued on it.
	b.result(&toolsdv1.ExecuteResult{RequestId: 4, Content: []byte("guess")})
	obs.waitFor(t, "stale", 1)
}

// TestStrayMessagesLogBounded checks that a provider sending stray messages writes a
// bounded number of warnings while the metrics count every one.
func TestStrayMessagesLogBounded(t *testing.T) {
	obs := newRecorder()
	core, logs := observer.New(zap.DebugLevel)
	srv := brokertest.Start(t, brokertest.NewRegistrar(), broker.WithObserver(obs), broker.WithLogger(zap.New(core)))
	a := helloRaw(t, srv, "a", 0)
	for i := range 50 {
		a.result(&toolsdv1.ExecuteResult{RequestId: 1<<60 + uint64(i)})
		a.send(&toolsdv1.ProviderServiceConnectRequest{})
	}
	obs.waitFor(t, "stale", 50)
	obs.waitFor(t, "malformed", 50)
	stray := logs.FilterMessage("dropped result for a request id never issued").Len() + logs.FilterMessage("ignored provider message").Len()
	if stray != 10 {
		t.Errorf("%d warnings for 100 stray messages, want the first 10", stray)
	}
	if n := logs.FilterMessage("further stray messages on this stream are not logged").Len(); n != 1 {
		t.Errorf("%d notes that further strays go unlogged, want 1", n)
	}
}

func TestCallRejections(t *testing.T) {
	obs := newRecorder()
	srv := brokertest.Start(t, brokertest.NewRegistrar(), broker.WithObserver(obs),
		broker.WithLimits(broker.Limits{MaxInFlightPerProvider: 2}))
	if got := srv.Broker.Call(t.Context(), "p-unknown", execFor("t", "{}"), 1); got.Code() != tool.CodeProviderUnavailable {
		t.Errorf("Call(unknown provider) code = %q, want PROVIDER_UNAVAILABLE", got.Code())
	}
	for name, tc := range map[string]struct{ hello, limit int }{
		"hello's limit":  {hello: 1, limit: 1},
		"broker's limit": {hello: 0, limit: 2},
	} {
		t.Run(name, func(t *testing.T) {
			r := helloRaw(t, srv, name, uint32(tc.hello))
			var calls []<-chan tool.Result
			var ids []uint64
			for range tc.limit {
				calls = append(calls, goCall(t.Context(), srv.Broker, r.id, execFor("t", "{}")))
				ids = append(ids, r.execute().GetRequestId())
			}
			before := obs.get("rejected:PROVIDER_OVERLOADED")
			if got := srv.Broker.Call(t.Context(), r.id, execFor("t", "{}"), 1); got.Code() != tool.CodeProviderOverloaded {
				t.Errorf("Call() over the limit code = %q, want PROVIDER_OVERLOADED", got.Code())
			}
			if got := obs.get("rejected:PROVIDER_OVERLOADED"); got != before+1 {
				t.Errorf("rejections = %d, want %d", got, before+1)
			}
			for i, id := range ids {
				r.result(&toolsdv1.ExecuteResult{RequestId: id, Content: []byte("ok")})
				if got := awaitResult(t, calls[i]); got.Content != "ok" {
					t.Errorf("Call() = %+v, want ok", got)
				}
			}
			// Capacity is back.
			again := goCall(t.Context(), srv.Broker, r.id, execFor("t", "{}"))
			r.result(&toolsdv1.ExecuteResult{RequestId: r.execute().GetRequestId(), Content: []byte("ok")})
			if got := awaitResult(t, again); got.Content != "ok" {
				t.Errorf("Call() after draining = %+v, want ok", got)
			}
		})
	}
}

func TestInvalidArgumentsNeverReachTheStream(t *testing.T) {
	srv := brokertest.Start(t, brokertest.NewRegistrar())
	r := helloRaw(t, srv, "raw", 0)
	if got := srv.Broker.Call(t.Context(), r.id, execFor("t", "{\"a\":\"\xff\"}"), 1); got.Code() != tool.CodeInvalidArguments {
		t.Errorf("Call(invalid UTF-8 arguments) code = %q, want INVALID_ARGUMENTS", got.Code())
	}
	e := execFor("t\xff", "{}")
	e.CallID = "c\xfe"
	call := goCall(t.Context(), srv.Broker, r.id, e)
	ex := r.execute()
	if ex.GetTool() != "t\uFFFD" || ex.GetCallId() != "c\uFFFD" {
		t.Errorf("execute tool, call_id = %q, %q; want invalid bytes replaced", ex.GetTool(), ex.GetCallId())
	}
	r.result(&toolsdv1.ExecuteResult{RequestId: ex.GetRequestId(), Content: []byte("ok")})
	if got := awaitResult(t, call); got.Content != "ok" {
		t.Errorf("Call() = %+v, want ok", got)
	}
}

func TestProgressSanitized(t *testing.T) {
	srv := brokertest.Start(t, brokertest.NewRegistrar())
	r := helloRaw(t, srv, "raw", 0)
	got := make(chan tool.Progress, 1)
	e := execFor("t", "{}")
	e.Progress = func(p tool.Progress) { got <- p }
	call := goCall(t.Context(), srv.Broker, r.id, e)
	id := r.execute().GetRequestId()
	r.send(&toolsdv1.ProviderServiceConnectRequest{Msg: &toolsdv1.ProviderServiceConnectRequest_Progress{
		Progress: &toolsdv1.ExecuteProgress{RequestId: id, Message: []byte("50\xff%"), Progress: 0.5, Total: 1},
	}})
	pr := <-got
	if pr.Message != "50\uFFFD%" || pr.Progress != 0.5 || pr.Total != 1 {
		t.Errorf("progress = %+v, want message 50\uFFFD%% at 0.5 of 1", pr)
	}
	r.result(&toolsdv1.ExecuteResult{RequestId: id})
	awaitResult(t, call)
}

// TestProgressIsCutAfterItsRepair: a progress message is forwarded at most
// MaxProgressBytes long, and valid UTF-8, even when its text is not UTF-8: each run of
// bad bytes becomes a three-byte U+FFFD, so a message cut to the limit and then
// repaired could be twice as long as the limit.
func TestProgressIsCutAfterItsRepair(t *testing.T) {
	srv := brokertest.Start(t, brokertest.NewRegistrar())
	r := helloRaw(t, srv, "raw", 0)
	got := make(chan tool.Progress, 2)
	e := execFor("t", "{}")
	e.Progress = func(p tool.Progress) { got <- p }
	call := goCall(t.Context(), srv.Broker, r.id, e)
	id := r.execute().GetRequestId()
	for _, msg := range [][]byte{
		[]byte(strings.Repeat("\xffa", broker.MaxProgressBytes)), // every other byte bad
		[]byte(strings.Repeat("é", broker.MaxProgressBytes)),     // valid: cut at a character
	} {
		r.send(&toolsdv1.ProviderServiceConnectRequest{Msg: &toolsdv1.ProviderServiceConnectRequest_Progress{
			Progress: &toolsdv1.ExecuteProgress{RequestId: id, Message: msg},
		}})
		pr := <-got
		if n := len(pr.Message); n > broker.MaxProgressBytes || n < broker.MaxProgressBytes-3 {
			t.Errorf("progress of %d bytes forwarded as %d bytes, want at most MaxProgressBytes (%d), and no fewer than 3 below it",
				len(msg), n, broker.MaxProgressBytes)
		}
		if !utf8.ValidString(pr.Message) {
			t.Errorf("progress forwarded as %q…, not valid UTF-8", pr.Message[:16])
		}
	}
	r.result(&toolsdv1.ExecuteResult{RequestId: id})
	awaitResult(t, call)
}

func providerInfo(tb testing.TB, b *broker.Broker, id string) broker.ProviderInfo {
	tb.Helper()
	for _, p := range b.Providers() {
		if p.ID == id {
			return p
		}
	}
	tb.Fatalf("Providers() lacks %q", id)
	return broker.ProviderInfo{}
}

// A cancelled call keeps waiting for the provider's answer, and its in-flight slot, until
// the tool has stopped: the answer's failure is kept, a success or the provider's report
// that the tool stopped is ABORTED. Either way the tool's request to end the turn stays.
func TestCancelledCallWaitsForTheProvider(t *testing.T) {
	srv := brokertest.Start(t, brokertest.NewRegistrar(),
		broker.WithLimits(broker.Limits{MaxInFlightPerProvider: 1, CancelGrace: time.Hour}))
	r := helloRaw(t, srv, "raw", 0)
	for name, tc := range map[string]struct {
		answer   *toolsdv1.ExecuteResult
		code     tool.Code
		message  string
		stillRun bool
	}{
		"own failure kept": {answer: &toolsdv1.ExecuteResult{IsError: true, ErrorMessage: []byte("disk full")}, code: tool.CodeToolError, message: "disk full"},
		"success aborted":  {answer: &toolsdv1.ExecuteResult{Content: []byte("done anyway")}, code: tool.CodeAborted, message: "call was cancelled"},
		"stopped":          {answer: &toolsdv1.ExecuteResult{IsError: true, ErrorMessage: []byte("context canceled"), Cancelled: true}, code: tool.CodeAborted, message: "call was cancelled"},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			call := goCall(ctx, srv.Broker, r.id, execFor("t", "{}"))
			id := r.execute().GetRequestId()
			cancel()
			if c := r.next().GetCancel(); c.GetRequestId() != id {
				t.Fatalf("got %v, want the cancel of request %d", c, id)
			}
			// The tool may still be running: the call holds its slot and has no result.
			if got := srv.Broker.Call(t.Context(), r.id, execFor("t", "{}"), 1); got.Code() != tool.CodeProviderOverloaded {
				t.Errorf("second Call() while the cancelled one runs = %q, want PROVIDER_OVERLOADED", got.Code())
			}
			select {
			case res := <-call:
				t.Fatalf("cancelled Call() returned %+v before the provider answered", res)
			default:
			}
			tc.answer.RequestId, tc.answer.ConcludesTurn = id, true
			r.result(tc.answer)
			if res := awaitResult(t, call); res.Code() != tc.code || res.Err.Message != tc.message || !res.ConcludesTurn {
				t.Errorf("Call() = %+v, want %s: %s with ConcludesTurn", res, tc.code, tc.message)
			}
		})
	}
}

// Without an answer, a cancelled call ends after the grace, frees its slot, and a later
// answer is stale.
func TestCancelGraceEnds(t *testing.T) {
	obs := newRecorder()
	srv := brokertest.Start(t, brokertest.NewRegistrar(), broker.WithObserver(obs),
		broker.WithLimits(broker.Limits{CancelGrace: 10 * time.Millisecond}))
	r := helloRaw(t, srv, "raw", 0)
	ctx, cancel := context.WithCancel(t.Context())
	call := goCall(ctx, srv.Broker, r.id, execFor("t", "{}"))
	id := r.execute().GetRequestId()
	cancel()
	r.next() // the cancel
	if res := awaitResult(t, call); res.Code() != tool.CodeAborted {
		t.Errorf("Call() = %+v, want ABORTED", res)
	}
	if n := providerInfo(t, srv.Broker, r.id).InFlight; n != 0 {
		t.Errorf("InFlight = %d after the grace, want 0", n)
	}
	r.result(&toolsdv1.ExecuteResult{RequestId: id, Content: []byte("late")})
	obs.waitFor(t, "stale", 1)
}

// The SDK answers a cancelled call: a handler returning its context's error reports
// that it stopped (ABORTED); one returning an error of its own keeps it.
func TestSDKAnswersCancelledCalls(t *testing.T) {
	srv := brokertest.Start(t, brokertest.NewRegistrar(), broker.WithLimits(broker.Limits{CancelGrace: time.Hour}))
	started := make(chan struct{}, 1)
	p := runSDK(t, srv, provider.NewTool("wait", "waits for cancellation",
		func(ctx context.Context, _ provider.Call, a struct{ Own bool }) (string, error) {
			started <- struct{}{}
			<-ctx.Done()
			if a.Own {
				return "", errors.New("rolled back the half-written file")
			}
			return "", ctx.Err()
		}))
	for args, want := range map[string]tool.Result{
		`{}`:           tool.Failure(tool.CodeAborted, "call was cancelled"),
		`{"Own":true}`: tool.Failure(tool.CodeToolError, "rolled back the half-written file"),
	} {
		ctx, cancel := context.WithCancel(t.Context())
		call := goCall(ctx, srv.Broker, p.ProviderID(), execFor("wait", args))
		<-started
		cancel()
		if diff := cmp.Diff(want, awaitResult(t, call)); diff != "" {
			t.Errorf("Call(%s) mismatch (-want +got):\n%s", args, diff)
		}
	}
}

// heldStream is a provider stream whose Send holds back the execute of call id "held"
// until release is closed, after telling entered: the send slot is then held by a
// write in progress, as behind a provider that stopped reading, deterministically.
type heldStream struct {
	toolsdv1.ProviderService_ConnectServer
	entered chan<- struct{}
	release <-chan struct{}
}

func (s heldStream) Send(m *toolsdv1.ProviderServiceConnectResponse) error {
	if m.GetExecute().GetCallId() == "held" {
		s.entered <- struct{}{}
		<-s.release
	}
	return s.ProviderService_ConnectServer.Send(m)
}

type heldService struct {
	toolsdv1.UnimplementedProviderServiceServer
	b       *broker.Broker
	entered chan<- struct{}
	release <-chan struct{}
}

func (s heldService) Connect(stream toolsdv1.ProviderService_ConnectServer) error {
	return s.b.Connect(heldStream{ProviderService_ConnectServer: stream, entered: s.entered, release: s.release})
}

// A provider cannot answer a call whose execute it was never sent: request ids are
// sequential, so it can guess the id of a call still waiting for the send slot, and
// that result was the call's answer. It is dropped and counted as stale; the call gets
// the answer the provider sends once it has the execute.
func TestResultForACallNotSentYetIsDropped(t *testing.T) {
	obs := newRecorder()
	b := broker.New(brokertest.NewRegistrar(), broker.WithObserver(obs), broker.WithLogger(zaptest.NewLogger(t)),
		broker.WithLimits(broker.Limits{SendTimeout: time.Hour}))
	entered, release := make(chan struct{}), make(chan struct{})
	srv := grpc.NewServer()
	toolsdv1.RegisterProviderServiceServer(srv, heldService{b: b, entered: entered, release: release})
	lis := brokertest.Listen(t)
	go func() { _ = srv.Serve(lis) }()
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	t.Cleanup(func() {
		unblock()
		b.Shutdown("test over")
		srv.Stop()
	})
	r := hello(t, openRawOn(t, brokertest.DialAddr(t, lis.Addr().String())), "guesser", 0)

	first := goCall(t.Context(), b, r.id, execFor("t", "{}"))
	id := r.execute().GetRequestId()
	r.result(&toolsdv1.ExecuteResult{RequestId: id, Content: []byte("one")})
	awaitResult(t, first)

	held := execFor("t", "{}")
	held.CallID = "held"
	goCall(t.Context(), b, r.id, held) // request id+1, stuck in Send holding the slot
	<-entered
	w := execFor("t", "{}")
	var progressed atomic.Bool
	w.Progress = func(tool.Progress) { progressed.Store(true) }
	waiting := goCall(t.Context(), b, r.id, w) // request id+2, waits for the slot
	waitInFlight(t, b, r.id, 2)

	r.send(&toolsdv1.ProviderServiceConnectRequest{Msg: &toolsdv1.ProviderServiceConnectRequest_Progress{
		Progress: &toolsdv1.ExecuteProgress{RequestId: id + 2, Message: []byte("guessed")},
	}})
	r.result(&toolsdv1.ExecuteResult{RequestId: id + 2, Content: []byte("guessed")})
	r.send(&toolsdv1.ProviderServiceConnectRequest{}) // malformed, handled after the guess
	obs.waitFor(t, "malformed", 1)
	if n := obs.get("stale"); n != 1 {
		t.Errorf("stale results = %d after the guess, want 1", n)
	}
	if progressed.Load() {
		t.Error("progress for the call not sent yet was forwarded")
	}

	unblock()
	for range 2 {
		if e := r.execute(); e.GetRequestId() == id+2 {
			r.result(&toolsdv1.ExecuteResult{RequestId: id + 2, Content: []byte("genuine")})
		}
	}
	if got := awaitResult(t, waiting); got.IsError || got.Content != "genuine" {
		t.Errorf("Call() = %+v, want the answer sent after its execute (content genuine)", got)
	}
}

// waitInFlight waits until providerID has n calls in flight.
func waitInFlight(tb testing.TB, b *broker.Broker, providerID string, n int) {
	tb.Helper()
	deadline := time.Now().Add(waitTimeout)
	for providerInfo(tb, b, providerID).InFlight != n {
		if time.Now().After(deadline) {
			tb.Fatalf("provider %s never had %d calls in flight", providerID, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// A result the broker fails for its size or its encoding keeps the tool's request to
// end the turn, as a result the pipeline replaces with INVALID_RESULT or
// RESULT_TOO_LARGE does; the SDK's report of a result too large to send keeps it too.
func TestRejectedResultKeepsConcludesTurn(t *testing.T) {
	srv := brokertest.Start(t, brokertest.NewRegistrar(), broker.WithLimits(broker.Limits{MaxResultBytes: 64 << 10}))
	r := helloRaw(t, srv, "raw", 0)
	for name, tc := range map[string]struct {
		res  *toolsdv1.ExecuteResult
		code tool.Code
	}{
		"content not UTF-8":       {res: &toolsdv1.ExecuteResult{Content: []byte("bad \xff")}, code: tool.CodeInvalidResult},
		"error message not UTF-8": {res: &toolsdv1.ExecuteResult{IsError: true, ErrorMessage: []byte("\xc3\x28")}, code: tool.CodeInvalidResult},
		"value not JSON":          {res: &toolsdv1.ExecuteResult{ValueJson: []byte("{nope")}, code: tool.CodeInvalidResult},
		"too large":               {res: &toolsdv1.ExecuteResult{Content: make([]byte, 65<<10)}, code: tool.CodeResultTooLarge},
		"kept back for its size":  {res: &toolsdv1.ExecuteResult{OversizedBytes: 1 << 20}, code: tool.CodeResultTooLarge},
	} {
		t.Run(name, func(t *testing.T) {
			call := goCall(t.Context(), srv.Broker, r.id, execFor("t", "{}"))
			tc.res.RequestId = r.execute().GetRequestId()
			tc.res.ConcludesTurn = true
			r.result(tc.res)
			if got := awaitResult(t, call); got.Code() != tc.code || !got.ConcludesTurn {
				t.Errorf("Call() = %+v, want %s with ConcludesTurn", got, tc.code)
			}
		})
	}
	t.Run("SDK result too large to send", func(t *testing.T) {
		p := runSDK(t, srv, provider.NewTool("huge", "", func(context.Context, provider.Call, struct{}) (provider.Result, error) {
			return provider.Result{Content: strings.Repeat("z", 65<<10), ConcludesTurn: true}, nil
		}))
		if got := srv.Broker.Call(t.Context(), p.ProviderID(), execFor("huge", "{}"), 1); got.Code() != tool.CodeResultTooLarge || !got.ConcludesTurn {
			t.Errorf("Call(huge) = %+v, want RESULT_TOO_LARGE with ConcludesTurn", got)
		}
	})
}
