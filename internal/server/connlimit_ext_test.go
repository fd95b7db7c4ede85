package server_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/test/bufconn"

	"github.com/toolsd/toolsd/internal/server"
)

// tcpPair returns both ends of a loopback TCP connection, the accepted one first.
func tcpPair(t *testing.T) (accepted, dialed *net.TCPConn) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lis.Close() }()
	d, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	a, err := lis.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close(); _ = d.Close() })
	return a.(*net.TCPConn), d.(*net.TCPConn)
}

// TestRawControlTellsClosed checks what the limiter's sweep relies on: Control with a
// function that does nothing fails on a closed *net.TCPConn (net.ErrClosed), and on an
// open one succeeds without disturbing it (its data still read, its deadline kept).
func TestRawControlTellsClosed(t *testing.T) {
	c, peer := tcpPair(t)
	control := func() error {
		raw, err := c.SyscallConn()
		if err != nil {
			return err
		}
		return raw.Control(func(uintptr) {})
	}
	if _, err := peer.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := control(); err != nil {
		t.Fatalf("Control() on an open conn = %v, want nil", err)
	}
	buf := make([]byte, 1)
	if n, err := c.Read(buf); n != 1 || err != nil || buf[0] != 'x' {
		t.Fatalf("Read() after Control = %d, %v, %q; want 1, nil, \"x\"", n, err, buf[:n])
	}
	_ = c.SetReadDeadline(time.Unix(1, 0))
	if err := control(); err != nil {
		t.Fatalf("Control() on an open conn past its deadline = %v, want nil", err)
	}
	if _, err := c.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read() past its deadline after Control = %v, want a timeout", err)
	}
	_ = c.Close()
	if err := control(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Control() on a closed conn = %v, want net.ErrClosed", err)
	}
}

// acceptTypes is a listener that records the type of each connection it hands gRPC.
type acceptTypes struct {
	net.Listener
	mu    sync.Mutex
	types []string
}

func (l *acceptTypes) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.types = append(l.types, fmt.Sprintf("%T", c))
		l.mu.Unlock()
	}
	return c, err
}

// checkHealth dials addr and asks the health service once.
func checkHealth(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if _, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("Check() = %v, want SERVING", err)
	}
	return conn
}

// closedByServer reports whether the server closes c without sending anything (a read
// bounded by a generous deadline, which only a hang reaches).
func closedByServer(t *testing.T, c net.Conn) bool {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	n, err := c.Read(make([]byte, 1))
	return n == 0 && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET))
}

// waitOpen waits until lim counts n connections open (each look a sweep, as a scrape's).
func waitOpen(t *testing.T, lim *server.ConnLimiter, n int, what string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); lim.Open() != n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d connections open, want %d", what, lim.Open(), n)
		}
	}
}

// TestConnectionLimit: over real loopback TCP with a limit of 2, a third connection is
// closed as it is accepted, before it sends anything, and counted; a client's close
// gives its place back (seen by the next sweep); a connection gRPC closed for a bad
// preface gives its place to the very next connection, the accept at the limit sweeping
// first; the server's stop gives every place back; gRPC is handed each connection as
// the *net.TCPConn it is, unwrapped.
func TestConnectionLimit(t *testing.T) {
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var refused atomic.Int64
	lim := server.LimitConnections(tcp, 2, func() { refused.Add(1) })
	lis := &acceptTypes{Listener: lim}
	srv, _ := server.NewGRPCServer(server.GRPCConfig{MaxRecvMsgSize: 1 << 20, MaxConcurrentStreams: 10})
	healthpb.RegisterHealthServer(srv, health.NewServer())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			srv.Stop()
			if err := <-served; err != nil {
				t.Errorf("Serve() = %v after Stop, want nil", err)
			}
		}
	}
	defer stop()
	addr := lis.Addr().String()

	a := checkHealth(t, addr)
	b := checkHealth(t, addr)
	third, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = third.Close() }()
	if !closedByServer(t, third) {
		t.Fatal("a third connection with 2 open was not closed by the server")
	}
	if got := refused.Load(); got != 1 {
		t.Errorf("refused = %d after the third connection, want 1", got)
	}
	if got := lim.Open(); got != 2 {
		t.Errorf("Open() = %d with two clients, want 2", got)
	}

	_ = a.Close()
	waitOpen(t, lim, 1, "after a client closed")
	checkHealth(t, addr)
	_ = b.Close()
	waitOpen(t, lim, 1, "after the second client closed")

	bad, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = bad.Close() }()
	if _, err := bad.Write([]byte("GET / HTTP/1.1\r\nHost: toolsd\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	_ = bad.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.Copy(io.Discard, bad); err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("reading a connection with a bad preface to its end = %v, want it closed by the server", err)
	}
	// The server closed bad before its client could read the end: with two held, the
	// next accept sweeps and finds its place free.
	checkHealth(t, addr)
	if got := refused.Load(); got != 1 {
		t.Errorf("refused = %d after a connection took a bad preface's place, want 1", got)
	}

	stop()
	waitOpen(t, lim, 0, "after the server stopped")
	if got := refused.Load(); got != 1 {
		t.Errorf("refused = %d at the end, want 1", got)
	}
	lis.mu.Lock()
	defer lis.mu.Unlock()
	if len(lis.types) != 5 {
		t.Errorf("gRPC was handed %d connections, want 5", len(lis.types))
	}
	for i, typ := range lis.types {
		if typ != "*net.TCPConn" {
			t.Errorf("connection %d handed to gRPC is a %s, want *net.TCPConn", i, typ)
		}
	}
}

// TestConnectionLimitWithoutSocket: a connection from no OS socket (bufconn's) holds a
// place until it is closed, like a TCP one.
func TestConnectionLimitWithoutSocket(t *testing.T) {
	buf := bufconn.Listen(1 << 10)
	lim := server.LimitConnections(buf, 1, nil)
	defer func() { _ = lim.Close() }()
	dialed := make(chan net.Conn, 1)
	go func() {
		c, err := buf.Dial()
		if err != nil {
			t.Error(err)
		}
		dialed <- c
	}()
	c, err := lim.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = (<-dialed).Close() }()
	if got := lim.Open(); got != 1 {
		t.Errorf("Open() = %d with a connection accepted, want 1", got)
	}
	_ = c.Close()
	if got := lim.Open(); got != 0 {
		t.Errorf("Open() = %d after it closed, want 0", got)
	}
}
