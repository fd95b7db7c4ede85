package hook

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/toolsd/toolsd/internal/connid"
	"github.com/toolsd/toolsd/internal/streamgate"
	"github.com/toolsd/toolsd/internal/tool"
)

// Errors that end a hook's stream or fail one of its requests.
var (
	errBadHello   = errors.New("hook: invalid hello")
	errProtocol   = errors.New("hook: protocol error")
	errTimeout    = errors.New("hook: no decision before the deadline")
	errGone       = errors.New("hook: stream closed")
	errOverloaded = errors.New("hook: request queue full (the hook stopped reading)")
)

// failureReason is the error's reason for a call or result the hook named hook could
// not judge, for err: `hook "policy": no decision before the deadline`. The package's
// errors begin with its name, for toolsd's log; here the hook's name says whose it is.
func failureReason(hook string, err error) string {
	return fmt.Sprintf("hook %q: %s", hook, strings.TrimPrefix(err.Error(), "hook: "))
}

// Info describes one connected hook.
type Info struct {
	ID       string
	Name     string
	FailOpen bool
	// Subscriptions are as the hook's hello gave them.
	Subscriptions []Subscription
	ConnectedAt   time.Time
	// Pending is the number of requests waiting for this hook's decision.
	Pending int
}

// Hub connects remote hooks to the pipeline. Create it with [New], serve [Hub.Connect]
// as the HookService.Connect handler, install its participants in the pipeline and stop
// it with [Hub.Shutdown]. It is safe for concurrent use.
type Hub struct {
	opts options
	log  *zap.Logger

	// ids issues hook ids: unique, and unrelated to each other, so a hook learns
	// nothing from its id of the hooks that connected before or since.
	ids *connid.Source
	// nextConn numbers the conns in connection order, which breaks priority ties; the
	// number stays inside toolsd.
	nextConn atomic.Uint64

	// subs is the current subscription table, rebuilt whenever a hook comes or goes,
	// so a call reads it without locking.
	subs atomic.Pointer[table]

	gate *streamgate.Gate

	mu    sync.Mutex
	conns []*conn // attached hooks, in connection order
	// confined counts the conns whose identity is confined to some scopes; they have
	// their own limit.
	confined int
	// byIdentity counts the confined conns of each identity.
	byIdentity map[string]int
}

// New returns a hub with no hooks connected.
func New(opts ...Option) *Hub {
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	h := &Hub{
		opts: o,
		log:  o.log,
		ids:  connid.New("h"),
		gate: streamgate.New(),
	}
	h.subs.Store(&table{})
	return h
}

// Hooks lists the connected hooks, oldest first.
func (h *Hub) Hooks() []Info {
	h.mu.Lock()
	conns := slices.Clone(h.conns)
	h.mu.Unlock()
	out := make([]Info, 0, len(conns))
	for _, c := range conns {
		out = append(out, c.info())
	}
	return out
}

// Shutdown says goodbye (with reason) to every hook, ends every stream and returns once
// every Connect handler has returned. New streams are refused from then on. Requests
// still pending fail closed (or open) at once.
func (h *Hub) Shutdown(reason string) { h.gate.Shutdown(reason) }

// attach publishes a welcomed conn: its subscriptions take part in calls from now on.
// Confined and other hooks are counted against separate limits.
func (h *Hub) attach(c *conn) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.gate.Closing():
		return errShuttingDown
	case c.isDead():
		return errGone
	case c.confined && h.confined >= h.opts.maxScoped:
		return errTooManyScopedHooks
	case c.confined && h.byIdentity[c.identity] >= h.opts.maxPerID:
		return errTooManyIdentityHooks
	case !c.confined && len(h.conns)-h.confined >= h.opts.maxHooks:
		return errTooManyHooks
	}
	h.conns = append(h.conns, c)
	if c.confined {
		h.confined++
		if h.byIdentity == nil {
			h.byIdentity = map[string]int{}
		}
		h.byIdentity[c.identity]++
	}
	h.subs.Store(buildTable(h.conns))
	h.opts.obs.HookConnected(c.hello.name, 1)
	return nil
}

// detach unpublishes c; later calls no longer consult it.
func (h *Hub) detach(c *conn) {
	h.mu.Lock()
	defer h.mu.Unlock()
	i := slices.Index(h.conns, c)
	if i < 0 {
		return
	}
	h.conns = slices.Delete(h.conns, i, i+1)
	if c.confined {
		h.confined--
		if h.byIdentity[c.identity]--; h.byIdentity[c.identity] == 0 {
			delete(h.byIdentity, c.identity)
		}
	}
	h.subs.Store(buildTable(h.conns))
	h.opts.obs.HookConnected(c.hello.name, -1)
}

// subscribed returns the hooks that take part in stage for e, in priority order (lower
// first, then connection order), each hook once.
func (h *Hub) subscribed(stage Stage, e *tool.Exec) []*conn {
	return h.subs.Load().match(stage, e.Name, e.Scope)
}

// table is an immutable snapshot of every hook's subscriptions, sorted per stage.
type table struct {
	stages [numStages][]entry
}

type entry struct {
	c   *conn
	sub *subscription
	seq int // the subscription's position in its hook's hello
}

func buildTable(conns []*conn) *table {
	t := &table{}
	for _, c := range conns {
		for i := range c.hello.subs {
			s := &c.hello.subs[i]
			t.stages[s.Stage] = append(t.stages[s.Stage], entry{c: c, sub: s, seq: i})
		}
	}
	for i := range t.stages {
		slices.SortStableFunc(t.stages[i], func(a, b entry) int {
			return cmp.Or(cmp.Compare(a.sub.Priority, b.sub.Priority), cmp.Compare(a.c.seq, b.c.seq), cmp.Compare(a.seq, b.seq))
		})
	}
	return t
}

func (t *table) match(stage Stage, toolName, scope string) []*conn {
	var out []*conn
	for _, en := range t.stages[stage] {
		if !en.sub.matches(toolName, scope) || !en.c.allow(scope) || slices.Contains(out, en.c) {
			continue
		}
		out = append(out, en.c)
	}
	return out
}
