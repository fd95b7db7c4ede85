package hook

import (
	"context"
	"errors"
	"io"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/rpcerr"
)

// Stream-level failures, as the hook sees them.
var (
	errShuttingDown         = rpcerr.Error(codes.Unavailable, rpcerr.ShuttingDown, "hook: toolsd is shutting down")
	errTooManyHooks         = errors.New("hook: too many hooks connected")
	errTooManyScopedHooks   = errors.New("hook: too many hooks confined to some scopes connected")
	errTooManyIdentityHooks = errors.New("hook: too many hooks of one identity connected")
)

// Connect is the body of the HookService.Connect handler. The first message must be
// hello (else InvalidArgument); the hub answers with welcome and from then on sends the
// hook a request for every call matching its subscriptions, until the hook leaves, the
// stream breaks, the handler's context ends or [Hub.Shutdown] runs. However it ends,
// the hook is unsubscribed and its pending requests fail before Connect returns.
func (h *Hub) Connect(stream toolsdv1.HookService_ConnectServer) error {
	if !h.gate.Enter() {
		return errShuttingDown
	}
	defer h.gate.Leave()
	ctx := stream.Context()
	var scopes Scopes
	if h.opts.filter != nil {
		var err error
		if scopes, err = h.opts.filter(ctx); err != nil {
			if _, ok := status.FromError(err); !ok {
				err = rpcerr.Error(codes.PermissionDenied, rpcerr.Permission, err.Error())
			}
			return err
		}
	}
	c := h.newConn(stream, scopes)
	// The receive loop belongs to this handler: Recv fails once it returns.
	go c.receive(stream.Recv)
	shutdown, err := h.serve(ctx, c)
	h.teardown(c, shutdown, err)
	return err
}

// serve admits the stream and waits for it to end. It reports whether the end is a hub
// shutdown, and the handler's return value.
func (h *Hub) serve(ctx context.Context, c *conn) (bool, error) {
	hello := time.NewTimer(h.opts.helloTimeout)
	defer hello.Stop()
	// A hook that stops reading would hold the writer in Send, and the queues full of
	// requests and results, until it left: past the send timeout it counts as stuck.
	stall := time.NewTicker(max(h.opts.sendTimeout/2, time.Millisecond))
	defer stall.Stop()
	helloCh, helloDue := c.helloCh, hello.C // nil once the hook is welcomed
	for {
		select {
		case hm := <-helloCh:
			helloCh, helloDue = nil, nil
			if err := h.welcome(c, hm); err != nil {
				return false, err
			}
		case <-c.gone:
			return false, streamError(c.deathCause())
		case <-ctx.Done():
			return false, status.FromContextError(ctx.Err()).Err()
		case <-h.gate.Quit():
			return true, nil
		case <-helloDue:
			if len(helloCh) == 0 { // else the hello came as the timer fired, and is taken next
				return false, rpcerr.Errorf(codes.DeadlineExceeded, rpcerr.HelloTimeout, "hook: no hello within %s", h.opts.helloTimeout)
			}
			helloDue = nil
		case <-stall.C:
			if c.sends.Stalled(h.opts.sendTimeout) {
				return false, rpcerr.Errorf(codes.Unavailable, rpcerr.SlowClient,
					"hook: stopped reading its stream: a message waited over %s to be sent", h.opts.sendTimeout)
			}
		}
	}
}

// welcome validates the hello, publishes the hook's subscriptions and starts the writer.
func (h *Hub) welcome(c *conn, hm *toolsdv1.HookHello) error {
	hl, err := parseHello(hm)
	if err != nil {
		return rpcerr.Error(codes.InvalidArgument, rpcerr.BadRequest, err.Error())
	}
	c.hello, c.connectedAt = hl, h.opts.now()
	// Subscribed before the welcome: a hook that has its welcome receives every
	// matching request. Requests wait in the queue until the writer starts, after the
	// welcome, which is therefore the first message.
	switch err := h.attach(c); {
	case errors.Is(err, errTooManyHooks):
		return rpcerr.Errorf(codes.ResourceExhausted, rpcerr.LimitExceeded, "hook: %d hooks are connected, the limit", h.opts.maxHooks)
	case errors.Is(err, errTooManyScopedHooks):
		return rpcerr.Errorf(codes.ResourceExhausted, rpcerr.LimitExceeded, "hook: %d hooks confined to some scopes are connected, the limit", h.opts.maxScoped)
	case errors.Is(err, errTooManyIdentityHooks):
		return rpcerr.Errorf(codes.ResourceExhausted, rpcerr.LimitExceeded, "hook: this identity has %d hooks connected, the limit", h.opts.maxPerID)
	case errors.Is(err, errGone):
		return streamError(c.deathCause())
	case err != nil:
		return err
	}
	w := &response{Msg: &toolsdv1.HookServiceConnectResponse_Welcome{Welcome: &toolsdv1.HookWelcome{HookId: c.id}}}
	if err := c.out.Send(w); err != nil {
		return streamError(err)
	}
	go c.write()
	c.started = true
	c.log.Info("hook connected", zap.String("hook", hl.name), zap.Bool("fail_open", hl.failOpen), zap.Int("subscriptions", len(hl.subs)))
	return nil
}

// teardown ends everything the stream owns: the subscriptions and the pending
// requests first, then the writer, which on shutdown sends the result notifications
// still queued and a goodbye, then the receive loop's and the writer's log lines. The
// pending requests fail before the goodbye is tried, so they never wait for a hook that
// stopped reading.
func (h *Hub) teardown(c *conn, shutdown bool, cause error) {
	if cause == nil {
		cause = errGone
	}
	farewell := shutdown && c.started
	c.end(cause, farewell)
	if shutdown {
		c.goodbye = &response{Msg: &toolsdv1.HookServiceConnectResponse_Goodbye{
			Goodbye: &toolsdv1.HookGoodbye{Reason: h.gate.Reason()},
		}}
	}
	close(c.quit)
	if farewell {
		// Let the writer send the queue and say goodbye, but not forever: a hook that
		// stopped reading must not stall shutdown. Returning from the handler unblocks
		// its Send; the notifications it has not taken by then are lost.
		t := time.NewTimer(goodbyeWait)
		select {
		case <-c.writerDone:
		case <-t.C:
			c.log.Warn("hook stream send blocked; closing without goodbye")
			c.lostOnDeath(c.takeNotes())
		}
		t.Stop()
	}
	c.retire()
	if c.started {
		c.log.Info("hook disconnected", zap.String("hook", c.hello.name), zap.Bool("shutdown", shutdown), zap.Error(c.deathCause()))
	}
}

// streamError is the handler's result for the error that ended the stream: a hook that
// closes its side ends cleanly; protocol errors are InvalidArgument.
func streamError(err error) error {
	switch {
	case err == nil, errors.Is(err, io.EOF):
		return nil
	case errors.Is(err, errProtocol):
		return rpcerr.Error(codes.InvalidArgument, rpcerr.BadRequest, err.Error())
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Error(codes.Internal, err.Error())
}
