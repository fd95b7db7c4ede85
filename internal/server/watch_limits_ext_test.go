package server_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/server"
	"github.com/toolsd/toolsd/internal/session"
)

// failingWatches is a store whose watches fail, once each is cued on fail.
type failingWatches struct {
	session.Store
	fail chan struct{}
}

var errWatchFailed = errors.New("server test: the store's watch failed")

func (f *failingWatches) Watch(ctx context.Context, id string, from uint64, fn func(session.Event) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	failed := make(chan struct{})
	go func() {
		select {
		case <-f.fail:
			close(failed)
			cancel()
		case <-ctx.Done():
		}
	}()
	err := f.Store.Watch(ctx, id, from, fn)
	select {
	case <-failed:
		return errWatchFailed
	default:
		return err
	}
}

// watchLimitEnv is a ToolService whose open watches are capped at one, and the means
// to end one each way a watch ends.
type watchLimitEnv struct {
	mem   *session.Memory
	store *failingWatches
	srv   *server.Server
	tools toolsdv1.ToolServiceClient
	ends  rpcEnds
	// now is the send clock, which stands still until rushing, and then moves an hour
	// at each reading: any Send under way then has waited past the write timeout.
	now     atomic.Int64
	rushing atomic.Bool

	mu      sync.Mutex
	refused []string
}

func newWatchLimitEnv(t *testing.T) *watchLimitEnv {
	t.Helper()
	e := &watchLimitEnv{mem: session.NewMemory(session.WithRetention(time.Hour, 0), session.WithSweepInterval(0))}
	t.Cleanup(func() { _ = e.mem.Close() })
	e.now.Store(1)
	e.store = &failingWatches{Store: e.mem, fail: make(chan struct{}, 1)}
	e.srv = server.New(server.Deps{Sessions: e.store, SendClock: e.sendClock,
		Limits: server.Limits{MaxWatches: 1, WriteTimeout: 10 * time.Millisecond},
		WatchRefused: func(limit string) {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.refused = append(e.refused, limit)
		}})
	e.tools, _, e.ends = serveServer(t, server.GRPCConfig{}, e.srv, insecure.NewCredentials())
	return e
}

func (e *watchLimitEnv) sendClock() int64 {
	if e.rushing.Load() {
		return e.now.Add(int64(time.Hour))
	}
	return e.now.Load()
}

// hold appends n events of size bytes to session id and watches it from seq 1 until
// the first arrives: the watch holds its place until cancel or its end.
func (e *watchLimitEnv) hold(t *testing.T, id string, n, size int) (toolsdv1.ToolService_WatchSessionClient, context.CancelFunc) {
	t.Helper()
	evs := make([]session.Event, n)
	for i := range evs {
		evs[i] = session.Event{Type: session.TypeUserMessage, Message: &session.MessageRecord{Content: strings.Repeat("x", size)}}
	}
	if _, err := e.mem.Append(t.Context(), id, evs...); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	w, err := e.tools.WatchSession(ctx, &toolsdv1.WatchSessionRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Recv(); err != nil {
		cancel()
		t.Fatalf("WatchSession(%s).Recv() = %v, want its first event: the watch accepted", id, err)
	}
	return w, cancel
}

// watchEnd opens a watch of session id, given an event first, and returns how its
// RPC ended, once its handler returned: nil for a watch accepted, which it cancels.
func (e *watchLimitEnv) watchEnd(t *testing.T, id string) error {
	t.Helper()
	if _, err := e.mem.Append(t.Context(), id, session.Event{Type: session.TypeUserMessage, Message: &session.MessageRecord{Content: "x"}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	w, err := e.tools.WatchSession(ctx, &toolsdv1.WatchSessionRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	_, err = w.Recv()
	cancel()
	<-e.ends
	return err
}

// mustRefuse checks that a watch opened now is refused for limits.max_watches.
func (e *watchLimitEnv) mustRefuse(t *testing.T, what string) {
	t.Helper()
	err := e.watchEnd(t, "over")
	if status.Code(err) != codes.ResourceExhausted || reason(err) != "LIMIT_EXCEEDED" || !strings.Contains(status.Convert(err).Message(), "(limits.max_watches)") {
		t.Errorf("a watch %s = %v, want ResourceExhausted (LIMIT_EXCEEDED) naming limits.max_watches", what, err)
	}
}

// endsWith reads w to its end, which must have code.
func endsWith(t *testing.T, w toolsdv1.ToolService_WatchSessionClient, what string, code codes.Code) {
	t.Helper()
	for {
		_, err := w.Recv()
		if err == nil {
			continue
		}
		if status.Code(err) != code {
			t.Errorf("a watch %s ended with %v, want %v", what, err, code)
		}
		return
	}
}

// TestWatchPlaceComesBackHoweverTheWatchEnds: an open watch holds its place among
// limits.max_watches, so a watch over it is refused (ResourceExhausted, LIMIT_EXCEEDED)
// and counted, until the watch ends, however it ends: its client cancels, retention
// deletes its session, its store fails, it is cut off for not reading, or shutdown
// stops it. The place comes back once: the next watch is accepted and the one after it
// refused again.
func TestWatchPlaceComesBackHoweverTheWatchEnds(t *testing.T) {
	e := newWatchLimitEnv(t)
	for _, way := range []struct {
		name     string
		big      bool // watches a session far larger than the client's window
		end      func(w toolsdv1.ToolService_WatchSessionClient, cancel context.CancelFunc)
		wantCode codes.Code
	}{
		{name: "cancelled", end: func(_ toolsdv1.ToolService_WatchSessionClient, cancel context.CancelFunc) { cancel() }, wantCode: codes.Canceled},
		{name: "deleted", end: func(toolsdv1.ToolService_WatchSessionClient, context.CancelFunc) {
			if _, err := e.mem.Sweep(time.Now().Add(48 * time.Hour)); err != nil {
				t.Fatal(err)
			}
		}, wantCode: codes.NotFound},
		{name: "failed", end: func(toolsdv1.ToolService_WatchSessionClient, context.CancelFunc) { e.store.fail <- struct{}{} }, wantCode: codes.Internal},
		// The send clock rushes past the write timeout while the replay waits on the
		// client, which reads no more.
		{name: "cut off", big: true, end: func(toolsdv1.ToolService_WatchSessionClient, context.CancelFunc) { e.rushing.Store(true) }, wantCode: codes.ResourceExhausted},
	} {
		n, size := 1, 16
		if way.big {
			n, size = 200, 4<<10 // 800 KiB, far more than the client's window
		}
		w, cancel := e.hold(t, "held-"+way.name, n, size)
		e.mustRefuse(t, "while one is open, before one is "+way.name)
		way.end(w, cancel)
		<-e.ends
		endsWith(t, w, way.name, way.wantCode)
		cancel()
		e.rushing.Store(false)
	}
	w, cancel := e.hold(t, "held-stopped", 1, 16)
	defer cancel()
	e.mustRefuse(t, "while one is open, before shutdown stops it")
	e.srv.StopWatches()
	<-e.ends
	endsWith(t, w, "stopped by shutdown", codes.Unavailable)
	// Refused for shutdown once past its place, not for the limit.
	if err := e.watchEnd(t, "after"); status.Code(err) != codes.Unavailable || reason(err) != "SHUTTING_DOWN" {
		t.Errorf("a watch after shutdown stopped the last = %v, want Unavailable (SHUTTING_DOWN): its place came back", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if want := []string{server.LimitMaxWatches, server.LimitMaxWatches, server.LimitMaxWatches, server.LimitMaxWatches, server.LimitMaxWatches}; !slices.Equal(e.refused, want) {
		t.Errorf("watches refused = %q, want %q", e.refused, want)
	}
}
