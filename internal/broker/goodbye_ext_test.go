package broker_test

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/toolsd/toolsd/internal/broker"
	"github.com/toolsd/toolsd/internal/broker/brokertest"
	"github.com/toolsd/toolsd/internal/tool"
)

// countingConn is a client connection that closes reached once it has received at
// least want bytes from the server.
type countingConn struct {
	net.Conn
	read    *atomic.Int64
	want    int64
	reached chan struct{}
	once    *sync.Once
}

func (c countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if c.read.Add(int64(n)) >= c.want {
		c.once.Do(func() { close(c.reached) })
	}
	return n, err
}

// A provider that stopped reading with its stream's send quota used up, but no send in
// progress (the last execute was handed to gRPC whole), does not hold Shutdown: its
// goodbye would wait in Send for as long as the provider does not read, and the
// broker's shutdown (toolsd's) with it.
func TestShutdownDoesNotWaitForAGoodbyeTheProviderDoesNotRead(t *testing.T) {
	srv := brokertest.Start(t, brokertest.NewRegistrar(), broker.WithLimits(broker.Limits{SendTimeout: time.Hour}))
	// The whole first execute below and the first 60 KiB of the second.
	reached := make(chan struct{})
	counted := countingConn{read: &atomic.Int64{}, want: int64(len(bigArgs)) + 60<<10, reached: reached, once: &sync.Once{}}
	conn, err := grpc.NewClient(srv.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
			if err != nil {
				return nil, err
			}
			counted.Conn = c
			return counted, nil
		}))
	if err != nil {
		t.Fatalf("grpc.NewClient() = %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	r := hello(t, openRawOn(t, conn), "deaf", 0)
	// Two executes larger than the window. The stream's reader takes the first whole
	// and, unread by the test, stops there. The second is handed to gRPC whole, so its
	// Send returns, and what the window lets through arrives: the rest uses up the
	// stream's send quota.
	var calls []<-chan tool.Result
	for range 2 {
		calls = append(calls, goCall(context.Background(), srv.Broker, r.id, execFor("t", bigArgs)))
	}
	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	select {
	case <-reached:
	case <-timer.C:
		t.Fatal("the large execute did not reach the client")
	}

	done := make(chan struct{})
	go func() { srv.Broker.Shutdown("maintenance"); close(done) }()
	select {
	case <-done:
	case <-timer.C:
		t.Fatal("Shutdown did not return: it waits to say goodbye to a provider that does not read")
	}
	for i, ch := range calls {
		if res := awaitResult(t, ch); res.Code() != tool.CodeProviderGone {
			t.Errorf("call %d = %+v, want PROVIDER_GONE", i, res)
		}
	}
}
