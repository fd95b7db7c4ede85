package broker

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
	"github.com/toolsd/toolsd/internal/textcut"
)

// errShuttingDown refuses a stream once [Broker.Shutdown] has begun.
func errShuttingDown() error {
	return rpcerr.Error(codes.Unavailable, rpcerr.ShuttingDown, "broker: shutting down")
}

// maxHelloText bounds the provider name and version a stream keeps and logs.
const maxHelloText = 128

// Connect is the body of the ProviderService.Connect handler. The first message must be
// hello; the broker answers with the provider id. From then on the stream carries
// registrations, calls and results until the provider leaves, the stream breaks, the
// handler's context ends or [Broker.Shutdown] runs. However it ends, the provider's
// registrations are removed and its in-flight calls fail with PROVIDER_GONE before
// Connect returns.
func (b *Broker) Connect(stream toolsdv1.ProviderService_ConnectServer) error {
	if !b.gate.Enter() {
		return errShuttingDown()
	}
	defer b.gate.Leave()
	ctx := stream.Context()
	c := b.newConn(ctx, stream)
	recvErr := make(chan error, 1)
	// The receive loop belongs to this handler. It ends on a protocol error or when
	// Recv fails, which returning from this handler guarantees (gRPC then cancels the
	// stream).
	go c.receive(stream, recvErr)
	shutdown, err := b.supervise(ctx, c, recvErr)
	b.teardown(c, err, shutdown)
	return err
}

// supervise waits for the stream to end. It reports whether the end is a broker
// shutdown and the handler's return value.
//
// A provider that stops reading its stream would hold the send slot's holder in Send
// forever, and with it every call that waits for the slot: past SendTimeout (or with
// too many messages, or bytes, queued) the provider counts as hung and its stream ends
// (its calls get PROVIDER_GONE).
func (b *Broker) supervise(ctx context.Context, c *conn, recvErr <-chan error) (bool, error) {
	hello := time.NewTimer(b.limits.HelloTimeout)
	defer hello.Stop()
	stall := time.NewTicker(max(b.limits.SendTimeout/2, time.Millisecond))
	defer stall.Stop()
	welcomed, helloDue := c.welcomed, hello.C // nil once the welcome went out
	for {
		select {
		case <-welcomed:
			welcomed, helloDue = nil, nil
		case err := <-recvErr:
			return false, streamError(err)
		case <-ctx.Done():
			return false, status.FromContextError(ctx.Err()).Err()
		case <-b.gate.Quit():
			return true, nil
		case <-c.overflow:
			return false, rpcerr.Errorf(codes.Unavailable, rpcerr.SlowClient,
				"broker: provider stopped reading its stream: over %d MiB or %d messages wait to be sent", maxQueuedBytes>>20, c.maxQueued)
		case <-helloDue:
			if isClosed(welcomed) { // welcomed as the timer fired: select chose at random
				welcomed, helloDue = nil, nil
				continue
			}
			return false, rpcerr.Errorf(codes.DeadlineExceeded, rpcerr.HelloTimeout, "broker: no hello within %s", b.limits.HelloTimeout)
		case <-stall.C:
			if c.sends.Stalled(b.limits.SendTimeout) {
				return false, rpcerr.Errorf(codes.Unavailable, rpcerr.SlowClient,
					"broker: provider stopped reading its stream: a message waited over %s to be sent", b.limits.SendTimeout)
			}
		}
	}
}

// isClosed reports whether ch is closed, without waiting.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// streamError is the handler's result for a receive-loop error: a provider that closes
// its side ends cleanly.
func streamError(err error) error {
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// receive is the stream's only reader: the hello, then every message in order. It
// stops on a receive or protocol error, or once the teardown retired the conn.
func (c *conn) receive(stream toolsdv1.ProviderService_ConnectServer, recvErr chan<- error) {
	defer c.recoverReceive(recvErr)
	for first := true; ; first = false {
		m, err := stream.Recv()
		if err == nil {
			var live bool
			if live, err = c.step(m, first); !live {
				return
			}
		}
		if err != nil {
			recvErr <- err
			return
		}
	}
}

// recoverReceive ends the stream with INTERNAL when handling a message panicked: the
// receive loop runs on a goroutine of its own, and a panic there would end the process
// with every batch in it. A broken handler fails its provider's stream, as a broken
// pipeline stage fails only its call.
func (c *conn) recoverReceive(recvErr chan<- error) {
	p := recover()
	if p == nil {
		return
	}
	// Under the gate, as a handled message's lines: none follows the end of the handler.
	c.live.Do(func() {
		c.log.Error("handling a provider message panicked", zap.Any("panic", p), zap.Stack("stack"))
	})
	c.b.obs.Panicked()
	recvErr <- status.Error(codes.Internal, "broker: internal error")
}

// step processes one received message unless the conn is retired (live is false then).
func (c *conn) step(m *toolsdv1.ProviderServiceConnectRequest, first bool) (live bool, err error) {
	live = c.live.Do(func() {
		if first {
			err = c.b.hello(c, m)
		} else {
			err = c.b.handle(c, m)
		}
	})
	return live, err
}

// hello admits the stream: it records the provider, publishes the conn and welcomes it.
func (b *Broker) hello(c *conn, m *toolsdv1.ProviderServiceConnectRequest) error {
	h := m.GetHello()
	if h == nil {
		return rpcerr.Errorf(codes.InvalidArgument, rpcerr.BadRequest,
			"broker: the first message on a provider stream must be hello, got %s", messageKind(m))
	}
	// Kept and logged cut: the provider chooses them, bounded only by the message limit.
	c.name, c.version = textcut.Ellipsis(h.GetName(), maxHelloText), textcut.Ellipsis(h.GetVersion(), maxHelloText)
	c.maxInFlight = b.limits.MaxInFlightPerProvider
	if n := int64(h.GetMaxInFlight()); n > 0 && n < int64(c.maxInFlight) {
		c.maxInFlight = int(n)
	}
	c.connectedAt = time.Now()
	// Holding the send slot across attach and welcome puts the welcome first on the
	// stream, before any execute a call could send once the conn is published.
	if !c.lockSend(c.ctx) {
		return rpcerr.Error(codes.Unavailable, rpcerr.StreamClosing, "broker: stream is closing")
	}
	err := b.attach(c)
	if err == nil && c.sendClosed.Load() {
		err = rpcerr.Error(codes.Unavailable, rpcerr.StreamClosing, "broker: stream is closing")
	}
	if err == nil {
		err = c.write(&toolsdv1.ProviderServiceConnectResponse{Msg: &toolsdv1.ProviderServiceConnectResponse_Welcome{
			Welcome: &toolsdv1.ProviderWelcome{ProviderId: c.id, MaxResultBytes: uint64(b.limits.MaxResultBytes)},
		}})
	}
	c.unlockSend()
	if err != nil {
		return err
	}
	close(c.welcomed)
	c.log.Info("provider connected", zap.String("provider", c.name), zap.String("version", c.version),
		zap.Int("max_in_flight", c.maxInFlight))
	return nil
}

// attach publishes c so calls can find it.
func (b *Broker) attach(c *conn) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.gate.Closing():
		return errShuttingDown()
	case c.isStopped():
		return rpcerr.Error(codes.Unavailable, rpcerr.StreamClosing, "broker: stream is closing")
	case len(b.conns) >= b.limits.MaxProviders:
		return rpcerr.Errorf(codes.ResourceExhausted, rpcerr.LimitExceeded, "broker: %d providers are connected, the limit", b.limits.MaxProviders)
	}
	b.conns[c.id] = c
	b.obs.ProviderConnected(1)
	return nil
}

// detach unpublishes c and reports whether it had been published.
func (b *Broker) detach(c *conn) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.conns[c.id] != c {
		return false
	}
	delete(b.conns, c.id)
	b.obs.ProviderConnected(-1)
	return true
}

// isWelcomed reports whether the welcome went out (the hello is done).
func (c *conn) isWelcomed() bool {
	select {
	case <-c.welcomed:
		return true
	default:
		return false
	}
}

func (c *conn) isStopped() bool {
	select {
	case <-c.quit:
		return true
	default:
		return false
	}
}

// teardown ends everything the stream owns: the goodbye on shutdown, sends,
// registrations, calls. The conn is stopped before it is detached, so attach cannot race it.
func (b *Broker) teardown(c *conn, cause error, shutdown bool) {
	c.stop()
	var goodbye *toolsdv1.ProviderServiceConnectResponse
	if shutdown {
		goodbye = &toolsdv1.ProviderServiceConnectResponse{Msg: &toolsdv1.ProviderServiceConnectResponse_Goodbye{
			Goodbye: &toolsdv1.ServerGoodbye{Reason: b.gate.Reason()},
		}}
	}
	// The loop sends only in the hello (the welcome, and what is queued behind it).
	// Until the welcome went out, a send that did not let closeSend in may be the
	// loop's own, which only the handler's return can end: waiting for the loop then
	// would deadlock. Once welcomed, the loop never waits on a send, so it is retired
	// even when another sender holds the slot.
	if c.closeSend(goodbye) || c.isWelcomed() {
		c.retire()
	} else {
		// Registrations are still fenced below.
		c.log.Warn("provider receive loop still busy at teardown")
	}
	c.quiet.Retire()
	c.closeRegistrations()
	// Detached before its tools are removed: a unary RegisterTool that lands after the
	// RemoveOwner finds the provider gone and removes its registration itself. The
	// tools are removed before the calls are failed: a call told PROVIDER_GONE may be
	// retried at once (an idempotent tool), and its retry's resolve must not find the
	// provider that is going away while another registers the tool.
	attached := b.detach(c)
	if attached {
		b.reg.RemoveOwner(c.id)
	}
	failed := c.failPending()
	if !attached {
		c.log.Debug("provider stream ended before welcome", zap.Error(cause))
		return
	}
	c.log.Info("provider disconnected", zap.Bool("shutdown", shutdown), zap.Int("failed_calls", failed), zap.Error(cause))
}
