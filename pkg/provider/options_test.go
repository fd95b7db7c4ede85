package provider

import (
	"context"
	"math"
	"net"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// TestWithBackoff: the delay never shrinks as it grows (a maximum below the minimum is
// the minimum), and a maximum of 0 keeps the default.
func TestWithBackoff(t *testing.T) {
	for _, tc := range []struct {
		minDelay, maxDelay, wantMin, wantMax time.Duration
	}{
		{time.Second, 5 * time.Second, time.Second, 5 * time.Second},
		{20 * time.Second, 5 * time.Second, 20 * time.Second, 20 * time.Second},
		{time.Second, 0, time.Second, DefaultMaxBackoff},
		{0, time.Minute, DefaultMinBackoff, time.Minute},
	} {
		p := New("p", WithBackoff(tc.minDelay, tc.maxDelay))
		if p.opts.backoffMin != tc.wantMin || p.opts.backoffMax != tc.wantMax {
			t.Errorf("WithBackoff(%v, %v): min %v, max %v; want %v, %v", tc.minDelay, tc.maxDelay,
				p.opts.backoffMin, p.opts.backoffMax, tc.wantMin, tc.wantMax)
		}
	}
}

// TestWithKeepalive: an interval of 0 or less turns the pings off, and a timeout of 0
// or less keeps the default.
func TestWithKeepalive(t *testing.T) {
	for _, tc := range []struct {
		interval, timeout, wantTime, wantTimeout time.Duration
	}{
		{30 * time.Second, 2 * time.Second, 30 * time.Second, 2 * time.Second},
		{0, time.Second, 0, time.Second},
		{-time.Second, 0, 0, DefaultKeepaliveTimeout},
		{time.Minute, -time.Second, time.Minute, DefaultKeepaliveTimeout},
	} {
		p := New("p", WithKeepalive(tc.interval, tc.timeout))
		if p.opts.keepTime != tc.wantTime || p.opts.keepTimeout != tc.wantTimeout {
			t.Errorf("WithKeepalive(%v, %v): interval %v, timeout %v; want %v, %v", tc.interval, tc.timeout,
				p.opts.keepTime, p.opts.keepTimeout, tc.wantTime, tc.wantTimeout)
		}
	}
}

// TestDefaultLoggerWarns: a provider given no logger, or a nil one (also after another
// WithLogger), logs its warnings and errors (to standard error), not its info.
func TestDefaultLoggerWarns(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	for name, p := range map[string]*Provider{
		"New(p)":                                 New("p"),
		"New(p, WithLogger(l), WithLogger(nil))": New("p", WithLogger(zap.New(core)), WithLogger(nil)),
	} {
		if !p.log.Core().Enabled(zap.WarnLevel) || p.log.Core().Enabled(zap.InfoLevel) {
			t.Errorf("%s: logs warnings %v, info %v; want warnings only", name,
				p.log.Core().Enabled(zap.WarnLevel), p.log.Core().Enabled(zap.InfoLevel))
		}
	}
	if n := logs.Len(); n != 0 {
		t.Errorf("WithLogger(l), WithLogger(nil): %d entries logged to l, want none", n)
	}
}

// TestBackoffGrowsWithoutOverflow: the reconnect delay doubles up to its maximum, also
// when the maximum is near the largest duration, where doubling overflowed to a
// negative delay and the jitter's random draw panicked.
func TestBackoffGrowsWithoutOverflow(t *testing.T) {
	const most = time.Duration(math.MaxInt64)
	for _, tc := range []struct{ d, limit, want time.Duration }{
		{time.Second, time.Minute, 2 * time.Second},
		{40 * time.Second, time.Minute, time.Minute},
		{most/2 + 1, most, most},
		{most, most, most},
	} {
		got := grow(tc.d, tc.limit)
		if got != tc.want {
			t.Errorf("grow(%v, %v) = %v, want %v", tc.d, tc.limit, got, tc.want)
		}
		if w := jitter(got); w < got/2 || w > got {
			t.Errorf("jitter(%v) = %v, want within [d/2, d]", got, w)
		}
	}
}

// TestUnreachableToolsdIsNotAnEndedStream: a provider that cannot open a session (toolsd
// not listening) says so as it retries, where it said "toolsd stream ended", as if a
// session had been open.
func TestUnreachableToolsdIsNotAnEndedStream(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	core, logs := observer.New(zap.WarnLevel)
	p := New("p", WithLogger(zap.New(core)), WithBackoff(time.Millisecond, time.Millisecond))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx, addr) }()
	for logs.Len() == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run() = %v", err)
	}
	if got := logs.All()[0].Message; got != "no toolsd session; retrying" {
		t.Errorf("first warning = %q, want %q", got, "no toolsd session; retrying")
	}
}
