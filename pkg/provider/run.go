package provider

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
)

// Run connects to toolsd at target (a gRPC target such as "127.0.0.1:50151"), says
// hello, registers every tool and serves calls. When the stream fails it reconnects
// with exponential backoff and jitter and registers everything again; the backoff
// starts over after a stream that lasted at least its maximum delay. It returns nil
// when ctx ends, after every running handler has returned. It returns an error only
// when the gRPC client cannot be created (an invalid target or dial options), and
// [ErrRunning] when the provider is already running.
func (p *Provider) Run(ctx context.Context, target string) error {
	if !p.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer p.running.Store(false)
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		// gRPC dials a connection again after its own backoff, which grows to two
		// minutes: after toolsd was down a while, the streams reopened every
		// backoffMax would fail at once until then. The connection follows the
		// provider's backoff instead.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: backoff.Config{BaseDelay: p.opts.backoffMin, Multiplier: 2, Jitter: 0.2, MaxDelay: p.opts.backoffMax},
			// gRPC's default: a slow handshake is not cut short.
			MinConnectTimeout: 20 * time.Second,
		}),
	}
	if p.opts.streamWindow != 0 && p.opts.connWindow != 0 {
		opts = append(opts, grpc.WithInitialWindowSize(p.opts.streamWindow), grpc.WithInitialConnWindowSize(p.opts.connWindow))
	}
	opts = append(opts, p.opts.dial...)
	conn, err := grpc.NewClient(target, opts...)
	if err != nil {
		return fmt.Errorf("provider: dial %s: %w", target, err)
	}
	defer func() { _ = conn.Close() }()
	defer p.wg.Wait()

	delay := p.opts.backoffMin
	for {
		began := time.Now()
		welcomed, err := p.serve(ctx, conn)
		if ctx.Err() != nil {
			return nil
		}
		// Only a stream that lasted resets the backoff: one that toolsd ends right after
		// its welcome (say, for a message it cannot receive) would otherwise be
		// reopened, and end again, every backoffMin.
		if welcomed && time.Since(began) >= p.opts.backoffMax {
			delay = p.opts.backoffMin
		}
		wait := jitter(delay)
		p.log.Warn("toolsd stream ended; reconnecting", zap.Error(err), zap.Duration("backoff", wait))
		if !sleep(ctx, wait) {
			return nil
		}
		delay = grow(delay, p.opts.backoffMax)
	}
}

// grow doubles d up to limit, without overflowing.
func grow(d, limit time.Duration) time.Duration {
	if d > limit/2 {
		return limit
	}
	return 2 * d
}

// Serve runs a single session on an existing connection, without reconnecting: hello,
// registration, then calls until the stream ends (its error is returned) or ctx ends
// (nil is returned). Every running handler has returned when Serve returns.
func (p *Provider) Serve(ctx context.Context, conn grpc.ClientConnInterface) error {
	if !p.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer p.running.Store(false)
	defer p.wg.Wait()
	_, err := p.serve(ctx, conn)
	return err
}

// jitter returns a delay in [d/2, d].
func jitter(d time.Duration) time.Duration {
	half := d / 2
	return half + rand.N(d-half+1)
}

// sleep waits d; false means ctx ended first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
