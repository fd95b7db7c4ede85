package app_test

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/app"
	"github.com/toolsd/toolsd/internal/session"
)

// stoppingStore is a session store that, once stop is set, fails every append the way
// a durable store does after a failed write: with session.ErrStopped, until restart.
type stoppingStore struct {
	session.Store
	stop *atomic.Bool
}

func (s stoppingStore) Append(ctx context.Context, sessionID string, events ...session.Event) ([]session.Event, error) {
	if s.stop.Load() {
		return nil, fmt.Errorf("%w: write /data/sessions.db: input/output error", session.ErrStopped)
	}
	return s.Store.Append(ctx, sessionID, events...)
}

// TestStoppedSessionStoreIsNotReady: a store stopped by a failed write refuses every
// batch until toolsd restarts, so /readyz and the gRPC health check must stop
// reporting ready, or a load balancer keeps sending agents to a toolsd that can only
// fail them.
func TestStoppedSessionStoreIsNotReady(t *testing.T) {
	var stop atomic.Bool
	e := start(t, "", app.WithSessionStoreWrapper(func(s session.Store) session.Store { return stoppingStore{s, &stop} }))
	runProvider(t, e.app.Addr(), echoTool())
	admin := e.app.AdminAddr()

	e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-ready", Calls: []*toolsdv1.ToolCall{call("c1", "echo", `{"text":"hi"}`)}}, batchOptions{})
	if code, _ := scrape(t, admin, "/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz with a working store = %d, want 200", code)
	}

	stop.Store(true)
	_, err := e.execute(t, &toolsdv1.Batch{SessionId: "s-stopped", Calls: []*toolsdv1.ToolCall{call("c1", "echo", `{"text":"hi"}`)}}, batchOptions{})
	if status.Code(err) != codes.Unavailable || reason(err) != "SESSION_STORE_STOPPED" {
		t.Fatalf("ExecuteBatch() with a stopped store = %v, want Unavailable with reason SESSION_STORE_STOPPED", err)
	}
	if code, body := scrape(t, admin, "/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz with a stopped store = %d %q, want 503", code, body)
	}
	if code, _ := scrape(t, admin, "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz with a stopped store = %d, want 200: the process is up", code)
	}
	if diff := cmp.Diff(allNamed(healthpb.HealthCheckResponse_NOT_SERVING), checkAll(t, e.conn)); diff != "" {
		t.Errorf("health Check() per service with a stopped store (-want +got):\n%s", diff)
	}
}

// selfStoppingStore is a durable store that stops by itself, as a retention sweep's
// failed commit stops one, with no request to fail: stop closes its Stopped channel.
type selfStoppingStore struct {
	session.Store
	stopped chan struct{}
}

func (s selfStoppingStore) Stopped() <-chan struct{} { return s.stopped }

func (s selfStoppingStore) StopCause() error {
	return fmt.Errorf("%w: retention: write /data/sessions.db: input/output error", session.ErrStopped)
}

// TestStoreStoppedInTheBackgroundIsNotReady: a store that stops in its own background
// work takes toolsd out of readiness without waiting for an agent's batch to fail.
func TestStoreStoppedInTheBackgroundIsNotReady(t *testing.T) {
	store := selfStoppingStore{stopped: make(chan struct{})}
	e := start(t, "", app.WithSessionStoreWrapper(func(s session.Store) session.Store {
		store.Store = s
		return store
	}))
	admin := e.app.AdminAddr()
	if code, _ := scrape(t, admin, "/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz with a working store = %d, want 200", code)
	}
	close(store.stopped)
	waitFor(t, "/readyz to answer 503 after the store stopped", func() bool {
		code, _ := scrape(t, admin, "/readyz")
		return code == http.StatusServiceUnavailable
	})
	if diff := cmp.Diff(allNamed(healthpb.HealthCheckResponse_NOT_SERVING), checkAll(t, e.conn)); diff != "" {
		t.Errorf("health Check() per service with a stopped store (-want +got):\n%s", diff)
	}
}
