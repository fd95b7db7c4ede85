package registry_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolsd/toolsd/internal/registry"
	"github.com/toolsd/toolsd/internal/tool"
)

func TestToolSetAdmission(t *testing.T) {
	r := newRegistry(t)
	mustRegister(t, r, "", def("always"), "")
	mustRegister(t, r, "", withCondition("anthropic_only", `model.provider == "anthropic"`), "")
	mustRegister(t, r, "", withCondition("after_schema", `session.succeeded("get_db_schema")`), "")
	mustRegister(t, r, "p", withCondition("preset_cond", `step >= 1`), "")

	tests := map[string]struct {
		scope string
		env   registry.ConditionEnv
		want  []string
	}{
		"nothing admitted": {scope: "p", env: registry.ConditionEnv{Model: registry.ModelSelection{Provider: "openai"}},
			want: []string{"always"}},
		"model admits": {scope: "p", env: registry.ConditionEnv{Model: registry.ModelSelection{Provider: "anthropic"}},
			want: []string{"always", "anthropic_only"}},
		"history and step admit": {scope: "p/a", env: registry.ConditionEnv{Step: 1, History: history{succeeded: map[string]bool{"get_db_schema": true}}},
			want: []string{"after_schema", "always", "preset_cond"}},
		"scope outside preset": {scope: "q", env: registry.ConditionEnv{Step: 1}, want: []string{"always"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ts, err := r.ResolveToolSet(t.Context(), tc.scope, tc.env)
			if err != nil {
				t.Fatalf("ResolveToolSet = %v", err)
			}
			schemas, fp := ts.Schemas()
			var names []string
			for _, s := range schemas {
				names = append(names, s.Name)
			}
			if diff := cmp.Diff(tc.want, names); diff != "" {
				t.Errorf("ToolSet.Schemas mismatch (-want +got):\n%s", diff)
			}
			for _, n := range []string{"always", "anthropic_only", "after_schema", "preset_cond", "never"} {
				_, err := ts.Lookup(n)
				if admitted := contains(tc.want, n); admitted != (err == nil) {
					t.Errorf("ToolSet.Lookup(%q) = %v, want admitted=%v", n, err, admitted)
				}
				if err != nil && !errors.Is(err, tool.ErrUnknownTool) {
					t.Errorf("ToolSet.Lookup(%q) = %v, want ErrUnknownTool", n, err)
				}
			}
			if ts.Scope() != tc.scope || ts.ID() == "" {
				t.Errorf("ToolSet scope, id = %q, %q", ts.Scope(), ts.ID())
			}
			if got, err := r.ToolSet(ts.ID()); err != nil || got != ts {
				t.Errorf("ToolSet(%s) = %v, %v, want the set", ts.ID(), got, err)
			}
			_, regFP := r.Schemas(tc.scope)
			if (fp == regFP) != (len(tc.want) == 1) {
				t.Errorf("set fingerprint equal to Schemas fingerprint = %v, want %v", fp == regFP, len(tc.want) == 1)
			}
		})
	}
}

// TestToolSetReadsHistory: a set reads the session's history when a condition its
// resolution evaluated calls session.called or session.succeeded anywhere, whether or
// not that evaluation reached the call, and whether or not the tool was admitted.
func TestToolSetReadsHistory(t *testing.T) {
	tests := map[string]struct {
		conds []string
		want  bool
	}{
		"no conditional tools":     {want: false},
		"no history":               {conds: []string{`model.provider == "openai"`, `step >= 1 && scope.startsWith("p")`}, want: false},
		"session.called":           {conds: []string{`!session.called("send_email")`}, want: true},
		"session.succeeded":        {conds: []string{`step > 0`, `session.succeeded("x")`}, want: true},
		"not reached":              {conds: []string{`step > 100 && session.called("x")`}, want: true},
		"within a macro":           {conds: []string{`["a", "b"].exists(n, session.called(n))`}, want: true},
		"a name that says session": {conds: []string{`model.model == "session.called"`}, want: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := newRegistry(t)
			mustRegister(t, r, "", def("always"), "")
			for i, c := range tc.conds {
				mustRegister(t, r, "", withCondition("cond_"+string(rune('a'+i)), c), "")
			}
			ts, err := r.ResolveToolSet(t.Context(), "p", registry.ConditionEnv{Step: 1})
			if err != nil {
				t.Fatalf("ResolveToolSet = %v", err)
			}
			if got := ts.ReadsHistory(); got != tc.want {
				t.Errorf("ToolSet.ReadsHistory() = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestToolSetUnknownNameMatchesRegistry(t *testing.T) {
	r := newRegistry(t)
	mustRegister(t, r, "", withCondition("c", "false"), "")
	ts, err := r.ResolveToolSet(t.Context(), "", registry.ConditionEnv{})
	if err != nil {
		t.Fatal(err)
	}
	_, unadmitted := ts.Lookup("c")
	_, never := newRegistry(t).Lookup("", "c")
	if unadmitted == nil || unadmitted.Error() != never.Error() {
		t.Errorf("ToolSet.Lookup(unadmitted) = %v, want %q", unadmitted, never)
	}
}

func TestToolSetInvalidation(t *testing.T) {
	tests := map[string]struct {
		change  func(t *testing.T, r *registry.Registry, ts *registry.ToolSet, restrictions []string)
		gone    bool
		newName string // a name the change makes visible; never admitted by the old set
	}{
		"release": {change: func(t *testing.T, r *registry.Registry, ts *registry.ToolSet, restrictions []string) {
			if err := r.ReleaseToolSet(ts.ID()); err != nil {
				t.Fatalf("ReleaseToolSet = %v", err)
			}
		}, gone: true},
		"restriction on the set's scope": {change: func(t *testing.T, r *registry.Registry, ts *registry.ToolSet, restrictions []string) {
			mustRestrict(t, r, "p/a", nil, []string{"unrelated"})
		}, gone: true},
		"restriction on an ancestor": {change: func(t *testing.T, r *registry.Registry, ts *registry.ToolSet, restrictions []string) {
			mustRestrict(t, r, "p", nil, []string{"unrelated"})
		}, gone: true},
		"restriction on a sibling": {change: func(t *testing.T, r *registry.Registry, ts *registry.ToolSet, restrictions []string) {
			mustRestrict(t, r, "p/b", nil, []string{"g"})
		}},
		"restriction on a descendant": {change: func(t *testing.T, r *registry.Registry, ts *registry.ToolSet, restrictions []string) {
			mustRestrict(t, r, "p/a/x", nil, []string{"g"})
		}},
		"admitted tool unregistered": {change: func(t *testing.T, r *registry.Registry, ts *registry.ToolSet, restrictions []string) {
			if err := r.Unregister("", "g", ""); err != nil {
				t.Fatal(err)
			}
		}, gone: true},
		"admitted conditional unregistered": {change: func(t *testing.T, r *registry.Registry, ts *registry.ToolSet, restrictions []string) {
			if err := r.Unregister("p", "c", ""); err != nil {
				t.Fatal(err)
			}
		}, gone: true},
		"admitted tool shadowed (replaced) in the set's scope": {change: func(t *testing.T, r *registry.Registry, ts *registry.ToolSet, restrictions []string) {
			mustRegister(t, r, "p/a", def("g"), "")
		}, gone: true},
		"admitted tool shadowed in an intermediate scope": {change: func(t *testing.T, r *registry.Registry, ts *registry.ToolSet, restrictions []string) {
			mustRegister(t, r, "p", def("g"), "")
		}, gone: true},
		"shadow below the set's scope": {change: func(t *testing.T, r *registry.Registry, ts *registry.ToolSet, restrictions []string) {
			mustRegister(t, r, "p/a/x", def("g"), "")
		}},
		"owner removed": {change: func(t *testing.T, r *registry.Registry, ts *registry.ToolSet, restrictions []string) {
			r.RemoveOwner("prov")
		}, gone: true},
		"unrelated registration": {change: func(t *testing.T, r *registry.Registry, ts *registry.ToolSet, restrictions []string) {
			mustRegister(t, r, "p/a", def("fresh"), "")
		}, newName: "fresh"},
		"unadmitted conditional replaced": {change: func(t *testing.T, r *registry.Registry, ts *registry.ToolSet, restrictions []string) {
			if err := r.Unregister("p", "no", ""); err != nil {
				t.Fatal(err)
			}
			mustRegister(t, r, "p", def("no"), "")
		}, newName: "no"},
		"restriction lifted": {change: func(t *testing.T, r *registry.Registry, ts *registry.ToolSet, restrictions []string) {
			// "hidden" is masked at resolution time; lifting is not an invalidation.
			for _, id := range restrictions {
				if err := r.Unrestrict(id); err != nil {
					t.Fatal(err)
				}
			}
		}, newName: "hidden"},
		"approved quarantine of admitted name": {change: func(t *testing.T, r *registry.Registry, ts *registry.ToolSet, restrictions []string) {
			if err := r.Unregister("p", "q", ""); err != nil {
				t.Fatal(err)
			}
			d := def("q")
			d.Description = "changed"
			mustRegister(t, r, "p", d, "")
			if err := r.ApproveQuarantined("p", "q", ""); err != nil {
				t.Fatal(err)
			}
		}, gone: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := newRegistry(t, registry.WithPinning(registry.PinQuarantine))
			mustRegister(t, r, "", def("g"), "prov")
			mustRegister(t, r, "", def("hidden"), "")
			mustRegister(t, r, "p", withCondition("c", "true"), "")
			mustRegister(t, r, "p", withCondition("no", "false"), "")
			mustRegister(t, r, "p", def("q"), "")
			restrictions := []string{mustRestrict(t, r, "p/a/x/y", nil, []string{"g"}), mustRestrict(t, r, "p", nil, []string{"hidden"})}
			ts, err := r.ResolveToolSet(t.Context(), "p/a", registry.ConditionEnv{})
			if err != nil {
				t.Fatal(err)
			}
			tc.change(t, r, ts, restrictions)
			for _, n := range []string{"g", "c", "q"} {
				_, err := ts.Lookup(n)
				if tc.gone && !errors.Is(err, tool.ErrToolSetGone) || !tc.gone && err != nil {
					t.Errorf("ToolSet.Lookup(%q) after change = %v, want gone=%v", n, err, tc.gone)
				}
			}
			_, err = r.ToolSet(ts.ID())
			if tc.gone != errors.Is(err, tool.ErrToolSetGone) {
				t.Errorf("ToolSet(id) after change = %v, want gone=%v", err, tc.gone)
			}
			if tc.newName != "" {
				if _, err := ts.Lookup(tc.newName); !errors.Is(err, tool.ErrUnknownTool) {
					t.Errorf("ToolSet.Lookup(%q) = %v, want ErrUnknownTool (sets are pinned)", tc.newName, err)
				}
			}
		})
	}
}

func TestToolSetRelease(t *testing.T) {
	r := newRegistry(t)
	ts, err := r.ResolveToolSet(t.Context(), "a", registry.ConditionEnv{})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.ReleaseToolSet(ts.ID()); err != nil {
		t.Fatalf("ReleaseToolSet = %v", err)
	}
	if err := r.ReleaseToolSet(ts.ID()); !errors.Is(err, tool.ErrToolSetGone) {
		t.Errorf("second ReleaseToolSet = %v, want ErrToolSetGone", err)
	}
	if _, err := r.ToolSet("ts_unknown"); !errors.Is(err, tool.ErrToolSetGone) {
		t.Errorf("ToolSet(unknown) = %v, want ErrToolSetGone", err)
	}
	_, err = ts.Lookup("x")
	if want := `registry: tool set "` + ts.ID() + `" was released`; err == nil || err.Error() != want {
		t.Errorf("Lookup on a released set = %v, want %q", err, want)
	}
}

func TestToolSetIdleSweep(t *testing.T) {
	clock := newFakeClock()
	r := newRegistry(t, registry.WithClock(clock.Now), registry.WithToolSetIdle(time.Minute))
	mustRegister(t, r, "", def("t"), "")
	busy, err := r.ResolveToolSet(t.Context(), "", registry.ConditionEnv{})
	if err != nil {
		t.Fatal(err)
	}
	idle, err := r.ResolveToolSet(t.Context(), "", registry.ConditionEnv{})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		clock.Advance(40 * time.Second)
		if _, err := busy.Lookup("t"); err != nil {
			t.Fatalf("busy.Lookup = %v, want nil while in use", err)
		}
	}
	if n := r.SweepToolSets(clock.Now()); n != 1 {
		t.Errorf("SweepToolSets = %d, want 1 (only the idle set)", n)
	}
	if _, err := idle.Lookup("t"); !errors.Is(err, tool.ErrToolSetGone) {
		t.Errorf("idle.Lookup after sweep = %v, want ErrToolSetGone", err)
	}
	if _, err := r.ToolSet(idle.ID()); !errors.Is(err, tool.ErrToolSetGone) {
		t.Errorf("ToolSet(idle) after sweep = %v, want ErrToolSetGone", err)
	}
	if _, err := r.ToolSet(busy.ID()); err != nil {
		t.Errorf("ToolSet(busy) = %v, want nil", err)
	}
	// Expiry is also noticed without a sweep.
	clock.Advance(2 * time.Minute)
	if _, err := busy.Lookup("t"); !errors.Is(err, tool.ErrToolSetGone) {
		t.Errorf("busy.Lookup after 2m idle = %v, want ErrToolSetGone", err)
	}
	if n := r.SweepToolSets(clock.Now()); n != 1 {
		t.Errorf("second SweepToolSets = %d, want 1", n)
	}
}

func TestToolSetLimit(t *testing.T) {
	r := newRegistry(t, registry.WithLimits(registry.Limits{MaxToolSets: 2}))
	for range 2 {
		if _, err := r.ResolveToolSet(t.Context(), "", registry.ConditionEnv{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.ResolveToolSet(t.Context(), "", registry.ConditionEnv{}); !errors.Is(err, registry.ErrLimit) {
		t.Errorf("third ResolveToolSet = %v, want ErrLimit", err)
	}
}

// TestToolSetLimitPerOwner: one owner's live sets are capped apart from the others', a
// released or invalidated set frees its owner's place, and sets without an owner count
// only against the global cap.
func TestToolSetLimitPerOwner(t *testing.T) {
	r := newRegistry(t, registry.WithLimits(registry.Limits{MaxToolSets: 10, MaxToolSetsPerOwner: 2}))
	resolve := func(owner string) (*registry.ToolSet, error) {
		return r.ResolveToolSet(t.Context(), "a", registry.ConditionEnv{Owner: owner})
	}
	var sets []*registry.ToolSet
	for range 2 {
		ts, err := resolve("tenant-a")
		if err != nil {
			t.Fatal(err)
		}
		sets = append(sets, ts)
	}
	if _, err := resolve("tenant-a"); !errors.Is(err, registry.ErrLimit) {
		t.Errorf("tenant-a's third ResolveToolSet = %v, want ErrLimit", err)
	}
	for _, owner := range []string{"tenant-b", "", "", ""} {
		if _, err := resolve(owner); err != nil {
			t.Errorf("ResolveToolSet for %q beside tenant-a's = %v", owner, err)
		}
	}
	if err := r.ReleaseToolSet(sets[0].ID()); err != nil {
		t.Fatal(err)
	}
	if _, err := resolve("tenant-a"); err != nil {
		t.Errorf("tenant-a's ResolveToolSet after releasing one = %v", err)
	}
	if _, err := r.Restrict("a", nil, []string{"x"}); err != nil { // invalidates every set of "a"
		t.Fatal(err)
	}
	if _, err := resolve("tenant-a"); err != nil {
		t.Errorf("tenant-a's ResolveToolSet after its sets were invalidated = %v", err)
	}
}

func TestToolSetInvalidScope(t *testing.T) {
	r := newRegistry(t)
	if _, err := r.ResolveToolSet(t.Context(), "/x", registry.ConditionEnv{}); !errors.Is(err, registry.ErrInvalidScope) {
		t.Errorf("ResolveToolSet(/x) = %v, want ErrInvalidScope", err)
	}
}

// TestToolSetByIDSaysWhyItIsGone: the server and the call resolver find a set by id, so
// that lookup must say why a set ended (the reason of its calls' ABORTED_BEFORE_DISPATCH
// results), not call a set that existed unknown.
func TestToolSetByIDSaysWhyItIsGone(t *testing.T) {
	r := newRegistry(t)
	mustRegister(t, r, "", def("g"), "")
	resolve := func() *registry.ToolSet {
		t.Helper()
		ts, err := r.ResolveToolSet(t.Context(), "a", registry.ConditionEnv{})
		if err != nil {
			t.Fatal(err)
		}
		return ts
	}
	released := resolve()
	if err := r.ReleaseToolSet(released.ID()); err != nil {
		t.Fatal(err)
	}
	invalidated := resolve()
	mustRestrict(t, r, "a", nil, []string{"g"})
	for id, want := range map[string]string{
		released.ID():    "was released",
		invalidated.ID(): "was invalidated by a registry change",
		"ts_unknown":     "is unknown",
	} {
		_, err := r.ToolSet(id)
		if want := `registry: tool set "` + id + `" ` + want; !errors.Is(err, tool.ErrToolSetGone) || err.Error() != want {
			t.Errorf("ToolSet(%q) = %v, want %q", id, err, want)
		}
	}
}

// TestHeldToolSetDoesNotExpire: a batch holds its set, so a call running longer than
// the idle time does not make it expire; idleness counts again from the release.
func TestHeldToolSetDoesNotExpire(t *testing.T) {
	clock := newFakeClock()
	r := newRegistry(t, registry.WithClock(clock.Now), registry.WithToolSetIdle(time.Minute))
	mustRegister(t, r, "", def("t"), "")
	ts, err := r.ResolveToolSet(t.Context(), "", registry.ConditionEnv{})
	if err != nil {
		t.Fatal(err)
	}
	release := ts.Hold()
	clock.Advance(5 * time.Minute)
	if n := r.SweepToolSets(clock.Now()); n != 0 {
		t.Errorf("SweepToolSets while held = %d, want 0", n)
	}
	if _, err := ts.Lookup("t"); err != nil {
		t.Errorf("Lookup while held after 5m = %v, want nil", err)
	}
	clock.Advance(5 * time.Minute)
	release()
	release() // idempotent
	clock.Advance(30 * time.Second)
	if _, err := r.ToolSet(ts.ID()); err != nil {
		t.Errorf("ToolSet(id) 30s after the release = %v, want nil", err)
	}
	clock.Advance(2 * time.Minute)
	if n := r.SweepToolSets(clock.Now()); n != 1 {
		t.Errorf("SweepToolSets 2m after the release = %d, want 1", n)
	}
	if _, err := ts.Lookup("t"); !errors.Is(err, tool.ErrToolSetGone) {
		t.Errorf("Lookup after the sweep = %v, want ErrToolSetGone", err)
	}
}

// TestToolSetInvalidationAcrossTenants: a change ends exactly the live sets, of any
// tenant, that admitted the changed entry and no longer see it (or, for a restriction,
// the sets at or below its scope); sets of other tenants, of a tenant whose name starts
// with the changed one's, and sets that never admitted the name stay live.
func TestToolSetInvalidationAcrossTenants(t *testing.T) {
	all := []string{"global", "a", "a/x 1", "a/x 2", "ab/x", "b/x"}
	tests := map[string]struct {
		change func(t *testing.T, r *registry.Registry)
		gone   []string
	}{
		"global tool shadowed in a tenant": {change: func(t *testing.T, r *registry.Registry) {
			mustRegister(t, r, "a", def("g"), "")
		}, gone: []string{"a", "a/x 1", "a/x 2"}},
		"global tool shadowed below a tenant": {change: func(t *testing.T, r *registry.Registry) {
			mustRegister(t, r, "a/x", def("g"), "")
		}, gone: []string{"a/x 1", "a/x 2"}},
		"tenant tool unregistered": {change: func(t *testing.T, r *registry.Registry) {
			if err := r.Unregister("a", "own", ""); err != nil {
				t.Fatal(err)
			}
		}, gone: []string{"a", "a/x 1", "a/x 2"}},
		"global tool unregistered": {change: func(t *testing.T, r *registry.Registry) {
			if err := r.Unregister("", "g", ""); err != nil {
				t.Fatal(err)
			}
		}, gone: []string{"global", "a", "a/x 1", "a/x 2", "ab/x"}},
		"global provider removed": {change: func(t *testing.T, r *registry.Registry) {
			r.RemoveOwner("prov")
		}, gone: []string{"global", "a", "a/x 1", "a/x 2", "ab/x"}},
		"tenant restricted": {change: func(t *testing.T, r *registry.Registry) {
			mustRestrict(t, r, "a", nil, []string{"unrelated"})
		}, gone: []string{"a", "a/x 1", "a/x 2"}},
		"new global tool": {change: func(t *testing.T, r *registry.Registry) {
			mustRegister(t, r, "", def("fresh"), "")
		}},
		"tool registered where its name is restricted away": {change: func(t *testing.T, r *registry.Registry) {
			mustRegister(t, r, "b", def("g"), "")
			mustRegister(t, r, "b/x", def("g2"), "")
		}},
		"shadow below every set": {change: func(t *testing.T, r *registry.Registry) {
			mustRegister(t, r, "a/x/y", def("g"), "")
			mustRegister(t, r, "ab/x/y", def("own"), "")
		}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := newRegistry(t)
			mustRegister(t, r, "", def("g"), "prov")
			mustRegister(t, r, "", def("h"), "")
			mustRegister(t, r, "a", def("own"), "")
			mustRegister(t, r, "b/x", def("g2_base"), "")
			mustRestrict(t, r, "b", nil, []string{"g", "g2"})
			sets := map[string]*registry.ToolSet{}
			for _, label := range all {
				scope, _, _ := strings.Cut(label, " ")
				if label == "global" {
					scope = ""
				}
				ts, err := r.ResolveToolSet(t.Context(), scope, registry.ConditionEnv{})
				if err != nil {
					t.Fatal(err)
				}
				sets[label] = ts
			}
			tc.change(t, r)
			for _, label := range all {
				_, err := r.ToolSet(sets[label].ID())
				if gone := contains(tc.gone, label); gone != errors.Is(err, tool.ErrToolSetGone) || !gone && err != nil {
					t.Errorf("set of %q after the change: ToolSet(id) = %v, want gone=%v", label, err, gone)
				}
			}
		})
	}
}

// TestToolSetOfOwner: a set is its resolver's; to another owner it is an unknown id,
// live or ended, so its state tells the other owner nothing either.
func TestToolSetOfOwner(t *testing.T) {
	r := newRegistry(t)
	ts, err := r.ResolveToolSet(t.Context(), "a", registry.ConditionEnv{Owner: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	unknown := `registry: tool set "` + ts.ID() + `" is unknown`
	if got, err := r.ToolSetOf(ts.ID(), "alice"); err != nil || got != ts {
		t.Errorf("ToolSetOf(id, owner) = %v, %v; want the set", got, err)
	}
	if _, err := r.ToolSetOf(ts.ID(), "bob"); !errors.Is(err, tool.ErrToolSetGone) || err.Error() != unknown {
		t.Errorf("ToolSetOf(id, another owner) = %v, want %q", err, unknown)
	}
	if err := r.ReleaseToolSet(ts.ID()); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ToolSetOf(ts.ID(), "bob"); err == nil || err.Error() != unknown {
		t.Errorf("ToolSetOf(released id, another owner) = %v, want %q", err, unknown)
	}
	if _, err := r.ToolSetOf(ts.ID(), "alice"); err == nil || !strings.HasSuffix(err.Error(), "was released") {
		t.Errorf("ToolSetOf(released id, owner) = %v, want it released", err)
	}
}

// TestExpiredToolSetsFreeTheirPlaces: a set idle past the idle time has expired, and no
// longer counts against its owner's limit or the registry's, even before a sweep has
// dropped it; a set still in use keeps its place.
func TestExpiredToolSetsFreeTheirPlaces(t *testing.T) {
	clock := newFakeClock()
	r := newRegistry(t, registry.WithClock(clock.Now), registry.WithToolSetIdle(time.Minute),
		registry.WithLimits(registry.Limits{MaxToolSets: 3, MaxToolSetsPerOwner: 2}))
	resolve := func(owner string) (*registry.ToolSet, error) {
		return r.ResolveToolSet(t.Context(), "a", registry.ConditionEnv{Owner: owner})
	}
	var mine []*registry.ToolSet
	for range 2 {
		ts, err := resolve("tenant-a")
		if err != nil {
			t.Fatal(err)
		}
		mine = append(mine, ts)
	}
	if _, err := resolve("tenant-a"); !errors.Is(err, registry.ErrLimit) {
		t.Fatalf("tenant-a's third ResolveToolSet = %v, want ErrLimit", err)
	}
	other, err := resolve("tenant-b")
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(40 * time.Second)
	if _, err := mine[1].Lookup("x"); !errors.Is(err, tool.ErrUnknownTool) { // a use
		t.Fatalf("Lookup = %v, want ErrUnknownTool", err)
	}
	clock.Advance(40 * time.Second) // mine[0] and other idle 80s: expired; mine[1] 40s
	if _, err := mine[0].Lookup("x"); !errors.Is(err, tool.ErrToolSetGone) {
		t.Fatalf("Lookup on the idle set = %v, want ErrToolSetGone", err)
	}
	if _, err := resolve("tenant-a"); err != nil {
		t.Errorf("tenant-a's ResolveToolSet after one of its sets expired = %v, want nil", err)
	}
	if _, err := resolve("tenant-a"); !errors.Is(err, registry.ErrLimit) {
		t.Errorf("tenant-a's next ResolveToolSet = %v, want ErrLimit (the set in use keeps its place)", err)
	}
	// tenant-b's set expired too: its place in the registry is free.
	if _, err := resolve("tenant-c"); err != nil {
		t.Errorf("tenant-c's ResolveToolSet once tenant-b's set expired = %v, want nil", err)
	}
	if _, err := other.Lookup("x"); !errors.Is(err, tool.ErrToolSetGone) {
		t.Errorf("Lookup on the expired set of tenant-b = %v, want ErrToolSetGone", err)
	}
	if _, err := resolve("tenant-d"); !errors.Is(err, registry.ErrLimit) {
		t.Errorf("ResolveToolSet in a full registry = %v, want ErrLimit", err)
	}
}

// TestEndSessionToolSets: the sets resolved against a session whose conditions read its
// history end, saying the session was deleted; another session's, and one whose
// conditions do not read the history, serve on.
func TestEndSessionToolSets(t *testing.T) {
	r := newRegistry(t)
	mustRegister(t, r, "q", withCondition("query_db", `session.succeeded("get_db_schema")`), "")
	mustRegister(t, r, "m", withCondition("web_search", `model.provider == "openai"`), "")
	resolve := func(scope, session string) *registry.ToolSet {
		ts, err := r.ResolveToolSet(t.Context(), scope, registry.ConditionEnv{SessionID: session})
		if err != nil {
			t.Fatal(err)
		}
		return ts
	}
	reads, other, model := resolve("q", "s"), resolve("q", "t"), resolve("m/x", "s")
	if model.ReadsHistory() {
		t.Fatal("the set of scope m/x reads the history, want not (only web_search is conditional there)")
	}
	r.EndSessionToolSets("s")
	if _, err := r.ToolSet(reads.ID()); !errors.Is(err, tool.ErrToolSetGone) || !strings.Contains(err.Error(), "session was deleted") {
		t.Errorf("ToolSet(s's set that reads the history) = %v, want ErrToolSetGone saying the session was deleted", err)
	}
	for name, ts := range map[string]*registry.ToolSet{"t's": other, "s's that does not read the history": model} {
		if _, err := r.ToolSet(ts.ID()); err != nil {
			t.Errorf("ToolSet(%s set) = %v, want it live", name, err)
		}
	}
}
