package app

import (
	"context"
	"errors"

	"go.uber.org/zap"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/toolsd/toolsd/internal/session"
)

// storeWatch is the session store as toolsd uses it: the first error that says the
// store stopped after a failed write (session.ErrStopped) takes toolsd out of
// readiness for good. Such a store refuses every batch until toolsd restarts, so
// reporting ready would keep a load balancer sending agents to a toolsd that can
// only fail them.
type storeWatch struct {
	session.Store
	a *App
}

var (
	_ session.Store         = storeWatch{}
	_ session.AttachWatcher = storeWatch{}
)

func (w storeWatch) check(err error) error {
	if err != nil && errors.Is(err, session.ErrStopped) {
		w.a.storeStopped(err)
	}
	return err
}

func (w storeWatch) Append(ctx context.Context, sessionID string, events ...session.Event) ([]session.Event, error) {
	evs, err := w.Store.Append(ctx, sessionID, events...)
	return evs, w.check(err)
}

func (w storeWatch) Read(ctx context.Context, sessionID string, fromSeq uint64, limit int) ([]session.Event, error) {
	evs, err := w.Store.Read(ctx, sessionID, fromSeq, limit)
	return evs, w.check(err)
}

func (w storeWatch) Watch(ctx context.Context, sessionID string, fromSeq uint64, fn func(session.Event) error) error {
	return w.check(w.Store.Watch(ctx, sessionID, fromSeq, fn))
}

// WatchAttached forwards to the store's (see session.WatchAttached): WatchSession
// checks a session's epoch again once its watch is attached.
func (w storeWatch) WatchAttached(ctx context.Context, sessionID string, fromSeq uint64, attached func() error, fn func(session.Event) error) error {
	return w.check(session.WatchAttached(ctx, w.Store, sessionID, fromSeq, attached, fn))
}

func (w storeWatch) Summary(ctx context.Context, sessionID string) (session.Summary, error) {
	s, err := w.Store.Summary(ctx, sessionID)
	return s, w.check(err)
}

func (w storeWatch) ClaimOwner(ctx context.Context, sessionID string, o session.Owner) (session.Owner, error) {
	got, err := w.Store.ClaimOwner(ctx, sessionID, o)
	return got, w.check(err)
}

func (w storeWatch) Owner(ctx context.Context, sessionID string) (session.Owner, bool, error) {
	o, ok, err := w.Store.Owner(ctx, sessionID)
	return o, ok, w.check(err)
}

func (w storeWatch) Hold(ctx context.Context, sessionID string) (func(), error) {
	release, err := w.Store.Hold(ctx, sessionID)
	return release, w.check(err)
}

// watchStoreStop takes toolsd out of readiness when the session store stops by itself,
// in its own background work (a retention sweep's commit, say): no request's error
// would tell storeWatch, and /readyz would say ready until an agent's batch failed.
func (a *App) watchStoreStop(ctx context.Context) {
	select {
	case <-a.stopper.Stopped():
		a.storeStopped(a.stopper.StopCause())
	case <-ctx.Done():
	}
}

// storeStopped takes toolsd out of readiness once its session store stopped: /readyz
// answers 503 and the gRPC health check NOT_SERVING until the restart the store asks
// for. /healthz still answers: the process is up.
func (a *App) storeStopped(err error) {
	if !a.stopped.CompareAndSwap(false, true) {
		return
	}
	a.log.Error("session store stopped: toolsd is not ready until it restarts", zap.Error(err))
	if a.health != nil {
		a.setServing(healthpb.HealthCheckResponse_NOT_SERVING)
	}
}

// setServing sets the health status of the whole server and of each toolsd service
// (healthNames) to st: a probe naming a service sees what one naming none sees. The
// drain's health.Server.Shutdown sets them all NOT_SERVING at once, for good.
func (a *App) setServing(st healthpb.HealthCheckResponse_ServingStatus) {
	for _, name := range a.healthNames {
		a.health.SetServingStatus(name, st)
	}
}

// ready reports whether toolsd accepts batches: health SERVING (not draining) and the
// session store not stopped.
func (a *App) ready(ctx context.Context) bool {
	if a.stopped.Load() {
		return false
	}
	resp, err := a.health.Check(ctx, &healthpb.HealthCheckRequest{})
	return err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING
}
