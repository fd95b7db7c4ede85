package server_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/server"
	"github.com/toolsd/toolsd/internal/session"
	"github.com/toolsd/toolsd/internal/streamgate"
)

// serveTools runs the ToolService over store on a bufconn listener and returns the
// server and a client; both are stopped when the test ends.
func serveTools(t *testing.T, store session.Store, opts ...grpc.DialOption) (*server.Server, toolsdv1.ToolServiceClient) {
	t.Helper()
	srv := server.New(server.Deps{Sessions: store})
	g := grpc.NewServer()
	toolsdv1.RegisterToolServiceServer(g, srv)
	conn := serveBufconn(t, g, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	return srv, toolsdv1.NewToolServiceClient(conn)
}

// serveBufconn serves g on a bufconn listener and returns a client connection to it,
// dialled with opts (which must give transport credentials); both are stopped when the
// test ends, and Serve must then return nil.
func serveBufconn(t testing.TB, g *grpc.Server, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	served := make(chan error, 1)
	go func() { served <- g.Serve(lis) }()
	conn, err := grpc.NewClient("passthrough:///bufnet", append([]grpc.DialOption{
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) })}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		g.Stop()
		if err := <-served; err != nil {
			t.Errorf("Serve() = %v", err)
		}
	})
	return conn
}

// TestWatchAfterStopWatchesIsRefused: once StopWatches has run (shutdown, after the
// drain), a new WatchSession is refused with Unavailable before it sends anything; it
// used to start replaying the session and be cut off only some events later.
func TestWatchAfterStopWatchesIsRefused(t *testing.T) {
	store := session.NewMemory()
	defer func() { _ = store.Close() }()
	evs := make([]session.Event, 200)
	for i := range evs {
		evs[i] = session.Event{Type: session.TypeUserMessage, Message: &session.MessageRecord{Content: "ctx"}}
	}
	if _, err := store.Append(t.Context(), "s", evs...); err != nil {
		t.Fatal(err)
	}
	srv, tools := serveTools(t, store)
	srv.StopWatches()
	for i := range 20 {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		w, err := tools.WatchSession(ctx, &toolsdv1.WatchSessionRequest{SessionId: "s"})
		if err != nil {
			t.Fatal(err)
		}
		m, err := w.Recv()
		cancel()
		if status.Code(err) != codes.Unavailable || reason(err) != "SHUTTING_DOWN" {
			t.Fatalf("watch %d after StopWatches: Recv() = %v, %v; want Unavailable (SHUTTING_DOWN)", i, m.GetEvent().GetSeq(), err)
		}
	}
}

func reason(err error) string {
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.GetReason()
		}
	}
	return ""
}

// TestWatchStoppedByShutdownSendsWhatTheDrainLogged: shutdown stops watches once the
// drain is done, so that a watcher sees the drain's results (aborted calls, the last
// results) before its watch ends. The watch was cancelled at once instead, and a
// watcher that was behind, even by the events of the last commit, lost them: here it
// lags behind a client that reads little at a time. It now gets the events the session
// held when the watch was stopped, then Unavailable (SHUTTING_DOWN).
func TestWatchStoppedByShutdownSendsWhatTheDrainLogged(t *testing.T) {
	store := session.NewMemory()
	defer func() { _ = store.Close() }()
	text := strings.Repeat("x", 4<<10)
	event := session.Event{Type: session.TypeUserMessage, Message: &session.MessageRecord{Content: text}}
	if _, err := store.Append(t.Context(), "s", event); err != nil {
		t.Fatal(err)
	}
	srv, tools := serveTools(t, store, grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	w, err := tools.WatchSession(ctx, &toolsdv1.WatchSessionRequest{SessionId: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Recv(); err != nil { // the watch is running
		t.Fatalf("WatchSession(s).Recv() = %v", err)
	}
	// What the drain logs: far more than the client's window holds, so the watch is
	// still sending it when shutdown stops the watch.
	const logged = 100
	for range logged {
		if _, err := store.Append(t.Context(), "s", event); err != nil {
			t.Fatal(err)
		}
	}
	srv.StopWatches()
	for seq := uint64(2); ; seq++ {
		m, err := w.Recv()
		if err != nil {
			if seq != logged+2 {
				t.Errorf("WatchSession(s) ended after seq %d, want %d", seq-1, logged+1)
			}
			if status.Code(err) != codes.Unavailable || reason(err) != "SHUTTING_DOWN" {
				t.Errorf("WatchSession(s) ended with %v, want Unavailable (SHUTTING_DOWN)", err)
			}
			return
		}
		if got := m.GetEvent().GetSeq(); got != seq {
			t.Fatalf("WatchSession(s) sent seq %d, want %d", got, seq)
		}
	}
}

// deletedAtShutdown is a store whose watch, once stopped, finds that retention deleted
// its session at that very moment: it ends with ErrDeleted, as session.Memory's does when
// the deletion's wake-up and the stop arrive together.
type deletedAtShutdown struct {
	*session.Memory
	watching chan struct{}
}

func (d *deletedAtShutdown) Watch(ctx context.Context, id string, from uint64, fn func(session.Event) error) error {
	evs, err := d.Read(ctx, id, from, 0)
	if err != nil {
		return err
	}
	for _, ev := range evs {
		if err := fn(ev); err != nil {
			return err
		}
	}
	close(d.watching)
	<-ctx.Done()
	if _, err := d.Sweep(time.Now().Add(48 * time.Hour)); err != nil {
		return err
	}
	return session.ErrDeleted
}

// TestWatchDeletedAsShutdownStopsItSaysDeleted: a watch that ended because retention
// deleted its session, just as shutdown stopped it, ended with Unavailable
// (SHUTTING_DOWN): the client, told to come back, resumed after the restart at its seq,
// in whatever session was created under the id next. It ends with NotFound
// (SESSION_DELETED), as any watch of a deleted session does.
func TestWatchDeletedAsShutdownStopsItSaysDeleted(t *testing.T) {
	mem := session.NewMemory(session.WithRetention(time.Hour, 0), session.WithSweepInterval(0))
	defer func() { _ = mem.Close() }()
	if _, err := mem.Append(t.Context(), "s", session.Event{Type: session.TypeUserMessage, Message: &session.MessageRecord{Content: "ctx"}}); err != nil {
		t.Fatal(err)
	}
	store := &deletedAtShutdown{Memory: mem, watching: make(chan struct{})}
	srv, tools := serveTools(t, store)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	w, err := tools.WatchSession(ctx, &toolsdv1.WatchSessionRequest{SessionId: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Recv(); err != nil {
		t.Fatalf("WatchSession(s).Recv() = %v", err)
	}
	<-store.watching
	srv.StopWatches()
	m, err := w.Recv()
	if status.Code(err) != codes.NotFound || reason(err) != "SESSION_DELETED" {
		t.Errorf("WatchSession(s) of a session deleted as shutdown stopped it: Recv() = %v, %v; want NotFound (SESSION_DELETED)", m.GetEvent().GetSeq(), err)
	}
}

// watchEnds is a store that reports each Watch that returned: the store's subscription
// is released then.
type watchEnds struct {
	session.Store
	ended chan error
}

func (w *watchEnds) Watch(ctx context.Context, id string, from uint64, fn func(session.Event) error) error {
	err := w.Store.Watch(ctx, id, from, fn)
	w.ended <- err
	return err
}

// rpcEnds is a stats handler that reports each RPC's end, which gRPC sees only after
// the handler and its interceptors (metrics, logging) returned.
type rpcEnds chan struct{}

func (rpcEnds) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context   { return ctx }
func (rpcEnds) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (rpcEnds) HandleConn(context.Context, stats.ConnStats)                       {}
func (e rpcEnds) HandleRPC(_ context.Context, s stats.RPCStats) {
	if _, ok := s.(*stats.End); ok {
		e <- struct{}{}
	}
}

// watchedSession is a store holding session "s" of n events of 4 KiB, each Watch of
// which reports its end.
func watchedSession(t *testing.T, n int) *watchEnds {
	t.Helper()
	mem := session.NewMemory()
	t.Cleanup(func() { _ = mem.Close() })
	evs := make([]session.Event, n)
	for i := range evs {
		evs[i] = session.Event{Type: session.TypeUserMessage, Message: &session.MessageRecord{Content: strings.Repeat("x", 4<<10)}}
	}
	if _, err := mem.Append(t.Context(), "s", evs...); err != nil {
		t.Fatal(err)
	}
	return &watchEnds{Store: mem, ended: make(chan error, 1)}
}

// serveWatch is [serveDeps] over store with the given write timeout. Sends are timed by
// clock, if not nil.
func serveWatch(t *testing.T, store session.Store, writeTimeout time.Duration, clock streamgate.Clock) (tools toolsdv1.ToolServiceClient, reg *prometheus.Registry, ends rpcEnds) {
	t.Helper()
	return serveDeps(t, server.Deps{Sessions: store, Limits: server.Limits{WriteTimeout: writeTimeout}, SendClock: clock})
}

// serveDeps runs the ToolService over deps through toolsd's gRPC server (its metrics in
// reg), for a client with fixed 64 KiB flow control windows; ends reports the end of
// each RPC.
func serveDeps(t *testing.T, deps server.Deps) (tools toolsdv1.ToolServiceClient, reg *prometheus.Registry, ends rpcEnds) {
	t.Helper()
	return serveConfig(t, server.GRPCConfig{}, deps)
}

// serveConfig is [serveDeps] with gc's other settings (authentication, say).
func serveConfig(t *testing.T, gc server.GRPCConfig, deps server.Deps) (tools toolsdv1.ToolServiceClient, reg *prometheus.Registry, ends rpcEnds) {
	t.Helper()
	return serveConfigCreds(t, gc, deps, insecure.NewCredentials())
}

// serveConfigCreds is serveConfig with the client's transport credentials (gc.Creds
// are the server's).
func serveConfigCreds(t *testing.T, gc server.GRPCConfig, deps server.Deps, creds credentials.TransportCredentials) (tools toolsdv1.ToolServiceClient, reg *prometheus.Registry, ends rpcEnds) {
	t.Helper()
	return serveServer(t, gc, server.New(deps), creds)
}

// serveServer is serveConfigCreds for a server the test holds (to stop its watches,
// say).
func serveServer(t *testing.T, gc server.GRPCConfig, srv *server.Server, creds credentials.TransportCredentials) (tools toolsdv1.ToolServiceClient, reg *prometheus.Registry, ends rpcEnds) {
	t.Helper()
	reg, ends = prometheus.NewRegistry(), make(rpcEnds, 1)
	gc.Metrics, gc.StatsHandler, gc.MaxRecvMsgSize, gc.MaxConcurrentStreams = reg, ends, 1<<20, 10
	g, metrics := server.NewGRPCServer(gc)
	toolsdv1.RegisterToolServiceServer(g, srv)
	metrics.InitializeMetrics(g)
	conn := serveBufconn(t, g, grpc.WithTransportCredentials(creds),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	return toolsdv1.NewToolServiceClient(conn), reg, ends
}

// TestWatcherThatStopsReadingIsCutOff: a watcher that stopped reading held its handler
// and its store watch for as long as it kept the stream open: WatchSession had no write
// timeout. Like a batch's client, it is now cut off once a Send waits past
// limits.write_timeout (ResourceExhausted, SLOW_CLIENT), its store watch is released,
// and the RPC is counted with that code.
func TestWatcherThatStopsReadingIsCutOff(t *testing.T) {
	const n = 200 // 800 KiB, far more than the client's window and the stream's write quota
	store := watchedSession(t, n)
	tools, reg, ends := serveWatch(t, store, 50*time.Millisecond, nil)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	w, err := tools.WatchSession(ctx, &toolsdv1.WatchSessionRequest{SessionId: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Recv(); err != nil { // the watch is running; the client reads no more
		t.Fatalf("WatchSession(s).Recv() = %v", err)
	}
	select {
	case err := <-store.ended:
		t.Logf("the store's watch ended with %v", err)
	case <-time.After(30 * time.Second): // a safety net: the cut comes after a write timeout or two
		t.Fatal("the store's watch still runs 30s after its client stopped reading, want it released once the client is cut off")
	}
	<-ends // the handler returned
	if got := rpcCount(t, reg, "WatchSession", "ResourceExhausted"); got != 1 {
		t.Errorf("grpc_server_handled_total{grpc_method=WatchSession,grpc_code=ResourceExhausted} = %v, want 1", got)
	}
	assertCutOffAfter(t, "WatchSession", 1, n, func() (uint64, error) {
		m, err := w.Recv()
		return m.GetEvent().GetSeq(), err
	})
}

// TestWatcherThatReadsSlowlyIsNotCutOff: a watcher that keeps reading, though the
// replay takes it longer than the write timeout, gets every event: the write timeout
// is how long a Send may wait, not how long the replay may take. The Sends are timed
// by a clock that moves only as the client reads: the server's checks run every
// (real) millisecond, but however slow the machine, no Send waits longer on that clock
// than the client takes to read the messages on their way before it.
func TestWatcherThatReadsSlowlyIsNotCutOff(t *testing.T) {
	// 400 × 4 KiB through a 64 KiB window. Before a Send returns, the client can read at
	// most the messages ahead of it, within the stream's write quota (64 KiB) and the
	// client's window (64 KiB): about 32, far fewer than the 100 that make a write
	// timeout on the clock. The replay takes the clock 4 write timeouts.
	const (
		n       = 400
		timeout = time.Millisecond
		step    = timeout / 100
	)
	var now atomic.Int64
	now.Store(1)
	store := watchedSession(t, n)
	tools, _, _ := serveWatch(t, store, timeout, now.Load)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	w, err := tools.WatchSession(ctx, &toolsdv1.WatchSessionRequest{SessionId: "s"})
	if err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= n; seq++ {
		m, err := w.Recv()
		if err != nil {
			t.Fatalf("WatchSession(s).Recv() after seq %d = %v, want every event", seq-1, err)
		}
		if got := m.GetEvent().GetSeq(); got != seq {
			t.Fatalf("WatchSession(s) sent seq %d, want %d", got, seq)
		}
		now.Add(int64(step))
	}
	cancel()
	if err := <-store.ended; !errors.Is(err, context.Canceled) {
		t.Errorf("the store's watch ended with %v, want the client's cancel", err)
	}
}

// rpcCount is grpc_server_handled_total for method and code in reg.
func rpcCount(t *testing.T, reg *prometheus.Registry, method, code string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "grpc_server_handled_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			if l["grpc_method"] == method && l["grpc_code"] == code {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// TestReaderThatStopsReadingIsCutOff: ReadSession had no write timeout either, so a
// reader that stopped reading held its handler for as long as it kept the stream open.
// It is cut off as a watcher is (ResourceExhausted, SLOW_CLIENT), and the RPC is
// counted with that code.
func TestReaderThatStopsReadingIsCutOff(t *testing.T) {
	const n = 200 // 800 KiB, far more than the client's window and the stream's write quota
	store := watchedSession(t, n)
	tools, reg, ends := serveWatch(t, store, 50*time.Millisecond, nil)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	r, err := tools.ReadSession(ctx, &toolsdv1.ReadSessionRequest{SessionId: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Recv(); err != nil { // the read is running; the client reads no more
		t.Fatalf("ReadSession(s).Recv() = %v", err)
	}
	select {
	case <-ends: // the handler returned
	case <-time.After(30 * time.Second): // a safety net: the cut comes after a write timeout or two
		t.Fatal("ReadSession still runs 30s after its client stopped reading, want it cut off")
	}
	if got := rpcCount(t, reg, "ReadSession", "ResourceExhausted"); got != 1 {
		t.Errorf("grpc_server_handled_total{grpc_method=ReadSession,grpc_code=ResourceExhausted} = %v, want 1", got)
	}
	assertCutOffAfter(t, "ReadSession", 1, n, func() (uint64, error) {
		m, err := r.Recv()
		return m.GetEvent().GetSeq(), err
	})
}

// assertCutOffAfter reads what a client cut off for not reading still gets after the
// event with seq read: the events that follow it in order, fewer than all n, then
// ResourceExhausted (SLOW_CLIENT).
func assertCutOffAfter(t *testing.T, rpc string, read, n uint64, recv func() (uint64, error)) {
	t.Helper()
	for seq := read + 1; ; seq++ {
		got, err := recv()
		if err != nil {
			if status.Code(err) != codes.ResourceExhausted || reason(err) != "SLOW_CLIENT" {
				t.Errorf("%s(s).Recv() = %v, want ResourceExhausted (SLOW_CLIENT)", rpc, err)
			}
			if seq > n {
				t.Errorf("the cut-off %s client got all %d events", rpc, n)
			}
			return
		}
		if got != seq {
			t.Fatalf("%s(s) sent seq %d, want %d", rpc, got, seq)
		}
	}
}
