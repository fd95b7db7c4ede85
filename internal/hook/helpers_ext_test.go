package hook_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/hook"
	"github.com/toolsd/toolsd/internal/pipeline"
	"github.com/toolsd/toolsd/internal/tool"
)

// waitTimeout bounds every wait for an event; reaching it fails the test.
const waitTimeout = 10 * time.Second

// recorder is an Observer that counts events and lets tests wait for counts.
type recorder struct {
	mu      sync.Mutex
	counts  map[string]int
	changed chan struct{}
}

var _ hook.Observer = (*recorder)(nil)

func newRecorder() *recorder {
	return &recorder{counts: map[string]int{}, changed: make(chan struct{})}
}

func (r *recorder) add(name string, d int) {
	r.mu.Lock()
	r.counts[name] += d
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
}

func (r *recorder) HookConnected(_ string, d int) { r.add("connected", d) }

func (r *recorder) HookFailure(name, stage string, failOpen bool) {
	r.add(fmt.Sprintf("failure:%s:%s:%t", name, stage, failOpen), 1)
}

func (r *recorder) NotificationsLost(name string, n int) { r.add("lost:"+name, n) }

func (r *recorder) ContextsDropped(name string, n int) { r.add("contexts_dropped:"+name, n) }

func (r *recorder) Panicked() { r.add("panicked", 1) }

func (r *recorder) get(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts[name]
}

// waitFor waits until cond holds for the count of name.
func (r *recorder) waitFor(tb testing.TB, name string, cond func(int) bool) {
	tb.Helper()
	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	for {
		r.mu.Lock()
		got, ch := r.counts[name], r.changed
		r.mu.Unlock()
		if cond(got) {
			return
		}
		select {
		case <-ch:
		case <-timer.C:
			tb.Fatalf("observer count %q = %d, condition not met", name, got)
		}
	}
}

// waitUntil polls cond until it holds; reaching waitTimeout fails the test.
func waitUntil(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// env is a hub served over bufconn by a real gRPC server.
type env struct {
	hub *hook.Hub
	obs *recorder
	lis *bufconn.Listener
}

type hookService struct {
	toolsdv1.UnimplementedHookServiceServer
	hub *hook.Hub
}

func (s hookService) Connect(stream toolsdv1.HookService_ConnectServer) error {
	return s.hub.Connect(stream)
}

// testLogger logs to the test at info; a benchmark logs nothing, so that its connect and
// disconnect lines do not land among the results in bench/out/micro.txt.
func testLogger(tb testing.TB) *zap.Logger {
	if _, bench := tb.(*testing.B); bench {
		return zap.NewNop()
	}
	return zaptest.NewLogger(tb, zaptest.Level(zap.InfoLevel))
}

func newEnv(tb testing.TB, opts ...hook.Option) *env {
	tb.Helper()
	obs := newRecorder()
	all := append([]hook.Option{hook.WithLogger(testLogger(tb)), hook.WithObserver(obs)}, opts...)
	e := &env{hub: hook.New(all...), obs: obs, lis: bufconn.Listen(1 << 20)}
	srv := grpc.NewServer()
	toolsdv1.RegisterHookServiceServer(srv, hookService{hub: e.hub})
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(e.lis)
	}()
	tb.Cleanup(func() {
		e.hub.Shutdown("test over")
		srv.Stop()
		<-served
	})
	return e
}

// dial opens a client connection to the env's server, closed at cleanup.
func (e *env) dial(tb testing.TB, opts ...grpc.DialOption) *grpc.ClientConn {
	tb.Helper()
	opts = append([]grpc.DialOption{
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return e.lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
	}, opts...)
	cc, err := grpc.NewClient("passthrough:///bufnet", opts...)
	if err != nil {
		tb.Fatalf("grpc.NewClient() = %v", err)
	}
	tb.Cleanup(func() { _ = cc.Close() })
	return cc
}

// answerFunc answers a request; nil sends no answer.
type answerFunc func(*toolsdv1.HookRequest) *toolsdv1.HookDecision

// testHook is a hook process driven by the test.
type testHook struct {
	tb      testing.TB
	id      string
	cc      *grpc.ClientConn
	stream  toolsdv1.HookService_ConnectClient
	reqs    chan *toolsdv1.HookRequest
	goodbye chan string
	done    chan struct{} // closed when the receive loop ends
	endErr  error         // why it ended; read after done
	sendMu  sync.Mutex
}

type hookOpts struct {
	noRead   bool // never read after the welcome
	noRecord bool // do not record requests
	dial     []grpc.DialOption
	md       []string // metadata of the stream, as key, value pairs
}

// withMetadata sends the key, value pairs kv as the stream's metadata.
func withMetadata(kv ...string) func(*hookOpts) {
	return func(o *hookOpts) { o.md = append(o.md, kv...) }
}

// noRead makes a hook that stops reading after its welcome, with small fixed flow
// control windows so that the server's sends block soon.
func noRead(o *hookOpts) {
	o.noRead = true
	o.dial = append(o.dial, grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
}

// connect opens a hook stream with hello and answers requests with answer (nil: only
// records them). It returns once the hub has welcomed (and so subscribed) the hook.
func (e *env) connect(tb testing.TB, hello *toolsdv1.HookHello, answer answerFunc, opts ...func(*hookOpts)) *testHook {
	tb.Helper()
	var o hookOpts
	for _, f := range opts {
		f(&o)
	}
	cc := e.dial(tb, o.dial...)
	ctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(context.Background(), o.md...))
	tb.Cleanup(cancel)
	stream, err := toolsdv1.NewHookServiceClient(cc).Connect(ctx)
	if err != nil {
		tb.Fatalf("Connect() = %v", err)
	}
	h := &testHook{tb: tb, cc: cc, stream: stream, reqs: make(chan *toolsdv1.HookRequest, 1024),
		goodbye: make(chan string, 1), done: make(chan struct{})}
	h.send(&toolsdv1.HookServiceConnectRequest{Msg: &toolsdv1.HookServiceConnectRequest_Hello{Hello: hello}})
	m, err := stream.Recv()
	if err != nil {
		tb.Fatalf("Recv() welcome = %v", err)
	}
	h.id = m.GetWelcome().GetHookId()
	if h.id == "" {
		tb.Fatalf("Recv() = %v, want a welcome with a hook id", m)
	}
	if o.noRead {
		return h
	}
	go h.receive(answer, o.noRecord)
	tb.Cleanup(func() {
		_ = cc.Close()
		<-h.done
	})
	return h
}

func (h *testHook) receive(answer answerFunc, noRecord bool) {
	for {
		m, err := h.stream.Recv()
		if err != nil {
			h.endErr = err
			close(h.done)
			return
		}
		switch msg := m.GetMsg().(type) {
		case *toolsdv1.HookServiceConnectResponse_Goodbye:
			h.goodbye <- msg.Goodbye.GetReason()
		case *toolsdv1.HookServiceConnectResponse_Request:
			if !noRecord {
				h.reqs <- msg.Request
			}
			if answer == nil {
				continue
			}
			if d := answer(msg.Request); d != nil {
				d.RequestId = msg.Request.GetRequestId()
				h.decide(d)
			}
		}
	}
}

func (h *testHook) send(m *toolsdv1.HookServiceConnectRequest) {
	h.sendMu.Lock()
	defer h.sendMu.Unlock()
	if err := h.stream.Send(m); err != nil && !errors.Is(err, context.Canceled) {
		h.tb.Logf("hook Send() = %v", err)
	}
}

func (h *testHook) decide(d *toolsdv1.HookDecision) {
	h.send(&toolsdv1.HookServiceConnectRequest{Msg: &toolsdv1.HookServiceConnectRequest_Decision{Decision: d}})
}

// next waits for the hook's next request.
func (h *testHook) next() *toolsdv1.HookRequest {
	h.tb.Helper()
	select {
	case r := <-h.reqs:
		return r
	case <-time.After(waitTimeout):
		h.tb.Fatal("no request reached the hook")
		return nil
	}
}

func sub(stage toolsdv1.HookStage, toolGlob, scope string, prio int32) *toolsdv1.HookSubscription {
	return &toolsdv1.HookSubscription{Stage: stage, Tool: toolGlob, Scope: scope, Priority: prio}
}

const (
	pre    = toolsdv1.HookStage_HOOK_STAGE_PRE_EXECUTE
	post   = toolsdv1.HookStage_HOOK_STAGE_POST_EXECUTE
	result = toolsdv1.HookStage_HOOK_STAGE_RESULT
)

func helloFor(name string, subs ...*toolsdv1.HookSubscription) *toolsdv1.HookHello {
	return &toolsdv1.HookHello{Name: name, Subscriptions: subs}
}

// always answers every request with d.
func always(d *toolsdv1.HookDecision) answerFunc {
	return func(*toolsdv1.HookRequest) *toolsdv1.HookDecision {
		c, _ := proto.Clone(d).(*toolsdv1.HookDecision)
		return c
	}
}

func verdict(v toolsdv1.HookVerdict, reason string) *toolsdv1.HookDecision {
	return &toolsdv1.HookDecision{Verdict: v, Reason: reason}
}

// fakeTool is a pipeline.Tool that accepts any JSON.
type fakeTool struct{ def tool.Definition }

func newTool(name string) *fakeTool {
	return &fakeTool{def: tool.Definition{Name: name, Parameters: json.RawMessage(`{"type":"object"}`)}}
}

func (f *fakeTool) Definition() *tool.Definition { return &f.def }
func (f *fakeTool) Owner() string                { return "p1" }
func (f *fakeTool) Hash() string                 { return "" }
func (f *fakeTool) ValidateArguments(raw string) error {
	if !json.Valid([]byte(raw)) {
		return errors.New("arguments are not valid JSON")
	}
	return nil
}
func (f *fakeTool) ValidateOutput([]byte) error { return nil }

type resolver struct{}

func (resolver) Resolve(_ context.Context, c *tool.Call) (pipeline.Tool, error) {
	return newTool(c.Name), nil
}

// dispatcher returns fn's result, or {Content: "ok"}.
type dispatcher struct {
	mu    sync.Mutex
	calls int
	fn    func(e *tool.Exec) tool.Result
}

func (d *dispatcher) Dispatch(_ context.Context, _ pipeline.Tool, e *tool.Exec) tool.Result {
	d.mu.Lock()
	d.calls++
	d.mu.Unlock()
	if d.fn == nil {
		return tool.Result{Content: "ok"}
	}
	return d.fn(e)
}

func (d *dispatcher) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls
}

// newPipeline wires the hub's participants into a pipeline.
func (e *env) newPipeline(disp *dispatcher, opts ...pipeline.Option) *pipeline.Pipeline {
	all := append([]pipeline.Option{
		pipeline.WithPreExecute(e.hub.PreExecute()),
		pipeline.WithPostExecute(e.hub.PostExecute()),
		pipeline.WithResultObservers(e.hub.ResultObserver()),
	}, opts...)
	return pipeline.New(resolver{}, disp, all...)
}

// newExec is a call in the middle of a batch.
func newExec(name, args string) *tool.Exec {
	return &tool.Exec{
		Call: tool.Call{SessionID: "s1", Scope: "tenant-a/agent", BatchID: "b1", Turn: 2, Step: 3, Index: 1,
			CallID: "c1", Name: name, Arguments: args},
		Siblings: []string{"ls", name, "cat"},
	}
}

func withScope(e *tool.Exec, scope string) *tool.Exec {
	e.Scope = scope
	return e
}

type approverFunc func(ctx context.Context, req tool.ApprovalRequest) (tool.ApprovalDecision, error)

func (f approverFunc) Approve(ctx context.Context, req tool.ApprovalRequest) (tool.ApprovalDecision, error) {
	return f(ctx, req)
}

// runAndDrop connects a hook with hello that never answers, runs a call through a new
// pipeline, closes the hook's connection once the call's request reaches it, and
// returns the call's result and the pipeline.
func (e *env) runAndDrop(t *testing.T, hello *toolsdv1.HookHello) (tool.Result, *pipeline.Pipeline) {
	t.Helper()
	h := e.connect(t, hello, silent)
	p := e.newPipeline(&dispatcher{})
	done := make(chan tool.Result, 1)
	go func() { done <- p.Run(context.Background(), newExec("echo", `{}`)) }()
	h.next()
	_ = h.cc.Close()
	select {
	case got := <-done:
		return got, p
	case <-time.After(waitTimeout):
		t.Fatal("call still waiting after the hook's connection closed")
		return tool.Result{}, nil
	}
}
