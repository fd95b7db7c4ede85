package provider

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
)

// Run connects to toolsd at target (a gRPC target such as "127.0.0.1:50151"), says
// hello, registers every tool and serves calls. When the stream fails it reconnects
// with exponential backoff and jitter and registers everything again; the backoff
// starts over after a stream that lasted at least its maximum delay. It returns nil
// when ctx ends, once every running handler has returned or the shutdown grace
// ([WithShutdownGrace]) is over: the handlers' contexts end with ctx, the stream stays
// open for their results, and a handler still running after the grace is left running
// while the stream's close fails its call (PROVIDER_GONE). It returns an error only
// when gRPC refuses the dial options (per-RPC credentials that need TLS given without
// it, say), and [ErrRunning] when the provider is already running: a target that
// cannot be reached, resolved or even parsed is retried as a toolsd that is down is,
// each attempt logged.
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
	if p.opts.keepTime > 0 {
		// Pings go only while a stream is open, which is always but between
		// reconnects: a server that refuses pings without a stream (gRPC's default
		// policy) is sent none.
		opts = append(opts, grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: p.opts.keepTime, Timeout: p.opts.keepTimeout}))
	}
	opts = append(opts, p.opts.dial...)
	conn, err := grpc.NewClient(target, opts...)
	if err != nil {
		return fmt.Errorf("provider: dial %s: %w", target, err)
	}
	defer func() { _ = conn.Close() }()
	defer p.wg.Wait()
	grace, stop := graceAfter(ctx, p.opts.grace)
	defer stop()
	defer p.awaitHandlers(grace)

	delay := p.opts.backoffMin
	for {
		began := time.Now()
		welcomed, err := p.serve(ctx, grace, conn)
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
		if welcomed {
			p.log.Warn("toolsd stream ended; reconnecting", zap.Error(err), zap.Duration("backoff", wait))
		} else {
			// toolsd unreachable, or it refused or never answered the hello: err says which.
			p.log.Warn("no toolsd session; retrying", zap.Error(err), zap.Duration("backoff", wait))
		}
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
// (nil is returned). Before it returns, the running handlers get the shutdown grace
// ([WithShutdownGrace]) to return, counted from ctx's end (or the stream's); one still
// running after it is left running, as with [Provider.Run].
func (p *Provider) Serve(ctx context.Context, conn grpc.ClientConnInterface) error {
	if !p.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer p.running.Store(false)
	defer p.wg.Wait()
	grace, stop := graceAfter(ctx, p.opts.grace)
	defer stop()
	_, err := p.serve(ctx, grace, conn)
	if ctx.Err() == nil {
		// The stream ended by itself: the grace counts from now.
		var cancel context.CancelFunc
		grace, cancel = context.WithTimeout(context.WithoutCancel(ctx), p.opts.grace)
		defer cancel()
	}
	p.awaitHandlers(grace)
	return err
}

// graceAfter returns a context that ends d after ctx ends, and a function that ends it
// at once and releases its timer.
func graceAfter(ctx context.Context, d time.Duration) (context.Context, func()) {
	g, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var (
		mu      sync.Mutex
		timer   *time.Timer
		stopped bool
	)
	stopAfter := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			timer = time.AfterFunc(d, cancel)
		}
	})
	return g, func() {
		stopAfter()
		mu.Lock()
		stopped = true
		if timer != nil {
			timer.Stop()
		}
		mu.Unlock()
		cancel()
	}
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
