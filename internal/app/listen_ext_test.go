package app_test

import (
	"net"
	"testing"

	"go.uber.org/goleak"

	"github.com/toolsd/toolsd/internal/app"
	"github.com/toolsd/toolsd/internal/config"
)

// TestNewLeavesNothingRunningWhenAnAddressIsTaken: New builds the whole service before
// it binds its listeners, so when an address is taken (by another toolsd, say) it must
// stop what it built, the gRPC server's stream workers included, as well as close the
// session store: a program that reports the error and goes on, or tries another
// address, would otherwise keep them for good.
func TestNewLeavesNothingRunningWhenAnAddressIsTaken(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = taken.Close() }()
	for _, text := range []string{
		"listen: " + taken.Addr().String() + "\nadmin_listen: 127.0.0.1:0\nsession: {store: memory}\n",
		"listen: 127.0.0.1:0\nadmin_listen: " + taken.Addr().String() + "\nsession: {store: memory}\n",
	} {
		cfg, err := config.Parse([]byte(text), "test.yaml")
		if err != nil {
			t.Fatalf("config.Parse() = %v", err)
		}
		if a, err := app.New(cfg); err == nil {
			t.Fatalf("app.New() with %s taken = %v, nil; want an error", taken.Addr(), a)
		}
	}
}

// TestNewStopsTracingWhenItFails: with tracing on, New starts the tracer provider's
// span batcher before anything that can fail; a New that fails must stop it too.
func TestNewStopsTracingWhenItFails(t *testing.T) {
	t.Setenv("OTEL_TRACES_EXPORTER", "console")
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = taken.Close() }()
	text := "listen: " + taken.Addr().String() + "\nsession: {store: memory}\ntracing: {enabled: true}\n"
	cfg, err := config.Parse([]byte(text), "test.yaml")
	if err != nil {
		t.Fatalf("config.Parse() = %v", err)
	}
	if a, err := app.New(cfg); err == nil {
		t.Fatalf("app.New() with %s taken = %v, nil; want an error", taken.Addr(), a)
	}
}
