package app_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/app"
	"github.com/toolsd/toolsd/internal/config"
	"github.com/toolsd/toolsd/internal/session"
)

// sweepAfterClaim runs a retention sweep (as of far in the future, so that every idle
// session is due) right after the first claim of one session id returns: the sweeper
// firing between a batch's claim and the append of its plan.
type sweepAfterClaim struct {
	session.Store
	id string

	once    sync.Once
	removed int
	err     error
}

func (w *sweepAfterClaim) ClaimOwner(ctx context.Context, id string, o session.Owner) (session.Owner, error) {
	cur, err := w.Store.ClaimOwner(ctx, id, o)
	if err == nil && id == w.id {
		w.once.Do(func() {
			sw := w.Store.(interface{ Sweep(time.Time) (int, error) })
			w.removed, w.err = sw.Sweep(time.Now().Add(10000 * time.Hour))
		})
	}
	return cur, err
}

// startWrapped starts toolsd on the session store named store (nosync, with an hour's
// retention that only a test's own sweep applies), extra appended to its config, and
// its store wrapped by wrap.
func startWrapped(t *testing.T, store, extra string, wrap func(session.Store) session.Store) *env {
	t.Helper()
	cfg := fmt.Sprintf("listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\ndata_dir: %s\n"+
		"session: {store: %s, durability: nosync, retention: {max_age: 1h, interval: 1h}}\n%s", t.TempDir(), store, extra)
	c, err := config.Parse([]byte(cfg), "test.yaml")
	if err != nil {
		t.Fatalf("config.Parse() = %v", err)
	}
	return startConfig(t, c, app.WithSessionStoreWrapper(wrap))
}

// TestRetentionBetweenClaimAndPlan: retention sweeps while a batch has claimed its
// session and not yet logged its plan. The session must stay its owner's: if the sweep
// deleted it with its owner record, the plan would recreate the id with no owner, and
// the next identity to execute in it would claim it and read the first one's calls.
func TestRetentionBetweenClaimAndPlan(t *testing.T) {
	for _, store := range []string{"memory", "bolt", "journal"} {
		t.Run(store, func(t *testing.T) {
			wrap := &sweepAfterClaim{id: "s-race"}
			e := startWrapped(t, store, tenantAuth(t), func(s session.Store) session.Store {
				wrap.Store = s
				return wrap
			})
			agentA, agentB := e.as(t, tokenAgentA), e.as(t, tokenAgentB)

			agentA.mustExecute(t, &toolsdv1.Batch{SessionId: "s-race", Scope: "tenant-a",
				Calls: []*toolsdv1.ToolCall{call("c0", "nope", `{"secret":"agent-a-private-data"}`)}}, batchOptions{})
			if wrap.err != nil {
				t.Fatalf("Sweep() between claim and plan = %v", wrap.err)
			}
			if owner, ok, err := wrap.Owner(t.Context(), "s-race"); err != nil || !ok || owner.Identity != "agent-a" {
				t.Errorf("owner of s-race after agent-a's batch = %+v, %v, %v (sweep removed %d), want agent-a",
					owner, ok, err, wrap.removed)
			}

			if _, err := agentB.execute(t, &toolsdv1.Batch{SessionId: "s-race", Scope: "tenant-b",
				Calls: []*toolsdv1.ToolCall{call("c1", "nope", `{}`)}}, batchOptions{}); status.Code(err) != codes.PermissionDenied {
				t.Errorf("ExecuteBatch(agent-a's s-race) as agent-b = %v, want PermissionDenied", err)
			}
			events, err := readAll(agentB, "s-race")
			if status.Code(err) != codes.PermissionDenied {
				t.Errorf("ReadSession(agent-a's s-race) as agent-b = %d events, %v, want PermissionDenied", len(events), err)
			}
			for _, ev := range events {
				if strings.Contains(ev.String(), "agent-a-private-data") {
					t.Errorf("agent-b read agent-a's call: %v", ev.GetToolCall())
				}
			}
		})
	}
}

// claimBeforeSummary runs claim once, the first time the summary of session id is
// read, before the read: another identity's first batch landing between a
// ResolveToolSet's authorization and its read of the session's history.
type claimBeforeSummary struct {
	session.Store
	id    string
	claim func()
	done  atomic.Bool
}

func (w *claimBeforeSummary) Summary(ctx context.Context, id string) (session.Summary, error) {
	if id == w.id && w.done.CompareAndSwap(false, true) {
		w.claim()
	}
	return w.Store.Summary(ctx, id)
}

// TestResolveToolSetAgainstASessionClaimedMeanwhile: agent-b resolves a tool set of its
// tenant against a session id nobody owns yet (allowed: tools are resolved before a
// session's first batch), and agent-a's first batch claims the id and logs its calls
// before the history is read. The tool set was resolved against agent-a's history, so
// agent-b's conditions (session.called, session.succeeded) learnt what agent-a's
// session did. The owner is checked again after the read, and agent-b is refused.
func TestResolveToolSetAgainstASessionClaimedMeanwhile(t *testing.T) {
	wrap := &claimBeforeSummary{id: "s-claimed"}
	e := startWrapped(t, "memory", tenantAuth(t), func(s session.Store) session.Store {
		wrap.Store = s
		return wrap
	})
	agentA, agentB := e.as(t, tokenAgentA), e.as(t, tokenAgentB)
	var batchErr error
	wrap.claim = func() {
		_, batchErr = agentA.execute(t, &toolsdv1.Batch{SessionId: "s-claimed", Scope: "tenant-a",
			Calls: []*toolsdv1.ToolCall{call("c0", "secret_tool", `{}`)}}, batchOptions{})
	}

	_, err := agentB.tools.ResolveToolSet(t.Context(), &toolsdv1.ResolveToolSetRequest{SessionId: "s-claimed", Scope: "tenant-b", Turn: 1, Step: 1})
	if batchErr != nil {
		t.Fatalf("agent-a's ExecuteBatch(s-claimed) = %v", batchErr)
	}
	if !wrap.done.Load() {
		t.Fatal("ResolveToolSet did not read the session's summary")
	}
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("ResolveToolSet(s-claimed) as agent-b, agent-a's first batch landing before the history is read = %v, want PermissionDenied", err)
	}
}

// recreateBeforeWatch runs a retention sweep (as of far in the future) and appends the
// id's next session's first event as a watch that checks its session once attached
// begins: retention deleting the session between WatchSession's check of expect_epoch
// and the store's watch attaching.
type recreateBeforeWatch struct {
	session.Store
	once sync.Once
	err  error
}

func (w *recreateBeforeWatch) WatchAttached(ctx context.Context, id string, from uint64, attached func() error, fn func(session.Event) error) error {
	w.once.Do(func() {
		sw := w.Store.(interface{ Sweep(time.Time) (int, error) })
		if n, err := sw.Sweep(time.Now().Add(10000 * time.Hour)); err != nil || n != 1 {
			w.err = fmt.Errorf("Sweep() = %d, %w; want 1 session deleted", n, err)
			return
		}
		_, w.err = w.Append(ctx, id, session.Event{Type: session.TypeUserMessage, Message: &session.MessageRecord{Content: "next"}})
	})
	if w.err != nil {
		return w.err
	}
	return session.WatchAttached(ctx, w.Store, id, from, attached, fn)
}

// TestWatchResumedAsItsSessionIsRecreated: a watch resumed with expect_epoch whose
// session retention deleted, and whose id the next session claimed, after the watch
// checked the epoch and before the store's watch attached, followed the next session
// from from_seq, silent until it got there. toolsd's store passes on the store's word
// that the watch is attached, and the watch fails with SESSION_RECREATED.
func TestWatchResumedAsItsSessionIsRecreated(t *testing.T) {
	for _, store := range []string{"memory", "bolt", "journal"} {
		t.Run(store, func(t *testing.T) {
			wrap := &recreateBeforeWatch{}
			e := startWrapped(t, store, "", func(s session.Store) session.Store {
				wrap.Store = s
				return wrap
			})
			e.mustExecute(t, &toolsdv1.Batch{SessionId: "s", Calls: []*toolsdv1.ToolCall{call("c0", "nope", `{}`)}}, batchOptions{})

			// A safety net only: a watch that waits on fails on its missing error.
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			read, err := e.tools.ReadSession(ctx, &toolsdv1.ReadSessionRequest{SessionId: "s"})
			if err != nil {
				t.Fatal(err)
			}
			first, err := read.Recv()
			if err != nil {
				t.Fatalf("ReadSession(s).Recv() = %v", err)
			}
			w, err := e.tools.WatchSession(ctx, &toolsdv1.WatchSessionRequest{SessionId: "s", FromSeq: 3, ExpectEpoch: first.GetEpoch()})
			if err != nil {
				t.Fatal(err)
			}
			m, err := w.Recv()
			if wrap.once.Do(func() {}); wrap.err != nil {
				t.Fatal(wrap.err)
			}
			if status.Code(err) != codes.FailedPrecondition || reason(err) != "SESSION_RECREATED" {
				t.Errorf("WatchSession(from 3, expect %d) recreated as it attached: Recv() = seq %d, %v; want FailedPrecondition (SESSION_RECREATED)", first.GetEpoch(), m.GetEvent().GetSeq(), err)
			}
		})
	}
}
