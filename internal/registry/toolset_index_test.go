package registry

import (
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/toolsd/toolsd/internal/tool"
)

// TestToolSetIndexMatchesScan drives random registrations, unregistrations, owner
// removals, restrictions, resolutions, releases and ends of a session's sets and checks,
// after each, that the set index holds exactly the live sets, that invalidation ended
// exactly the sets a scan of every set would have ended: those that admitted an entry
// their scope no longer sees (for a restriction, those at or below its scope), and no
// others; and that EndSessionToolSets ended exactly the live sets of the session that
// read its history.
func TestToolSetIndexMatchesScan(t *testing.T) {
	scopes := []string{"", "a", "a/x", "a/x/y", "ab", "ab/x", "b"}
	names := []string{"n0", "n1", "n2", "n3"}
	owners := []string{"", "p1", "p2"}
	sessions := []string{"s1", "s2"}
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 1))
		pick := func(list []string) string { return list[rng.IntN(len(list))] }
		r := New()
		var restrictions []string
		for step := range 300 {
			before := make([]*ToolSet, 0, len(r.sets))
			for _, ts := range r.sets {
				before = append(before, ts)
			}
			restricted := ""   // the scope of a restriction placed by this step
			endedSession := "" // the session whose sets this step ended
			switch op := rng.IntN(10); {
			case op < 3:
				d := tool.Definition{Name: pick(names), Parameters: []byte(`{"type":"object"}`)}
				if rng.IntN(3) == 0 {
					d.Condition = pick([]string{"true", "false", `!session.called("n0")`})
				}
				_, _ = r.Register(pick(scopes), d, pick(owners))
			case op < 5:
				_ = r.Unregister(pick(scopes), pick(names), "")
			case op == 5:
				r.RemoveOwner(pick(owners[1:]))
			case op == 6:
				if rng.IntN(2) == 0 || len(restrictions) == 0 {
					scope := pick(scopes[1:])
					id, err := r.Restrict(scope, nil, []string{pick(names)})
					if err != nil {
						t.Fatal(err)
					}
					restrictions = append(restrictions, id)
					restricted = scope
				} else {
					i := rng.IntN(len(restrictions))
					if err := r.Unrestrict(restrictions[i]); err != nil {
						t.Fatal(err)
					}
					restrictions = append(restrictions[:i], restrictions[i+1:]...)
				}
			case op < 9:
				if _, err := r.ResolveToolSet(context.Background(), pick(scopes), ConditionEnv{SessionID: pick(sessions)}); err != nil {
					t.Fatal(err)
				}
			case rng.IntN(2) == 0:
				endedSession = pick(sessions)
				r.EndSessionToolSets(endedSession)
			default:
				for id := range r.sets {
					if err := r.ReleaseToolSet(id); err != nil {
						t.Fatal(err)
					}
					break
				}
			}
			where := "seed " + strconv.FormatUint(seed, 10) + " step " + strconv.Itoa(step)
			r.mu.RLock()
			checkSetIndexLocked(t, r, where)
			for _, ts := range before {
				ended := r.sets[ts.id] == nil && ts.state.Load() == setSessionDeleted
				if want := endedSession != "" && ts.session == endedSession && ts.readsHistory; ended != want {
					t.Errorf("%s: set %s of session %q (reads the history: %v) ended as its session was deleted: %v, want %v",
						where, ts.id, ts.session, ts.readsHistory, ended, want)
				}
				if r.sets[ts.id] != nil || ts.state.Load() != setInvalidated {
					continue // live, or released
				}
				if restricted != "" {
					if !within(ts.scope, restricted) {
						t.Errorf("%s: set of %q invalidated by a restriction of %q", where, ts.scope, restricted)
					}
				} else if !staleLocked(r, ts) {
					t.Errorf("%s: set of %q invalidated though it still sees everything it admitted", where, ts.scope)
				}
			}
			if restricted != "" {
				for _, ts := range r.sets {
					if within(ts.scope, restricted) && slices.Contains(before, ts) {
						t.Errorf("%s: set of %q outlived a restriction of %q", where, ts.scope, restricted)
					}
				}
			}
			r.mu.RUnlock()
		}
	}
}

// staleLocked reports whether ts admitted an entry its scope no longer sees.
func staleLocked(r *Registry, ts *ToolSet) bool {
	for _, e := range ts.entries {
		if (e.cond == nil || ts.admitted[e.def.Name] == e) && visibleEntryLocked(r.nearestLocked(ts.scope), e.def.Name) != e {
			return true
		}
	}
	return false
}

// checkSetIndexLocked fails unless r.setGroups indexes exactly the sets of r.sets, and
// no set kept in r.sets admits an entry its scope no longer sees.
func checkSetIndexLocked(t *testing.T, r *Registry, where string) {
	t.Helper()
	indexed := 0
	for root, groups := range r.setGroups {
		if len(groups) == 0 {
			t.Errorf("%s: empty group map kept for root %q", where, root)
		}
		for key, g := range groups {
			if g.root != root || g.key != key || len(g.sets) == 0 {
				t.Errorf("%s: group %q/%v: root %q, key %v, %d sets", where, root, key, g.root, g.key, len(g.sets))
			}
			for ts := range g.sets {
				indexed++
				if r.sets[ts.id] != ts || ts.group != g || tenantRoot(ts.scope) != root ||
					len(ts.entries) != len(g.entries) || len(ts.entries) > 0 && &ts.entries[0] != &g.entries[0] {
					t.Errorf("%s: set %s of %q misindexed in group %q/%v", where, ts.id, ts.scope, root, key)
				}
			}
		}
	}
	if indexed != len(r.sets) {
		t.Errorf("%s: %d sets indexed, %d live", where, indexed, len(r.sets))
	}
	history := 0
	for session, sets := range r.historySets {
		if len(sets) == 0 {
			t.Errorf("%s: empty history index kept for session %q", where, session)
		}
		for ts := range sets {
			history++
			if r.sets[ts.id] != ts || !ts.readsHistory || ts.session != session {
				t.Errorf("%s: set %s of session %q misindexed under session %q", where, ts.id, ts.session, session)
			}
		}
	}
	for _, ts := range r.sets {
		if ts.readsHistory {
			history--
		}
	}
	if history != 0 {
		t.Errorf("%s: the history index and the live sets that read the history differ by %d", where, history)
	}
	for _, ts := range r.sets {
		if staleLocked(r, ts) {
			t.Errorf("%s: set of %q kept though it admitted an entry its scope no longer sees", where, ts.scope)
		}
	}
}
