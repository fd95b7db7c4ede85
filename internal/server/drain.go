package server

import (
	"context"
	"sync"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// batches tracks running ExecuteBatch calls so shutdown can wait for them and, past
// its deadline, abort them (their calls still commit ABORTED results to the log).
type batches struct {
	mu      sync.Mutex
	running int
	idle    chan struct{} // closed while running == 0
	abort   context.Context
	cancel  context.CancelCauseFunc
	// watches ends every WatchSession and WatchSchemas stream: they never end on their
	// own, and an open one would hold the gRPC server's GracefulStop until its fallback
	// timer.
	watches   context.Context
	stopWatch context.CancelCauseFunc
	// drained ends with Drain: streams still waiting for their batch are refused.
	drained context.Context
	drain   context.CancelCauseFunc
}

func newBatches() *batches {
	b := &batches{idle: make(chan struct{})}
	close(b.idle)
	b.abort, b.cancel = context.WithCancelCause(context.Background())
	b.watches, b.stopWatch = context.WithCancelCause(context.Background())
	b.drained, b.drain = context.WithCancelCause(context.Background())
	return b
}

func (b *batches) start() {
	b.mu.Lock()
	if b.running == 0 {
		b.idle = make(chan struct{})
	}
	b.running++
	b.mu.Unlock()
}

func (b *batches) done() {
	b.mu.Lock()
	b.running--
	if b.running == 0 {
		close(b.idle)
	}
	b.mu.Unlock()
}

// Running reports how many batches are executing.
func (s *Server) Running() int {
	s.active.mu.Lock()
	defer s.active.mu.Unlock()
	return s.active.running
}

// WaitIdle blocks until no batch is running or ctx ends.
func (s *Server) WaitIdle(ctx context.Context) error {
	s.active.mu.Lock()
	idle := s.active.idle
	s.active.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// AbortRunning cancels every running batch: started calls are cancelled at their
// providers and drain, unstarted calls get ABORTED_BEFORE_DISPATCH; all are logged.
func (s *Server) AbortRunning() { s.active.cancel(errShuttingDown) }

// StopWatches ends every WatchSession and WatchSchemas stream, health Watch stream (see [Server.Health])
// and server reflection stream (see [Server.RegisterReflection]), and refuses new ones, with Unavailable (SHUTTING_DOWN). Shutdown calls it once the batches are done, so watchers see the
// results of the drain before they are cut off.
func (s *Server) StopWatches() { s.active.stopWatch(errShuttingDown) }

// Health wraps the gRPC health service h so that its Watch streams end with
// [Server.StopWatches], with Unavailable (SHUTTING_DOWN), as WatchSession's do: gRPC's
// client-side health checking keeps one open per connection, and an open one would hold
// the gRPC server's GracefulStop until its fallback timer, then be cut off. A watch sees
// the status shutdown left (NOT_SERVING) before it ends. A Watch that would take toolsd
// past Limits.MaxHealthWatches open health watches is refused with ResourceExhausted
// (LIMIT_EXCEEDED) before it sends anything; a watch holds its place until it ends.
// Check is not limited: it ends once it has answered.
func (s *Server) Health(h healthpb.HealthServer) healthpb.HealthServer {
	return healthWatches{HealthServer: h, s: s}
}

type healthWatches struct {
	healthpb.HealthServer
	s *Server
}

func (w healthWatches) Watch(req *healthpb.HealthCheckRequest, stream healthpb.Health_WatchServer) error {
	watches := w.s.active.watches
	if watches.Err() != nil {
		return toStatus(w.s.log, errShuttingDown)
	}
	// A place among limits.max_health_watches until the handler returns, however the
	// watch ends (a panic unwinds through the defer too). No caller is confined: the
	// health service needs no credentials.
	place, err := w.s.healthSlots.take(stream.Context(), true)
	if err != nil {
		return toStatus(w.s.log, err)
	}
	defer w.s.healthSlots.give(place)
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	defer context.AfterFunc(watches, cancel)()
	ws := &healthWatchStream{Health_WatchServer: stream, ctx: ctx, last: -1}
	err = w.HealthServer.Watch(req, ws)
	if watches.Err() == nil || stream.Context().Err() != nil {
		return err
	}
	// The watch may have ended before it sent the last change (shutdown's NOT_SERVING).
	if resp, cerr := w.Check(stream.Context(), req); cerr == nil && resp.GetStatus() != ws.last {
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
	return toStatus(w.s.log, errShuttingDown)
}

// healthWatchStream is a health Watch stream whose context also ends with shutdown; it
// remembers the last status sent.
type healthWatchStream struct {
	healthpb.Health_WatchServer
	ctx  context.Context
	last healthpb.HealthCheckResponse_ServingStatus
}

func (s *healthWatchStream) Context() context.Context { return s.ctx }

func (s *healthWatchStream) Send(m *healthpb.HealthCheckResponse) error {
	err := s.Health_WatchServer.Send(m)
	if err == nil {
		s.last = m.GetStatus()
	}
	return err
}
