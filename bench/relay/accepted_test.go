package relay_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/toolsd/toolsd/bench/relay"
	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
)

// eventLog records, in order, what the relay's server sends and what its provider receives.
type eventLog struct {
	mu     sync.Mutex
	events []string
}

func (l *eventLog) add(e string) {
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
}

func (l *eventLog) index(e string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, x := range l.events {
		if x == e {
			return i
		}
	}
	return -1
}

type loggedStream struct {
	grpc.ServerStream
	log *eventLog
}

func (s loggedStream) SendMsg(m any) error {
	if r, ok := m.(*toolsdv1.ExecuteBatchResponse); ok && r.GetAccepted() != nil {
		s.log.add("accepted sent")
	}
	return s.ServerStream.SendMsg(m)
}

// serveRelay serves srv on loopback, its streams wrapped by wrap, until the test ends,
// and returns its address.
func serveRelay(t *testing.T, srv *relay.Server, wrap func(grpc.ServerStream) grpc.ServerStream) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(append(relay.ServerOptions(), grpc.StreamInterceptor(
		func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			return h(srv, wrap(ss))
		}))...)
	srv.Register(g)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = g.Serve(lis)
	}()
	t.Cleanup(func() {
		g.Stop()
		<-done
	})
	return lis.Addr().String()
}

// startLoggedRelay serves srv, its ExecuteBatch sends logged, and connects a raw
// provider that logs each ExecuteRequest and answers it after delay.
func startLoggedRelay(t *testing.T, srv *relay.Server, delay time.Duration) (string, *eventLog) {
	t.Helper()
	log := &eventLog{}
	addr := serveRelay(t, srv, func(ss grpc.ServerStream) grpc.ServerStream { return loggedStream{ss, log} })
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	prov, err := toolsdv1.NewProviderServiceClient(conn).Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := prov.Send(&toolsdv1.ProviderServiceConnectRequest{Msg: &toolsdv1.ProviderServiceConnectRequest_Hello{Hello: &toolsdv1.ProviderHello{Name: "logged"}}}); err != nil {
		t.Fatal(err)
	}
	if m, err := prov.Recv(); err != nil || m.GetWelcome() == nil {
		t.Fatalf("Recv() = %v, %v, want welcome", m, err)
	}
	provDone := make(chan struct{})
	go func() {
		defer close(provDone)
		for {
			m, err := prov.Recv()
			if err != nil {
				return
			}
			log.add("execute received")
			time.Sleep(delay)
			// Logged before the send: once sent, the batch may settle and the test read
			// the log before this goroutine runs again.
			log.add("provider answered")
			_ = prov.Send(&toolsdv1.ProviderServiceConnectRequest{Msg: &toolsdv1.ProviderServiceConnectRequest_Result{
				Result: &toolsdv1.ExecuteResult{RequestId: m.GetExecute().GetRequestId(), Content: []byte("ok")},
			}})
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-provDone
		_ = conn.Close()
	})
	return addr, log
}

func runOne(t *testing.T, addr string) []string {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stream, err := toolsdv1.NewToolServiceClient(conn).ExecuteBatch(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	err = stream.Send(&toolsdv1.ExecuteBatchRequest{Msg: &toolsdv1.ExecuteBatchRequest_Batch{Batch: &toolsdv1.Batch{
		SessionId: "s", Turn: 1, Step: 1, Calls: []*toolsdv1.ToolCall{{CallId: "c", Name: "noop", ArgumentsJson: `{"data":"x"}`}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		m, err := stream.Recv()
		if err != nil {
			return got
		}
		switch {
		case m.GetAccepted() != nil:
			got = append(got, "accepted")
		case m.GetResult() != nil:
			got = append(got, "result")
		case m.GetSettled() != nil:
			got = append(got, "settled")
		}
	}
}

// TestSingleCallAcceptedGoesWithResult: toolsd holds a single-call batch's accepted
// message back for limits.accepted_hold (5 ms) and writes it with a quick call's
// result, so such a batch costs its agent one write and one wake-up. The relay must do
// the same, or its single-call latency carries a write toolsd's does not. The hold here
// is a minute: with 5 ms, a loaded machine that took longer than that to carry the call
// to the provider saw the hold end, as it should, before the call arrived.
func TestSingleCallAcceptedGoesWithResult(t *testing.T) {
	addr, log := startLoggedRelay(t, relay.NewServer().WithAcceptedHold(time.Minute), 0)
	if got := runOne(t, addr); len(got) != 3 || got[0] != "accepted" || got[1] != "result" || got[2] != "settled" {
		t.Fatalf("messages = %v, want [accepted result settled]", got)
	}
	if exec, acc := log.index("execute received"), log.index("accepted sent"); exec < 0 || acc < exec {
		t.Errorf("accepted sent at event %d, the call reached the provider at event %d: want accepted held until the result", acc, exec)
	}
}

// TestSlowSingleCallGetsAcceptedAfterHold: a call slower than the hold gets accepted
// when the hold ends, before its result.
func TestSlowSingleCallGetsAcceptedAfterHold(t *testing.T) {
	addr, log := startLoggedRelay(t, relay.NewServer(), 200*time.Millisecond)
	if got := runOne(t, addr); len(got) != 3 || got[0] != "accepted" || got[1] != "result" || got[2] != "settled" {
		t.Fatalf("messages = %v, want [accepted result settled]", got)
	}
	if acc, ans := log.index("accepted sent"), log.index("provider answered"); acc < 0 || acc > ans {
		t.Errorf("accepted sent at event %d, the provider answered at event %d: want accepted when the hold ends", acc, ans)
	}
}
