package provider_test

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/broker"
	"github.com/toolsd/toolsd/internal/broker/brokertest"
	"github.com/toolsd/toolsd/internal/server"
	"github.com/toolsd/toolsd/pkg/provider"
)

// keepaliveWait bounds the waits for keepalive, whose pings gRPC sends at least 10 s
// apart: far above the few pings a test waits for, far below never.
const keepaliveWait = 2 * time.Minute

// waitLong is wait with keepaliveWait.
func waitLong(tb testing.TB, ch <-chan struct{}, what string) {
	tb.Helper()
	timer := time.NewTimer(keepaliveWait)
	defer timer.Stop()
	select {
	case <-ch:
	case <-timer.C:
		tb.Fatalf("timed out after %v waiting for %s", keepaliveWait, what)
	}
}

// The SDK's default keepalive pings within toolsd's enforcement policy. toolsd's gRPC
// server strikes a ping that comes sooner than server.KeepaliveMinTime after the one
// before and sends GOAWAY (too_many_pings) at the third strike; gRPC spaces a client's
// pings at least its keepalive time apart (never under 10 s), so a default no shorter
// than that minimum earns no strike. Seeing that on the wire would take the four pings
// a GOAWAY needs, 40 s; the wire shows here that the default pings reach toolsd's own
// gRPC server and that it keeps the stream.
func TestDefaultKeepaliveWithinToolsdsPolicy(t *testing.T) {
	if provider.DefaultKeepaliveTime < server.KeepaliveMinTime {
		t.Errorf("DefaultKeepaliveTime = %v, under the %v toolsd permits between pings", provider.DefaultKeepaliveTime, server.KeepaliveMinTime)
	}
	if testing.Short() {
		t.Skip("waits for a keepalive ping, sent after 10 s without traffic")
	}
	t.Parallel()
	lis := sniff(brokertest.Listen(t))
	b := serveToolsd(t, lis, brokertest.NewRegistrar())
	p := newProvider(t)
	p.Add(echoTool())
	run(t, p, lis.Addr().String())
	wait(t, p.Ready(), "registration")
	id := p.ProviderID()
	waitLong(t, lis.pings, "the provider's keepalive ping")
	// toolsd answers the ping after the test has seen it arrive. The second call's
	// execute is sent after toolsd read the first's result, so after it read that ping
	// and queued its answer: it reaches the provider only if no GOAWAY closed the
	// connection, and then behind any GOAWAY counted.
	for i := range 2 {
		if got := b.Call(t.Context(), id, exec("echo", `{"text":"still"}`), 1); got.Content != "still" {
			t.Errorf("Call(echo) %d after a keepalive ping = %+v, want content still", i+1, got)
		}
	}
	if n := lis.goaways.Load(); n != 0 {
		t.Errorf("toolsd sent %d GOAWAY frames to a provider with the default keepalive, want none", n)
	}
	if got := p.ProviderID(); got != id {
		t.Errorf("ProviderID() after a keepalive ping = %q, want %q (the same stream)", got, id)
	}
}

// A provider whose connection stops carrying anything, without a FIN or RST (toolsd's
// host lost power, the network partitioned), finds out by keepalive, reconnects and
// serves again. The proxy still passes on the provider's own close of the connection
// it gave up, so toolsd frees the old stream's tool names.
func TestKeepaliveFindsABlackholedConnection(t *testing.T) {
	t.Parallel()
	obs := &welcomes{ch: make(chan struct{}, 16)}
	reg := brokertest.NewRegistrar()
	srv := brokertest.Start(t, reg, broker.WithObserver(obs))
	px := startProxy(t, srv.Addr)
	p := newProvider(t, provider.WithKeepalive(time.Nanosecond, 100*time.Millisecond)) // gRPC's least: 10 s
	p.Add(echoTool())
	run(t, p, px.addr())
	wait(t, p.Ready(), "registration")
	wait(t, obs.ch, "the first stream's welcome")
	oldID := p.ProviderID()

	px.blackhole()
	waitLong(t, obs.ch, "a new stream after the connection went silent")
	var newID string
	reg.WaitFor(t, "echo registered again on the new stream", func() bool {
		r, ok := reg.Lookup("", "echo")
		newID = r.Owner
		return ok && r.Owner != oldID
	})
	if got := srv.Broker.Call(t.Context(), newID, exec("echo", `{"text":"back"}`), 1); got.Content != "back" {
		t.Errorf("Call(echo) after the reconnect = %+v, want content back", got)
	}
}

// welcomes signals every stream a broker welcomes.
type welcomes struct {
	broker.NopObserver
	ch chan struct{}
}

func (w *welcomes) ProviderConnected(d int) {
	if d > 0 {
		w.ch <- struct{}{}
	}
}

// proxy forwards loopback TCP connections to a target; blackhole makes the ones open
// drop what they carry, as a partitioned network does.
type proxy struct {
	lis      net.Listener
	target   string
	accepted chan struct{} // closed when the accept loop has returned
	wg       sync.WaitGroup
	mu       sync.Mutex
	links    []*link
}

// link is one proxied connection.
type link struct {
	client, upstream net.Conn
	dropping         atomic.Bool
}

func (l *link) close() {
	_ = l.client.Close()
	_ = l.upstream.Close()
}

func startProxy(tb testing.TB, target string) *proxy {
	tb.Helper()
	px := &proxy{lis: brokertest.Listen(tb), target: target, accepted: make(chan struct{})}
	go px.accept()
	tb.Cleanup(px.stop)
	return px
}

func (px *proxy) addr() string { return px.lis.Addr().String() }

func (px *proxy) accept() {
	defer close(px.accepted)
	for {
		c, err := px.lis.Accept()
		if err != nil {
			return // the listener closed
		}
		u, err := net.Dial("tcp", px.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		l := &link{client: c, upstream: u}
		px.mu.Lock()
		px.links = append(px.links, l)
		px.mu.Unlock()
		px.wg.Add(2)
		go px.pipe(l, c, u)
		go px.pipe(l, u, c)
	}
}

// pipe copies from one side of l to the other, or drops what it reads once l is
// blackholed; either side's end (or error) closes both.
func (px *proxy) pipe(l *link, from, to net.Conn) {
	defer px.wg.Done()
	defer l.close()
	buf := make([]byte, 32<<10)
	for {
		n, err := from.Read(buf)
		if n > 0 && !l.dropping.Load() {
			if _, werr := to.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// blackhole makes the connections open now drop everything; new ones are forwarded.
func (px *proxy) blackhole() {
	px.mu.Lock()
	defer px.mu.Unlock()
	for _, l := range px.links {
		l.dropping.Store(true)
	}
}

func (px *proxy) stop() {
	_ = px.lis.Close()
	<-px.accepted
	px.mu.Lock()
	for _, l := range px.links {
		l.close()
	}
	px.mu.Unlock()
	px.wg.Wait()
}

// serveToolsd serves a broker over reg on lis with toolsd's gRPC server (its keepalive
// enforcement policy included) until the test ends, and returns the broker.
func serveToolsd(tb testing.TB, lis net.Listener, reg *brokertest.Registrar, opts ...broker.Option) *broker.Broker {
	tb.Helper()
	gs, _ := server.NewGRPCServer(server.GRPCConfig{MaxRecvMsgSize: 4 << 20, MaxConcurrentStreams: 100})
	b := broker.New(reg, opts...)
	toolsdv1.RegisterProviderServiceServer(gs, brokertest.Service(b))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = gs.Serve(lis) // returns when Stop closes the listener
	}()
	tb.Cleanup(func() {
		b.Shutdown("test over")
		gs.Stop()
		<-done
	})
	return b
}

// sniffListener reports the keepalive pings its connections' clients send and counts
// the GOAWAY frames the server sends them.
type sniffListener struct {
	net.Listener
	pings   chan struct{}
	goaways atomic.Int64
}

func sniff(lis net.Listener) *sniffListener {
	return &sniffListener{Listener: lis, pings: make(chan struct{}, 64)}
}

func (l *sniffListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	in := &frames{skip: len(http2.ClientPreface), on: func(typ http2.FrameType, flags http2.Flags) {
		if typ == http2.FramePing && !flags.Has(http2.FlagPingAck) {
			select {
			case l.pings <- struct{}{}:
			default:
			}
		}
	}}
	out := &frames{on: func(typ http2.FrameType, _ http2.Flags) {
		if typ == http2.FrameGoAway {
			l.goaways.Add(1)
		}
	}}
	return &sniffConn{Conn: c, in: in, out: out}, nil
}

// sniffConn feeds what it reads and writes to its frames.
type sniffConn struct {
	net.Conn
	rmu, wmu sync.Mutex
	in, out  *frames
}

func (c *sniffConn) Read(b []byte) (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	n, err := c.Conn.Read(b)
	c.in.feed(b[:n])
	return n, err
}

func (c *sniffConn) Write(b []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	n, err := c.Conn.Write(b)
	c.out.feed(b[:n])
	return n, err
}

// frames calls on with the type and flags of each HTTP/2 frame in the bytes it is fed,
// in order, after the first skip bytes (a client's preface).
type frames struct {
	skip int
	hdr  []byte
	body int // bytes of the current frame's payload still to come
	on   func(http2.FrameType, http2.Flags)
}

func (f *frames) feed(b []byte) {
	for len(b) > 0 {
		var n int
		switch {
		case f.skip > 0:
			n = min(f.skip, len(b))
			f.skip -= n
		case f.body > 0:
			n = min(f.body, len(b))
			f.body -= n
		default:
			n = min(9-len(f.hdr), len(b))
			f.hdr = append(f.hdr, b[:n]...)
			if len(f.hdr) == 9 {
				f.body = int(f.hdr[0])<<16 | int(f.hdr[1])<<8 | int(f.hdr[2])
				f.on(http2.FrameType(f.hdr[3]), http2.Flags(f.hdr[4]))
				f.hdr = f.hdr[:0]
			}
		}
		b = b[n:]
	}
}
