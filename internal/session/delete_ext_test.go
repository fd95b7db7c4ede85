package session_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolsd/toolsd/internal/session"
	"github.com/toolsd/toolsd/internal/textcut"
)

// Delete removes a session's events and owner at once and says how many events went;
// its id is free again (the next append starts at seq 1, a claim finds no owner), and
// other sessions are untouched. A session that has neither events nor an owner is
// ErrNotFound, also once deleted; so is a deleted session deleted again. A session
// whose owner is not the one the caller saw is kept (ErrOwnerChanged).
func testDeleteRemovesSession(t *testing.T, open opener) {
	s := open(t)
	ctx := t.Context()
	alice := session.Owner{Identity: "alice", Scope: "team", ScopeKnown: true}
	if _, err := s.ClaimOwner(ctx, "d", alice); err != nil {
		t.Fatal(err)
	}
	c := mustAppend(t, s, "d", callEvent("c1", "read", `{}`))
	mustAppend(t, s, "d", resultEvent("c1", c[0].Seq, false), messageEvent("ctx", 2))
	mustAppend(t, s, "other", messageEvent("stays", 0))
	if _, err := s.ClaimOwner(ctx, "claim-only", alice); err != nil {
		t.Fatal(err)
	}

	// Only while its owner is the one the caller saw: another, or none, keeps it.
	kept := func() { t.Error("Delete's then ran, want it only once the session is deleted") }
	for _, seen := range []*session.Owner{nil, {Identity: "alice"}, {Identity: "bob", Scope: "team", ScopeKnown: true}} {
		if n, err := s.Delete(ctx, "d", seen, kept); !errors.Is(err, session.ErrOwnerChanged) || n != 0 {
			t.Errorf("Delete(d, seen %+v) of alice's = %d, %v, want ErrOwnerChanged", seen, n, err)
		}
	}
	if n, err := s.Delete(ctx, "other", &alice, nil); !errors.Is(err, session.ErrOwnerChanged) || n != 0 {
		t.Errorf("Delete(other, seen alice) of a session with no owner = %d, %v, want ErrOwnerChanged", n, err)
	}
	// then runs once it is deleted, before the id may be held again.
	thens := 0
	then := func() {
		thens++
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		if release, err := s.Hold(cancelled, "d"); err == nil {
			release()
			t.Error("Hold(d) in Delete's then succeeded, want it to wait until Delete is done")
		}
	}
	if n, err := s.Delete(ctx, "d", &alice, then); err != nil || n != 3 || thens != 1 {
		t.Fatalf("Delete(d) = %d, %v, then ran %d times, want 3 events, once", n, err, thens)
	}
	if evs, err := s.Read(ctx, "d", 1, 0); err != nil || len(evs) != 0 {
		t.Errorf("Read(d) after Delete = %d events, %v, want none", len(evs), err)
	}
	if o, ok, err := s.Owner(ctx, "d"); err != nil || ok {
		t.Errorf("Owner(d) after Delete = %+v, %v, %v, want none", o, ok, err)
	}
	if sum, err := s.Summary(ctx, "d"); err != nil || sum.Called("read") {
		t.Errorf("Summary(d) after Delete: Called(read) = %v, %v, want false", sum != nil && sum.Called("read"), err)
	}
	if n, err := s.Delete(ctx, "d", &alice, kept); !errors.Is(err, session.ErrNotFound) || n != 0 {
		t.Errorf("Delete(d) again = %d, %v, want ErrNotFound", n, err)
	}
	if n, err := s.Delete(ctx, "never", nil, nil); !errors.Is(err, session.ErrNotFound) || n != 0 {
		t.Errorf("Delete(never) = %d, %v, want ErrNotFound", n, err)
	}
	// The refusal quotes a long id cut, as other refusals do: only the request's size
	// bounds it.
	long := strings.Repeat("x", 256)
	_, err := s.Delete(ctx, long, nil, nil)
	if want := strings.Repeat("x", textcut.MaxLoggedID) + "…"; !errors.Is(err, session.ErrNotFound) ||
		!strings.Contains(err.Error(), want) || strings.Contains(err.Error(), want[:len(want)-len("…")]+"x") {
		t.Errorf("Delete(%d-byte id) = %v, want ErrNotFound quoting its first %d bytes", len(long), err, textcut.MaxLoggedID)
	}
	if _, err := s.Delete(ctx, "", nil, nil); !errors.Is(err, session.ErrInvalid) {
		t.Errorf(`Delete("") = %v, want ErrInvalid`, err)
	}
	if n, err := s.Delete(ctx, "claim-only", &alice, nil); err != nil || n != 0 {
		t.Errorf("Delete(claim-only) = %d, %v, want 0 events", n, err)
	}
	if _, ok, err := s.Owner(ctx, "claim-only"); err != nil || ok {
		t.Errorf("Owner(claim-only) after Delete = %v, %v, want none", ok, err)
	}
	if evs, err := s.Read(ctx, "other", 1, 0); err != nil || len(evs) != 1 {
		t.Errorf("Read(other) = %d events, %v, want 1", len(evs), err)
	}

	bob := session.Owner{Identity: "bob"}
	if o, err := s.ClaimOwner(ctx, "d", bob); err != nil || o != bob {
		t.Errorf("ClaimOwner(d, bob) after Delete = %+v, %v, want bob", o, err)
	}
	if got := mustAppend(t, s, "d", messageEvent("new", 0)); got[0].Seq != 1 {
		t.Errorf("Append(d) after Delete seq = %d, want 1", got[0].Seq)
	}
}

// Delete keeps a session in use, as retention does: one a batch holds, claimed only or
// appended to, and one with a call that has no result, with ErrInUse; released, or the
// call answered, it is deleted.
func testDeleteKeepsSessionInUse(t *testing.T, open opener) {
	s := open(t)
	ctx := t.Context()
	if _, err := s.ClaimOwner(ctx, "held", session.Owner{Identity: "alice"}); err != nil {
		t.Fatal(err)
	}
	release, err := s.Hold(ctx, "held")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := s.Delete(ctx, "held", &session.Owner{Identity: "alice"}, nil); !errors.Is(err, session.ErrInUse) || n != 0 {
		t.Errorf("Delete(held) = %d, %v, want ErrInUse", n, err)
	}
	if _, ok, err := s.Owner(ctx, "held"); err != nil || !ok {
		t.Errorf("Owner(held) after a refused Delete = %v, %v, want the owner", ok, err)
	}
	mustAppend(t, s, "held", messageEvent("a", 0))
	release()
	if n, err := s.Delete(ctx, "held", &session.Owner{Identity: "alice"}, nil); err != nil || n != 1 {
		t.Errorf("Delete(held) released = %d, %v, want 1 event", n, err)
	}

	c := mustAppend(t, s, "open", callEvent("c1", "read", `{}`))
	if _, err := s.Delete(ctx, "open", nil, nil); !errors.Is(err, session.ErrInUse) {
		t.Errorf("Delete(open) with a call open = %v, want ErrInUse", err)
	}
	if evs, err := s.Read(ctx, "open", 1, 0); err != nil || len(evs) != 1 {
		t.Errorf("Read(open) after a refused Delete = %d events, %v, want 1", len(evs), err)
	}
	mustAppend(t, s, "open", resultEvent("c1", c[0].Seq, false))
	if n, err := s.Delete(ctx, "open", nil, nil); err != nil || n != 2 {
		t.Errorf("Delete(open) answered = %d, %v, want 2 events", n, err)
	}
}

// A watch of a session that Delete removes ends with ErrDeleted and delivers nothing of
// the id's next session. The watch's context stays live: the watch must end by itself,
// not by a cancellation racing the deletion's wake-up.
func testDeleteEndsWatch(t *testing.T, open opener) {
	s := open(t)
	for range 3 {
		mustAppend(t, s, "w", messageEvent("old", 0))
	}
	got := make(chan session.Event, 16)
	done := make(chan error, 1)
	go func() {
		done <- s.Watch(t.Context(), "w", 1, func(ev session.Event) error { got <- ev; return nil })
	}()
	receive(t, got, 3)
	if n, err := s.Delete(t.Context(), "w", nil, nil); err != nil || n != 3 {
		t.Fatalf("Delete(w) = %d, %v, want 3", n, err)
	}
	for range 4 {
		mustAppend(t, s, "w", messageEvent("new", 0))
	}
	select {
	case err := <-done:
		if !errors.Is(err, session.ErrDeleted) {
			t.Errorf("Watch() of a deleted session = %v, want ErrDeleted", err)
		}
	case ev := <-got:
		t.Fatalf("Watch() delivered seq %d %q after its session was deleted", ev.Seq, ev.Message.Content)
	case <-time.After(10 * time.Second): // a bound on a hang, not on speed
		t.Fatal("Watch() of a deleted session did not return")
	}
	if len(got) > 0 {
		ev := <-got
		t.Errorf("Watch() delivered seq %d %q after its session was deleted", ev.Seq, ev.Message.Content)
	}
}

// A deleted session stays deleted after a restart, owner and all, and its id starts at
// seq 1 again; the other sessions are all there.
func TestDeleteIsDurable(t *testing.T) {
	for name, k := range durableKinds() {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s := k.openT(t, dir)
			ctx := t.Context()
			if _, err := s.ClaimOwner(ctx, "gone", session.Owner{Identity: "alice"}); err != nil {
				t.Fatal(err)
			}
			mustAppend(t, s, "gone", messageEvent("a", 0), messageEvent("b", 0))
			mustAppend(t, s, "kept", messageEvent("c", 0))
			if n, err := s.Delete(ctx, "gone", &session.Owner{Identity: "alice"}, nil); err != nil || n != 2 {
				t.Fatalf("Delete(gone) = %d, %v, want 2", n, err)
			}
			if err := s.Close(); err != nil {
				t.Fatalf("Close() = %v", err)
			}

			s2 := k.openT(t, dir)
			if evs := readAll(t, s2, "gone"); len(evs) != 0 {
				t.Errorf("Read(gone) after reopen = %d events, want none", len(evs))
			}
			if _, ok, err := s2.Owner(ctx, "gone"); err != nil || ok {
				t.Errorf("Owner(gone) after reopen = %v, %v, want none", ok, err)
			}
			if evs := readAll(t, s2, "kept"); !slices.Equal(seqsOf(evs), []uint64{1}) {
				t.Errorf("Read(kept) after reopen = seqs %v, want [1]", seqsOf(evs))
			}
			if got := mustAppend(t, s2, "gone", messageEvent("new", 0)); got[0].Seq != 1 {
				t.Errorf("Append(gone) after reopen seq = %d, want 1", got[0].Seq)
			}
		})
	}
}
