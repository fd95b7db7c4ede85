package registry_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/toolsd/toolsd/internal/registry"
	"github.com/toolsd/toolsd/internal/tool"
)

func TestPinning(t *testing.T) {
	changed := def("t")
	changed.Description = "changed"
	tests := map[string]struct {
		mode           registry.PinMode
		second         tool.Definition
		wantErr        error
		wantVisible    bool
		wantQuarantine bool
	}{
		"off accepts change":            {mode: registry.PinOff, second: changed, wantVisible: true},
		"refuse accepts same hash":      {mode: registry.PinRefuse, second: def("t"), wantVisible: true},
		"refuse rejects change":         {mode: registry.PinRefuse, second: changed, wantErr: registry.ErrPinMismatch},
		"quarantine accepts same hash":  {mode: registry.PinQuarantine, second: def("t"), wantVisible: true},
		"quarantine holds back changes": {mode: registry.PinQuarantine, second: changed, wantQuarantine: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := newRegistry(t, registry.WithPinning(tc.mode))
			mustRegister(t, r, "s", def("t"), "p")
			if err := r.Unregister("s", "t", "p"); err != nil {
				t.Fatal(err)
			}
			e, err := r.Register("s", tc.second, "p")
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("re-Register = %v, want %v", err, tc.wantErr)
			}
			_, lookErr := r.Lookup("s", "t")
			if (lookErr == nil) != tc.wantVisible {
				t.Errorf("Lookup after re-Register = %v, want visible=%v", lookErr, tc.wantVisible)
			}
			q := r.Quarantined()
			if (len(q) == 1 && q[0] == e) != tc.wantQuarantine {
				t.Errorf("Quarantined() = %v, want quarantined=%v", q, tc.wantQuarantine)
			}
		})
	}
}

func TestPinQuarantineApproval(t *testing.T) {
	r := newRegistry(t, registry.WithPinning(registry.PinQuarantine))
	mustRegister(t, r, "s", def("t"), "p")
	if err := r.Unregister("s", "t", ""); err != nil {
		t.Fatal(err)
	}
	changed := def("t")
	changed.Description = "changed"
	q := mustRegister(t, r, "s", changed, "p")

	if _, err := r.Register("s", def("t"), "p"); !errors.Is(err, registry.ErrAlreadyExists) {
		t.Fatalf("Register while quarantined = %v, want ErrAlreadyExists", err)
	}
	if err := r.ApproveQuarantined("s", "nope", ""); !errors.Is(err, registry.ErrNotQuarantined) {
		t.Errorf("ApproveQuarantined(nope) = %v, want ErrNotQuarantined", err)
	}
	if !r.IsQuarantined(q) {
		t.Error("IsQuarantined(changed registration) = false")
	}
	if pinned, ok := r.PinnedHash("s", "t"); !ok || pinned == q.Hash() {
		t.Errorf("PinnedHash = %q, %v; want the first definition's hash", pinned, ok)
	}
	if err := r.ApproveQuarantined("s", "t", "not-"+q.Hash()); !errors.Is(err, registry.ErrPinMismatch) {
		t.Errorf("ApproveQuarantined(another hash) = %v, want ErrPinMismatch", err)
	}
	if err := r.ApproveQuarantined("s", "t", q.Hash()); err != nil {
		t.Fatalf("ApproveQuarantined = %v", err)
	}
	if r.IsQuarantined(q) {
		t.Error("IsQuarantined(approved registration) = true")
	}
	if pinned, _ := r.PinnedHash("s", "t"); pinned != q.Hash() {
		t.Errorf("PinnedHash after approval = %q, want the approved hash", pinned)
	}
	if got, err := r.Lookup("s", "t"); err != nil || got != q {
		t.Fatalf("Lookup after approval = %v, %v, want the approved entry", got, err)
	}
	if len(r.Quarantined()) != 0 {
		t.Errorf("Quarantined() not empty after approval")
	}
	// The approved hash replaced the pin: the old definition is now the change.
	if err := r.Unregister("s", "t", ""); err != nil {
		t.Fatal(err)
	}
	mustRegister(t, r, "s", def("t"), "p")
	if len(r.Quarantined()) != 1 {
		t.Errorf("old definition after approval was not quarantined")
	}
}

func TestPinsAreScoped(t *testing.T) {
	r := newRegistry(t, registry.WithPinning(registry.PinRefuse))
	mustRegister(t, r, "a", def("t"), "")
	changed := def("t")
	changed.Description = "changed"
	mustRegister(t, r, "b", changed, "")
}

func TestQuarantinedRemovedWithOwner(t *testing.T) {
	r := newRegistry(t, registry.WithPinning(registry.PinQuarantine))
	mustRegister(t, r, "s", def("t"), "p")
	r.RemoveOwner("p")
	changed := def("t")
	changed.Description = "changed"
	mustRegister(t, r, "s", changed, "p")
	if got := r.RemoveOwner("p"); len(got) != 1 || len(r.Quarantined()) != 0 {
		t.Errorf("RemoveOwner = %d entries, quarantine %d, want 1, 0", len(got), len(r.Quarantined()))
	}
}

// TestPinsRoundTrip: Pins returns what WithPins needs to start another registry with
// the same pins, each tenant's in their order of recency; the generation moves when a
// pin is added or changes, not when a registration only confirms one.
func TestPinsRoundTrip(t *testing.T) {
	r := newRegistry(t, registry.WithPinning(registry.PinQuarantine))
	mustRegister(t, r, "b", def("t1"), "p")
	mustRegister(t, r, "a", def("t2"), "p")
	mustRegister(t, r, "b", def("t3"), "p")
	pins, gen := r.Pins()
	if gen != 3 {
		t.Errorf("generation after three pins = %d, want 3", gen)
	}
	var got []string
	for _, p := range pins {
		got = append(got, p.Scope+"/"+p.Name)
	}
	if want := []string{"a/t2", "b/t1", "b/t3"}; !slices.Equal(got, want) {
		t.Errorf("Pins() = %v, want %v (roots in order, oldest first)", got, want)
	}
	if err := r.Unregister("b", "t1", "p"); err != nil {
		t.Fatal(err)
	}
	mustRegister(t, r, "b", def("t1"), "p") // the pinned hash again
	if g := r.PinGeneration(); g != gen {
		t.Errorf("generation after a registration matching its pin = %d, want %d", g, gen)
	}

	again := newRegistry(t, registry.WithPinning(registry.PinRefuse), registry.WithPins(pins))
	changed := def("t3")
	changed.Description = "changed"
	if _, err := again.Register("b", changed, "p"); !errors.Is(err, registry.ErrPinMismatch) {
		t.Errorf("Register(changed) in a registry started with the pins = %v, want ErrPinMismatch", err)
	}
	if restored, _ := again.Pins(); !slices.Equal(restored, pins) {
		t.Errorf("Pins() of the restarted registry = %v, want %v", restored, pins)
	}
	if p, _ := newRegistry(t, registry.WithPins(pins)).Pins(); p != nil {
		t.Errorf("Pins() with pinning off = %v, want none", p)
	}
}

// TestPinRefusalsLogNothingAtInfo: a provider that registers a changed tool again and
// again is refused each time, and the registry writes no line at info or above for it:
// its caller logs the refusal (the broker, bounded per stream) or returns it, and the
// error it logs names the tool, its scope and both hashes.
func TestPinRefusalsLogNothingAtInfo(t *testing.T) {
	observed, logs := observer.New(zap.InfoLevel)
	r := registry.New(registry.WithLogger(zap.New(observed)), registry.WithPinning(registry.PinRefuse))
	first := mustRegister(t, r, "s", def("t"), "p")
	if err := r.Unregister("s", "t", "p"); err != nil {
		t.Fatal(err)
	}
	changed := def("t")
	changed.Description = "changed"
	for range 100 {
		_, err := r.Register("s", changed, "p")
		if !errors.Is(err, registry.ErrPinMismatch) {
			t.Fatalf("Register(changed) = %v, want ErrPinMismatch", err)
		}
		if msg := err.Error(); !strings.Contains(msg, first.Hash()) || !strings.Contains(msg, `"s"`) || !strings.Contains(msg, `"t"`) {
			t.Fatalf("Register(changed) = %q, want the tool, its scope and the pinned hash %s named", msg, first.Hash())
		}
	}
	if n := logs.Len(); n != 0 {
		t.Errorf("%d lines at info or above for 100 refused registrations, want 0: %v", n, logs.All()[0].Message)
	}
}

// TestQuarantineWarnsOncePerDefinition: a provider that reconnects again and again with
// the same changed tool has it quarantined each time, and the registry warns the first
// time only (the repeats at debug); another changed definition, or the same tool
// changed in another scope, is warned about anew, and so is a change against a pin an
// approval moved.
func TestQuarantineWarnsOncePerDefinition(t *testing.T) {
	observed, logs := observer.New(zap.DebugLevel)
	r := registry.New(registry.WithLogger(zap.New(observed)), registry.WithPinning(registry.PinQuarantine))
	for _, scope := range []string{"s", "s2"} {
		mustRegister(t, r, scope, def("t"), "p")
	}
	r.RemoveOwner("p")
	changed, other := def("t"), def("t")
	changed.Description, other.Description = "changed", "changed again"
	reconnect := func(scope string, d tool.Definition, times int) *registry.Entry {
		t.Helper()
		var e *registry.Entry
		for range times {
			e = mustRegister(t, r, scope, d, "p")
			if !r.IsQuarantined(e) {
				t.Fatalf("Register(%q, %q) was not quarantined", scope, d.Description)
			}
			r.RemoveOwner("p")
		}
		return e
	}
	warned := func() []string {
		var out []string
		for _, l := range logs.FilterLevelExact(zap.WarnLevel).FilterMessageSnippet("tool quarantined").All() {
			out = append(out, l.ContextMap()["scope"].(string)+":"+l.ContextMap()["hash"].(string))
		}
		return out
	}

	c := reconnect("s", changed, 100)
	o := reconnect("s", other, 3)
	reconnect("s2", changed, 3)
	want := []string{"s:" + c.Hash(), "s:" + o.Hash(), "s2:" + c.Hash()}
	if got := warned(); !slices.Equal(got, want) {
		t.Fatalf("%d warn lines after 106 quarantines, want %d: %v", len(got), len(want), want)
	}
	if n := logs.FilterLevelExact(zap.DebugLevel).FilterMessageSnippet("tool quarantined").Len(); n != 103 {
		t.Errorf("%d quarantines logged at debug, want the 103 repeats", n)
	}

	// Approved, the last changed definition is the pin: the old ones are now changes.
	mustRegister(t, r, "s", other, "p")
	if err := r.ApproveQuarantined("s", "t", o.Hash()); err != nil {
		t.Fatal(err)
	}
	r.RemoveOwner("p")
	back := reconnect("s", def("t"), 2)
	reconnect("s", changed, 2)
	want = append(want, "s:"+back.Hash(), "s:"+c.Hash())
	if got := warned(); !slices.Equal(got, want) {
		t.Errorf("warn lines after the approval = %v, want %v", got, want)
	}
}
