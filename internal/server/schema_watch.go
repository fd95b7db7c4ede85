package server

import (
	"context"
	"sync"

	"google.golang.org/grpc"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/registry"
	"github.com/toolsd/toolsd/internal/streamgate"
)

// WatchSchemas streams the fingerprint of what Schemas answers for the same scope and
// tool set: the current one first, then each new one after a registry change that
// changed it. It is authorized and checked as Schemas is. A scope's fingerprint is
// recomputed after each change in the scope or an ancestor, once for all its watchers;
// a watcher that is still sending when changes come sends only the latest after. A
// tool set's schemas are fixed at its resolution, so its watch sends one fingerprint
// and ends with NotFound (TOOL_SET_GONE) once the set has ended (see
// [registry.ToolSet.Ended]). A watch holds a place among Limits.MaxWatches and
// MaxWatchesPerIdentity, as WatchSession's does, and ends as one does: at
// [Server.StopWatches], when its credential expires, and when its reader is too slow.
func (s *Server) WatchSchemas(req *toolsdv1.WatchSchemasRequest, stream grpc.ServerStreamingServer[toolsdv1.WatchSchemasResponse]) error {
	ctx := stream.Context()
	ts, err := s.schemaSource(ctx, req.GetScope(), req.GetToolSetId())
	if err != nil {
		return toStatus(s.log, err)
	}
	// A place among limits.max_watches until the handler returns, however the watch
	// ends (a panic unwinds through the defer too).
	place, err := s.takeWatch(ctx, ActionReadTools)
	if err != nil {
		return toStatus(s.log, err)
	}
	defer s.watchSlots.give(place)
	// Again after: StopWatches may have run since the place was taken.
	if s.active.watches.Err() != nil {
		return toStatus(s.log, errShuttingDown)
	}
	watchCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer context.AfterFunc(s.active.watches, func() { cancel(errShuttingDown) })()
	defer s.cutAtExpiry(ctx, cancel)()
	var sends streamgate.SendWatch
	slow := s.cutSlowReader(stream, &sends, func() { cancel(errSlowClient) })
	defer slow.stop()
	send := func(fp string, n int) error {
		err := streamgate.Send(&sends, stream.Send, &toolsdv1.WatchSchemasResponse{Fingerprint: fp, ToolCount: uint32(n)})
		if err == nil && s.schemasSent != nil {
			s.schemasSent()
		}
		return err
	}
	if ts != nil {
		err = watchToolSet(watchCtx, ts, send)
	} else {
		err = s.watchScope(watchCtx, req.GetScope(), send)
	}
	// The status was written when the client was cut off: this one is for the RPC's
	// log line and metrics, as for a batch's (see streamFailure).
	if slow.stop() {
		return toStatus(s.log, errSlowClient)
	}
	return s.streamEnd(ctx, err)
}

// watchScope sends scope's fingerprint, then each new one, until ctx ends; it returns
// ctx's cause or send's error.
func (s *Server) watchScope(ctx context.Context, scope string, send func(fp string, n int) error) error {
	w := s.schemaWatches.join(scope)
	defer s.schemaWatches.leave(w)
	last, sent := "", false
	for {
		changed := w.next() // before the fingerprint: a change after it wakes the loop
		schemas, fp := s.reg.Schemas(scope)
		if !sent || fp != last {
			if err := send(fp, len(schemas)); err != nil {
				return err
			}
			last, sent = fp, true
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// watchToolSet sends ts's fingerprint, which never changes, and waits for the set to
// end, or ctx; it returns why the set ended, ctx's cause or send's error.
func watchToolSet(ctx context.Context, ts *registry.ToolSet, send func(fp string, n int) error) error {
	schemas, fp := ts.Schemas()
	if err := send(fp, len(schemas)); err != nil {
		return err
	}
	select {
	case <-ts.Ended():
		return ts.Err()
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// schemaWatches fans registry changes out to the WatchSchemas streams of scopes: one
// [scopeWatch] per watched scope, shared by its watchers, so that a change wakes only
// the watchers of the scopes it may affect. The registry computes a scope's projection
// once per change however many ask for it (see [registry.Registry.Schemas]), so a
// change costs one recomputation per watched scope it may affect. It is subscribed to the registry only while some scope is watched, and
// its callback only wakes watchers: it never waits for one, nor computes anything.
type schemaWatches struct {
	reg *registry.Registry

	mu     sync.Mutex
	scopes map[string]*scopeWatch
	// unsubscribe ends the registry subscription, held while scopes is not empty.
	unsubscribe func()
}

func newSchemaWatches(reg *registry.Registry) *schemaWatches {
	return &schemaWatches{reg: reg, scopes: make(map[string]*scopeWatch)}
}

// join adds a watcher of scope; it must leave once done.
func (h *schemaWatches) join(scope string) *scopeWatch {
	h.mu.Lock()
	defer h.mu.Unlock()
	w := h.scopes[scope]
	if w == nil {
		w = &scopeWatch{scope: scope, changed: make(chan struct{})}
		h.scopes[scope] = w
	}
	w.watchers++
	if h.unsubscribe == nil {
		h.unsubscribe = h.reg.Subscribe(h.changed)
	}
	return w
}

// leave removes a watcher of w's scope.
func (h *schemaWatches) leave(w *scopeWatch) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if w.watchers--; w.watchers > 0 {
		return
	}
	delete(h.scopes, w.scope)
	if len(h.scopes) == 0 {
		h.unsubscribe()
		h.unsubscribe = nil
	}
}

// changed wakes the watchers of every scope that c may have changed: c's scope and
// those below it.
func (h *schemaWatches) changed(c registry.Change) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for scope, w := range h.scopes {
		if registry.Within(scope, c.Scope) {
			w.bump()
		}
	}
}

// scopeWatch is one watched scope. A change that may affect it closes changed (and
// replaces it), waking every watcher.
type scopeWatch struct {
	scope    string
	watchers int // under schemaWatches.mu

	mu      sync.Mutex
	changed chan struct{} // closed at the next change
}

// bump records a change that may affect the scope and wakes its watchers.
func (w *scopeWatch) bump() {
	w.mu.Lock()
	defer w.mu.Unlock()
	close(w.changed)
	w.changed = make(chan struct{})
}

// next returns a channel closed at the next change.
func (w *scopeWatch) next() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.changed
}
