package app

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/toolsd/toolsd/internal/auth"
	"github.com/toolsd/toolsd/internal/broker"
	"github.com/toolsd/toolsd/internal/config"
	"github.com/toolsd/toolsd/internal/jsonx"
	"github.com/toolsd/toolsd/internal/pipeline"
	"github.com/toolsd/toolsd/internal/registry"
	"github.com/toolsd/toolsd/internal/scheduler"
	"github.com/toolsd/toolsd/internal/server"
	"github.com/toolsd/toolsd/internal/session"
	"github.com/toolsd/toolsd/internal/tool"
)

// registrar lets the broker register a provider's tools in the registry.
type registrar struct{ reg *registry.Registry }

var _ broker.Registrar = registrar{}

func (r registrar) Register(scope string, def tool.Definition, owner string) (string, bool, error) {
	e, err := r.reg.Register(scope, def, owner)
	if err != nil {
		return "", false, err
	}
	return e.Hash(), r.reg.IsQuarantined(e), nil
}

func (r registrar) Unregister(scope, name, owner string) error {
	return r.reg.Unregister(scope, name, owner)
}

func (r registrar) RemoveOwner(owner string) { r.reg.RemoveOwner(owner) }

// resolver finds a call's tool in its scope, or in the batch's tool set when it names one.
type resolver struct{ reg *registry.Registry }

var _ pipeline.Resolver = resolver{}

func (r resolver) Resolve(_ context.Context, c *tool.Call) (pipeline.Tool, error) {
	if c.ToolSetID == "" {
		return r.reg.Lookup(c.Scope, c.Name)
	}
	ts, err := r.reg.ToolSet(c.ToolSetID)
	if err != nil {
		return nil, err
	}
	return ts.Lookup(c.Name)
}

// dispatcher sends calls down the owning provider's callback stream.
type dispatcher struct{ b *broker.Broker }

var _ pipeline.Dispatcher = dispatcher{}

func (d dispatcher) Dispatch(ctx context.Context, t pipeline.Tool, e *tool.Exec) tool.Result {
	return d.b.Call(ctx, t.Owner(), e, pipeline.Attempt(ctx))
}

// sessionLog records batches in the session store for the scheduler.
type sessionLog struct{ store session.Store }

var _ scheduler.Log = sessionLog{}

func (l sessionLog) AppendCalls(ctx context.Context, b *scheduler.Batch) ([]uint64, error) {
	events := make([]session.Event, len(b.Calls))
	records := make([]session.CallRecord, len(b.Calls))
	for i := range b.Calls {
		c := &b.Calls[i]
		records[i] = session.CallRecord{CallID: c.CallID, Name: c.Name, Arguments: c.Arguments}
		events[i] = session.Event{Type: session.TypeToolCall, BatchID: b.BatchID, Turn: b.Turn, Step: b.Step, Call: &records[i]}
	}
	return appendSeqs(ctx, l.store, b.SessionID, events)
}

func (l sessionLog) AppendResults(ctx context.Context, b *scheduler.Batch, rs []scheduler.Committed) ([]uint64, error) {
	events := make([]session.Event, len(rs))
	records := make([]session.ResultRecord, len(rs))
	cites := make([]uint64, len(rs))
	for i := range rs {
		r := &rs[i].Result
		cites[i] = rs[i].CallSeq
		records[i] = session.ResultRecord{
			CallID:        b.Calls[rs[i].Index].CallID,
			Content:       r.Content,
			IsError:       r.IsError,
			Error:         r.Err,
			Meta:          r.Meta,
			ConcludesTurn: r.ConcludesTurn,
		}
		events[i] = session.Event{
			Type: session.TypeToolResult, BatchID: b.BatchID, Turn: b.Turn, Step: b.Step,
			SourceSeqs: cites[i : i+1 : i+1], Result: &records[i],
		}
	}
	seqs, err := appendSeqs(ctx, l.store, b.SessionID, events)
	if errors.Is(err, session.ErrTooLarge) {
		err = fmt.Errorf("%w: %w", scheduler.ErrResultTooLarge, err)
	}
	return seqs, err
}

func (l sessionLog) AppendContexts(ctx context.Context, b *scheduler.Batch, resultSeq uint64, contexts []string) error {
	events := make([]session.Event, len(contexts))
	for i, c := range contexts {
		events[i] = session.Event{
			Type: session.TypeUserMessage, BatchID: b.BatchID, Turn: b.Turn, Step: b.Step,
			SourceSeqs: []uint64{resultSeq}, Message: &session.MessageRecord{Content: c},
		}
	}
	_, err := l.store.Append(ctx, b.SessionID, events...)
	return err
}

func appendSeqs(ctx context.Context, store session.Store, sessionID string, events []session.Event) ([]uint64, error) {
	stored, err := store.Append(ctx, sessionID, events...)
	if err != nil {
		return nil, err
	}
	seqs := make([]uint64, len(stored))
	for i := range stored {
		seqs[i] = stored[i].Seq
	}
	return seqs, nil
}

// sweepEvery runs fn on every tick until ctx ends.
func sweepEvery(ctx context.Context, every time.Duration, fn func(now time.Time)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			fn(now)
		}
	}
}

// jsonLimits are the bounds on argument documents.
func jsonLimits(c *config.Config) jsonx.Limits {
	return jsonx.Limits{MaxBytes: int(c.Limits.MaxArgumentBytes), MaxDepth: c.Limits.MaxJSONDepth}
}

// pinMode maps the config's registry.pinning value.
func pinMode(s string) registry.PinMode {
	switch s {
	case "refuse":
		return registry.PinRefuse
	case "quarantine":
		return registry.PinQuarantine
	default:
		return registry.PinOff
	}
}

// authzAdapter lets the server ask the auth package; the action numbering is shared.
type authzAdapter struct{ z *auth.Authorizer }

func (a authzAdapter) Authorize(ctx context.Context, act server.Action, scope, sessionID string) error {
	return a.z.Authorize(ctx, auth.Action(act), scope, sessionID)
}

func (a authzAdapter) ScopeFilter(ctx context.Context, act server.Action) (func(string) bool, error) {
	return a.z.ScopeFilter(ctx, auth.Action(act))
}

// ownerStore keeps session owners in the session log for the authorizer, so ownership
// survives a restart and goes with the session when retention removes it.
type ownerStore struct{ store session.Store }

var _ auth.OwnerStore = ownerStore{}

func (o ownerStore) ClaimOwner(ctx context.Context, sessionID string, w auth.SessionOwner) (auth.SessionOwner, error) {
	cur, err := o.store.ClaimOwner(ctx, sessionID, session.Owner(w))
	return auth.SessionOwner(cur), err
}

func (o ownerStore) Owner(ctx context.Context, sessionID string) (auth.SessionOwner, bool, error) {
	cur, ok, err := o.store.Owner(ctx, sessionID)
	return auth.SessionOwner(cur), ok, err
}

// defaultToolSeriesKeep is how long a tool's series outlive its last registration.
const defaultToolSeriesKeep = 10 * time.Minute

// retiredTools are tool names with no registration left, each since when; a sweep
// forgets (deletes the series of) those retired for keep and still unregistered.
type retiredTools struct {
	keep   time.Duration
	forget func(name string) // checks the name is still unregistered

	mu    sync.Mutex
	since map[string]time.Time
}

func newRetiredTools(keep time.Duration) *retiredTools {
	return &retiredTools{keep: max(keep, time.Millisecond), since: map[string]time.Time{}}
}

func (r *retiredTools) add(name string, now time.Time) {
	r.mu.Lock()
	r.since[name] = now
	r.mu.Unlock()
}

func (r *retiredTools) sweep(now time.Time) {
	var due []string
	r.mu.Lock()
	for name, t := range r.since {
		if now.Sub(t) >= r.keep {
			due = append(due, name)
			delete(r.since, name)
		}
	}
	r.mu.Unlock()
	for _, name := range due {
		r.forget(name)
	}
}
