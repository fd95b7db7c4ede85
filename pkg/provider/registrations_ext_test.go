package provider_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolsd/toolsd/internal/broker/brokertest"
	"github.com/toolsd/toolsd/internal/tool"
	"github.com/toolsd/toolsd/pkg/provider"
)

// waitRegistrations waits until p's Registrations are want, and fails with the last
// difference otherwise.
func waitRegistrations(t *testing.T, p *provider.Provider, what string, want []provider.Registration) {
	t.Helper()
	var diff string
	for deadline := time.Now().Add(waitTimeout); ; time.Sleep(5 * time.Millisecond) {
		if diff = cmp.Diff(want, p.Registrations()); diff == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Registrations() %s: (-want +got)\n%s", what, diff)
		}
	}
}

func noArgsTool(name string) provider.Tool {
	return provider.NewTool(name, name, func(context.Context, provider.Call, struct{}) (string, error) { return "", nil })
}

// TestRegistrationsFollowTheStream: Registrations reports each tool, in the order it was
// added, as toolsd last answered it on the current stream (registered, held back by
// pinning, refused with toolsd's code and message), and as pending before the first
// answer and from the stream's end until the next stream's answers.
func TestRegistrationsFollowTheStream(t *testing.T) {
	reg := brokertest.NewRegistrar()
	reg.Hold = func(_ string, def tool.Definition) bool { return def.Name == "held" }
	reg.Reject = func(_ string, def tool.Definition) error {
		if def.Name == "bad" {
			return errors.New("registry: invalid schema: nope")
		}
		return nil
	}
	first := brokertest.Start(t, reg, takenAsAlreadyExists)
	p := newProvider(t, provider.WithScope("tenant-a"))
	p.Add(echoTool(), noArgsTool("held"), noArgsTool("bad"))
	pending := []provider.Registration{
		{Tool: "echo", Scope: "tenant-a"}, {Tool: "held", Scope: "tenant-a"}, {Tool: "bad", Scope: "tenant-a"},
	}
	if diff := cmp.Diff(pending, p.Registrations()); diff != "" {
		t.Errorf("Registrations() before Run: (-want +got)\n%s", diff)
	}
	answered := []provider.Registration{
		{Tool: "echo", Scope: "tenant-a", State: provider.Registered},
		{Tool: "held", Scope: "tenant-a", State: provider.Quarantined},
		{Tool: "bad", Scope: "tenant-a", State: provider.Refused, Code: "INVALID_ARGUMENT", Message: "registry: invalid schema: nope"},
	}
	run(t, p, first.Addr)
	wait(t, p.Ready(), "registration")
	if diff := cmp.Diff(answered, p.Registrations()); diff != "" {
		t.Errorf("Registrations() once ready: (-want +got)\n%s", diff)
	}

	first.Stop()
	waitRegistrations(t, p, "once the stream ended", pending)
	brokertest.StartAt(t, first.Addr, reg, takenAsAlreadyExists)
	waitRegistrations(t, p, "on the next stream", answered)
}

// TestTakenNameIsPendingUntilGivenUp: a tool whose name another stream holds stays
// pending, with toolsd's ALREADY_EXISTS, while the provider registers it again, and is
// refused once the retake window is over.
func TestTakenNameIsPendingUntilGivenUp(t *testing.T) {
	reg := brokertest.NewRegistrar()
	srv := brokertest.Start(t, reg, takenAsAlreadyExists)
	owner := newProvider(t)
	owner.Add(echoTool())
	run(t, owner, srv.Addr)
	wait(t, owner.Ready(), "the owner's registration")

	// The retakes are timed by a fake clock that moves only as the test fires them: on
	// the system clock, a test slower than the window between the first answer and its
	// look saw the name already given up.
	clock := newRetakeClock()
	p := newProvider(t, provider.WithRetakeWindow(300*time.Millisecond), provider.WithRetakeClock(clock.Now, clock.NewTimer))
	p.Add(echoTool())
	run(t, p, srv.Addr)
	wait(t, p.Ready(), "the refused registration's answer")
	got := p.Registrations()
	if len(got) != 1 || got[0].State != provider.Pending || got[0].Code != "ALREADY_EXISTS" || got[0].Message == "" {
		t.Errorf("Registrations() while retaken = %+v, want echo pending with ALREADY_EXISTS and its message", got)
	}
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	recheck := time.NewTicker(5 * time.Millisecond)
	defer recheck.Stop()
	for {
		got = p.Registrations()
		if len(got) == 1 && got[0].State == provider.Refused {
			break
		}
		select {
		case <-clock.armed: // a retake waits: its delay passes at once, on the fake clock
			clock.FireDue()
		case <-recheck.C:
		case <-deadline.C:
			t.Fatalf("Registrations() = %+v, want echo refused once the retakes are given up", got)
		}
	}
	if got[0].Code != "ALREADY_EXISTS" {
		t.Errorf("given-up Registrations()[0].Code = %q, want ALREADY_EXISTS", got[0].Code)
	}
}
