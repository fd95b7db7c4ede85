package broker_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/testing/protocmp"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/broker"
	"github.com/toolsd/toolsd/internal/broker/brokertest"
	"github.com/toolsd/toolsd/internal/tool"
	"github.com/toolsd/toolsd/pkg/provider"
)

const waitTimeout = brokertest.WaitTimeout

var cmpProto = protocmp.Transform()

// recorder is an Observer that counts events and lets tests wait for counts.
type recorder struct {
	mu      sync.Mutex
	counts  map[string]int
	changed chan struct{}
}

var _ broker.Observer = (*recorder)(nil)

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

func (r *recorder) ProviderConnected(d int)     { r.add("connected", d) }
func (r *recorder) CallRejected(code tool.Code) { r.add("rejected:"+string(code), 1) }
func (r *recorder) StaleResult()                { r.add("stale", 1) }
func (r *recorder) InvalidResult()              { r.add("invalid", 1) }
func (r *recorder) MalformedMessage()           { r.add("malformed", 1) }
func (r *recorder) Panicked()                   { r.add("panicked", 1) }

func (r *recorder) get(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts[name]
}

// waitFor waits until the count of name is n.
func (r *recorder) waitFor(tb testing.TB, name string, n int) {
	tb.Helper()
	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	for {
		r.mu.Lock()
		got, ch := r.counts[name], r.changed
		r.mu.Unlock()
		if got == n {
			return
		}
		select {
		case <-ch:
		case <-timer.C:
			tb.Fatalf("observer count %q = %d, want %d", name, got, n)
		}
	}
}

// rawStream is a hand-driven provider stream, for what the SDK would never send.
type rawStream struct {
	tb     testing.TB
	stream grpc.BidiStreamingClient[toolsdv1.ProviderServiceConnectRequest, toolsdv1.ProviderServiceConnectResponse]
	cancel context.CancelFunc
	msgs   chan *toolsdv1.ProviderServiceConnectResponse
	err    error // set before msgs closes
	id     string
}

// openRaw opens a stream without saying hello.
func openRaw(tb testing.TB, srv *brokertest.Server) *rawStream {
	tb.Helper()
	return openRawOn(tb, srv.Dial(tb))
}

// openRawOn opens a stream on conn without saying hello.
func openRawOn(tb testing.TB, conn *grpc.ClientConn) *rawStream {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := toolsdv1.NewProviderServiceClient(conn).Connect(ctx)
	if err != nil {
		cancel()
		tb.Fatalf("Connect() = %v", err)
	}
	r := &rawStream{tb: tb, stream: stream, cancel: cancel, msgs: make(chan *toolsdv1.ProviderServiceConnectResponse)}
	go func() {
		defer close(r.msgs)
		for {
			m, err := stream.Recv()
			if err != nil {
				r.err = err
				return
			}
			select {
			case r.msgs <- m:
			case <-ctx.Done():
				r.err = ctx.Err()
				return
			}
		}
	}()
	tb.Cleanup(func() {
		cancel()
		for range r.msgs {
		}
	})
	return r
}

// helloRaw opens a stream, says hello and waits for the welcome.
func helloRaw(tb testing.TB, srv *brokertest.Server, name string, maxInFlight uint32) *rawStream {
	tb.Helper()
	return hello(tb, openRaw(tb, srv), name, maxInFlight)
}

// helloRawFixedWindow is helloRaw on a connection with fixed 64 KiB flow-control
// windows: once such a provider stops reading, toolsd's sends to it block for good
// (gRPC's default windows grow while data arrives, whether or not it is read).
func helloRawFixedWindow(tb testing.TB, srv *brokertest.Server, name string) *rawStream {
	tb.Helper()
	conn, err := grpc.NewClient(srv.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	if err != nil {
		tb.Fatalf("grpc.NewClient() = %v", err)
	}
	tb.Cleanup(func() { _ = conn.Close() })
	return hello(tb, openRawOn(tb, conn), name, 0)
}

// hello says hello on r and waits for the welcome.
func hello(tb testing.TB, r *rawStream, name string, maxInFlight uint32) *rawStream {
	tb.Helper()
	r.send(&toolsdv1.ProviderServiceConnectRequest{Msg: &toolsdv1.ProviderServiceConnectRequest_Hello{
		Hello: &toolsdv1.ProviderHello{Name: name, Version: "v0", MaxInFlight: maxInFlight},
	}})
	w := r.next().GetWelcome()
	if w == nil || w.GetProviderId() == "" {
		tb.Fatalf("first server message = %v, want a welcome with a provider id", w)
	}
	r.id = w.GetProviderId()
	return r
}

func (r *rawStream) send(m *toolsdv1.ProviderServiceConnectRequest) {
	r.tb.Helper()
	if err := r.stream.Send(m); err != nil {
		r.tb.Fatalf("Send(%v) = %v", m, err)
	}
}

func (r *rawStream) result(res *toolsdv1.ExecuteResult) {
	r.tb.Helper()
	r.send(&toolsdv1.ProviderServiceConnectRequest{Msg: &toolsdv1.ProviderServiceConnectRequest_Result{Result: res}})
}

// next returns the next server message; the stream must not end first.
func (r *rawStream) next() *toolsdv1.ProviderServiceConnectResponse {
	r.tb.Helper()
	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	select {
	case m, ok := <-r.msgs:
		if !ok {
			r.tb.Fatalf("stream ended: %v", r.err)
		}
		return m
	case <-timer.C:
		r.tb.Fatal("timed out waiting for a server message")
		return nil
	}
}

// execute returns the next message, which must be an execute.
func (r *rawStream) execute() *toolsdv1.ExecuteRequest {
	r.tb.Helper()
	m := r.next()
	if m.GetExecute() == nil {
		r.tb.Fatalf("server message = %v, want execute", m)
	}
	return m.GetExecute()
}

// end waits for the stream to end, skipping messages, and returns its error.
func (r *rawStream) end() error {
	r.tb.Helper()
	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	for {
		select {
		case _, ok := <-r.msgs:
			if !ok {
				return r.err
			}
		case <-timer.C:
			r.tb.Fatal("timed out waiting for the stream to end")
		}
	}
}

func execFor(name, args string) *tool.Exec {
	return &tool.Exec{Call: tool.Call{
		SessionID: "s-1", Scope: "agent/a", CallID: "call-1", Name: name,
		Arguments: args, Turn: 3, Step: 4, Index: 2,
	}}
}

// goCall runs Call on its own goroutine.
func goCall(ctx context.Context, b *broker.Broker, providerID string, e *tool.Exec) <-chan tool.Result {
	ch := make(chan tool.Result, 1)
	go func() { ch <- b.Call(ctx, providerID, e, 1) }()
	return ch
}

func awaitResult(tb testing.TB, ch <-chan tool.Result) tool.Result {
	tb.Helper()
	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	select {
	case r := <-ch:
		return r
	case <-timer.C:
		tb.Fatal("timed out waiting for Call to return")
		return tool.Result{}
	}
}

// runSDK runs an SDK provider with tools against srv until the test ends and waits
// until its tools are registered.
func runSDK(tb testing.TB, srv *brokertest.Server, tools ...provider.Tool) *provider.Provider {
	tb.Helper()
	opts := []provider.Option{provider.WithBackoff(time.Millisecond, 20*time.Millisecond)}
	if _, bench := tb.(*testing.B); !bench {
		opts = append(opts, provider.WithLogger(zaptest.NewLogger(tb)))
	}
	p := provider.New("sdk-test", opts...)
	p.Add(tools...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx, srv.Addr) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("Run() = %v, want nil", err)
		}
	})
	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	select {
	case <-p.Ready():
	case <-timer.C:
		tb.Fatal("SDK provider never became ready")
	}
	return p
}
