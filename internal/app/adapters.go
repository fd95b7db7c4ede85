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
	"github.com/toolsd/toolsd/internal/observe"
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
		records[i] = resultRecord(b.Calls[rs[i].Index].CallID, r)
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

// resultRecord is what a call's tool/result event records of r.
func resultRecord(callID string, r *tool.Result) session.ResultRecord {
	return session.ResultRecord{
		CallID:        callID,
		Content:       r.Content,
		IsError:       r.IsError,
		Error:         r.Err,
		Meta:          r.Meta,
		ConcludesTurn: r.ConcludesTurn,
	}
}

// resultFits is the pipeline's [pipeline.ResultFits]: whether r's tool/result event, as
// AppendResults records it, is within the session log's limit for one event (toolsd
// keeps the store's default). The log remains the judge: the scheduler replaces a
// result it refuses all the same.
func resultFits(e *tool.Exec, r *tool.Result) bool {
	rec := resultRecord(e.CallID, r)
	ev := session.Event{Type: session.TypeToolResult, BatchID: e.BatchID, SourceSeqs: []uint64{0}, Result: &rec}
	return session.EventSize(&ev) <= session.DefaultMaxEventBytes
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

func (a authzAdapter) Unconfined(ctx context.Context, act server.Action) bool {
	return a.z.Unconfined(ctx, auth.Action(act))
}

func (a authzAdapter) ForgetSession(sessionID string) { a.z.ForgetSession(sessionID) }

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

// defaultToolSeriesKeep is how long a tool's series outlive its last registration, and
// a hook name's its last hook.
const defaultToolSeriesKeep = 10 * time.Minute

// maxRetiredTools bounds by default the retired tool names whose series are kept (and,
// apart, the hook names): past it, the names retired longest ago are forgotten before
// their keep time. Providers choose tool names, and a provider registering and
// unregistering fresh names (tens of thousands a second, a few KB of series each) would
// otherwise grow memory and /metrics by gigabytes within one keep time; hooks choose
// theirs too.
const maxRetiredTools = 10000

// retiredNames are names with series but nothing left that uses them (tool names with
// no registration left, hook names with no hook connected), each since when; a sweep
// forgets (deletes the series of) those retired for keep and still unused, and add
// forgets the oldest at once while more than max are kept.
type retiredNames struct {
	keep   time.Duration
	max    int
	forget func(name string) // checks the name is still unused

	mu    sync.Mutex
	since map[string]time.Time
	// order holds the names in the order retired; an entry whose time is not the
	// name's in since was retired again later, or registered again, and is skipped.
	order []retiredName
}

type retiredName struct {
	name string
	at   time.Time
}

func newRetiredNames(keep time.Duration) *retiredNames {
	return &retiredNames{keep: max(keep, time.Millisecond), max: maxRetiredTools, since: map[string]time.Time{}}
}

func (r *retiredNames) add(name string, now time.Time) {
	r.mu.Lock()
	r.since[name] = now
	r.order = append(r.order, retiredName{name, now})
	var due []string
	for len(r.since) > r.max {
		due = r.popLocked(due)
	}
	if len(r.order) > 2*len(r.since)+64 { // names retired again and again
		live := r.order[:0]
		for _, e := range r.order {
			if r.since[e.name].Equal(e.at) {
				live = append(live, e)
			}
		}
		clear(r.order[len(live):])
		r.order = live
	}
	r.mu.Unlock()
	for _, name := range due {
		r.forget(name)
	}
}

// popLocked removes the oldest entry of order, appending its name to due if it is the
// name's current retirement.
func (r *retiredNames) popLocked(due []string) []string {
	e := r.order[0]
	r.order[0] = retiredName{}
	r.order = r.order[1:]
	if t, ok := r.since[e.name]; ok && t.Equal(e.at) {
		delete(r.since, e.name)
		due = append(due, e.name)
	}
	return due
}

// unretire takes name out of the retired names: it is used again (registered, or a
// hook of the name connected), so its series are no retired name's, and it must not
// take the place of one that is.
func (r *retiredNames) unretire(name string) {
	r.mu.Lock()
	delete(r.since, name) // its entry in order is skipped as a retirement undone
	r.mu.Unlock()
}

// retiredHooks keeps the series of hook names whose last hook left as tools' are kept.
type retiredHooks struct{ *retiredNames }

var _ observe.HookSeriesKeeper = retiredHooks{}

func (r retiredHooks) Retire(hook string)   { r.add(hook, time.Now()) }
func (r retiredHooks) Unretire(hook string) { r.unretire(hook) }

func (r *retiredNames) sweep(now time.Time) {
	var due []string
	r.mu.Lock()
	for len(r.order) > 0 && now.Sub(r.order[0].at) >= r.keep {
		due = r.popLocked(due)
	}
	r.mu.Unlock()
	for _, name := range due {
		r.forget(name)
	}
}
