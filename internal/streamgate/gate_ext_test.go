package streamgate_test

import (
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/toolsd/toolsd/internal/streamgate"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestShutdownWaitsForHandlersAndRefusesNewOnes(t *testing.T) {
	g := streamgate.New()
	if !g.Enter() {
		t.Fatal("Enter() on an open gate = false")
	}
	if g.Closing() {
		t.Fatal("Closing() before Shutdown = true")
	}
	left := make(chan struct{})
	go func() {
		<-g.Quit() // the handler ends its stream once shutdown begins
		close(left)
		g.Leave()
	}()
	done := make(chan struct{})
	go func() {
		g.Shutdown("bye \xff")
		close(done)
	}()
	<-left
	<-done
	if !g.Closing() {
		t.Error("Closing() after Shutdown = false")
	}
	if g.Enter() {
		t.Error("Enter() after Shutdown = true, want refused")
	}
	if got := g.Reason(); got != "bye \uFFFD" {
		t.Errorf("Reason() = %q, want the reason as valid UTF-8", got)
	}
	g.Shutdown("again")
	if got := g.Reason(); got != "bye \uFFFD" {
		t.Errorf("Reason() after a second Shutdown = %q, want the first reason", got)
	}
}

func TestShutdownBlocksUntilLeave(t *testing.T) {
	g := streamgate.New()
	g.Enter()
	done := make(chan struct{})
	go func() {
		g.Shutdown("")
		close(done)
	}()
	select {
	case <-done:
		t.Fatal("Shutdown returned while a handler was still admitted")
	case <-time.After(20 * time.Millisecond):
	}
	g.Leave()
	<-done
}
