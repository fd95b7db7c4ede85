package server

import (
	"context"
	"sync"
)

// batches tracks running ExecuteBatch calls so shutdown can wait for them and, past
// its deadline, abort them (their calls still commit ABORTED results to the log).
type batches struct {
	mu      sync.Mutex
	running int
	idle    chan struct{} // closed while running == 0
	abort   context.Context
	cancel  context.CancelCauseFunc
	// watches ends every WatchSession stream: they never end on their own, and an open
	// one would hold the gRPC server's GracefulStop until its fallback timer.
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

// StopWatches ends every WatchSession stream, and refuses new ones, with Unavailable
// (SHUTTING_DOWN). Shutdown calls it once the batches are done, so watchers see the
// results of the drain before they are cut off.
func (s *Server) StopWatches() { s.active.stopWatch(errShuttingDown) }
