package server_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/toolsd/toolsd/internal/server"
)

// healthLimitEnv is a health service wrapped by a Server whose open health watches
// are capped at one.
type healthLimitEnv struct {
	srv    *server.Server
	health healthpb.HealthClient
	ends   rpcEnds

	mu      sync.Mutex
	refused []string
}

func newHealthLimitEnv(t *testing.T) *healthLimitEnv {
	t.Helper()
	e := &healthLimitEnv{ends: make(rpcEnds, 1)}
	e.srv = server.New(server.Deps{Limits: server.Limits{MaxHealthWatches: 1},
		WatchRefused: func(limit string) {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.refused = append(e.refused, limit)
		}})
	g, _ := server.NewGRPCServer(server.GRPCConfig{StatsHandler: e.ends, MaxConcurrentStreams: 10})
	h := health.NewServer()
	healthpb.RegisterHealthServer(g, e.srv.Health(h))
	e.health = healthpb.NewHealthClient(serveBufconn(t, g, grpc.WithTransportCredentials(insecure.NewCredentials())))
	return e
}

// watch opens a health Watch and reads its first message: nil and the stream for a
// watch accepted, which holds its place until cancel; the RPC's error, once its handler
// returned, for one refused.
func (e *healthLimitEnv) watch(t *testing.T) (healthpb.Health_WatchClient, context.CancelFunc, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	w, err := e.health.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if _, err := w.Recv(); err != nil {
		cancel()
		<-e.ends
		return nil, nil, err
	}
	return w, cancel, nil
}

// mustHold opens a health Watch that must be accepted.
func (e *healthLimitEnv) mustHold(t *testing.T, what string) (healthpb.Health_WatchClient, context.CancelFunc) {
	t.Helper()
	w, cancel, err := e.watch(t)
	if err != nil {
		t.Fatalf("a health Watch %s = %v, want it accepted", what, err)
	}
	return w, cancel
}

// mustRefuse checks that a health Watch opened now is refused for
// limits.max_health_watches.
func (e *healthLimitEnv) mustRefuse(t *testing.T, what string) {
	t.Helper()
	_, _, err := e.watch(t)
	if status.Code(err) != codes.ResourceExhausted || reason(err) != "LIMIT_EXCEEDED" || !strings.Contains(status.Convert(err).Message(), "(limits.max_health_watches)") {
		t.Errorf("a health Watch %s = %v, want ResourceExhausted (LIMIT_EXCEEDED) naming limits.max_health_watches", what, err)
	}
}

// TestHealthWatchPlaceComesBack: the health service needs no credentials, so its open
// Watch streams are capped overall by limits.max_health_watches: a Watch over it is
// refused (ResourceExhausted, LIMIT_EXCEEDED) and counted, while Check still answers.
// A watch's place comes back once when its client cancels it; shutdown's refusal
// comes before the limit's.
func TestHealthWatchPlaceComesBack(t *testing.T) {
	e := newHealthLimitEnv(t)
	_, cancel := e.mustHold(t, "first")
	e.mustRefuse(t, "while one is open")
	if _, err := e.health.Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("health Check() while the watches are at their limit = %v, want it answered", err)
	}
	<-e.ends
	cancel()
	<-e.ends
	w, cancel := e.mustHold(t, "once the first was cancelled")
	defer cancel()
	// Given back once: the limit holds again.
	e.mustRefuse(t, "while the second is open")

	e.srv.StopWatches()
	<-e.ends
	if _, err := w.Recv(); status.Code(err) != codes.Unavailable {
		t.Errorf("a health Watch stopped by shutdown ended with %v, want Unavailable", err)
	}
	if _, _, err := e.watch(t); status.Code(err) != codes.Unavailable || reason(err) != "SHUTTING_DOWN" {
		t.Errorf("a health Watch after shutdown = %v, want Unavailable (SHUTTING_DOWN)", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if want := []string{server.LimitMaxHealthWatches, server.LimitMaxHealthWatches}; !slices.Equal(e.refused, want) {
		t.Errorf("health watches refused = %q, want %q", e.refused, want)
	}
}
