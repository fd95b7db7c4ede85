package broker

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/toolsd/toolsd/internal/connid"
	"github.com/toolsd/toolsd/internal/streamgate"
	"github.com/toolsd/toolsd/internal/tool"
)

// Registrar binds tool definitions to an owning provider. The consumer (the server
// wiring) adapts the real registry to it. Calls for one owner come from one goroutine.
type Registrar interface {
	// Register adds def to scope on behalf of owner and returns the registration's hash,
	// and whether it is held back (quarantined: invisible until an operator approves it).
	Register(scope string, def tool.Definition, owner string) (hash string, held bool, err error)
	// Unregister removes owner's tool name from scope.
	Unregister(scope, name, owner string) error
	// RemoveOwner removes every registration owner holds, in every scope.
	RemoveOwner(owner string)
}

// ProviderInfo describes one connected provider. Its registrations are the registry's
// to tell (registry.Registry.Owned): they change off the stream too (the unary
// RegisterTool and UnregisterTool, an operator's removal, an approval).
type ProviderInfo struct {
	ID          string
	Name        string
	Version     string
	ConnectedAt time.Time
	// MaxInFlight is the effective in-flight limit (the smaller of the hello's and the broker's).
	MaxInFlight int
	// InFlight is the number of calls waiting for this provider's result.
	InFlight int
}

// Broker multiplexes tool calls over provider callback streams. Create it with [New],
// serve [Broker.Connect] as the ProviderService.Connect handler, dispatch with
// [Broker.Call] and stop it with [Broker.Shutdown].
type Broker struct {
	reg    Registrar
	log    *zap.Logger
	limits Limits
	obs    Observer
	mapErr ErrorMapper
	guard  ScopeGuard
	// clock is what the streams' Sends are timed by (see [WithSendClock]).
	clock streamgate.Clock
	// traceContext gives a call's trace context headers (see [WithTraceContext]); nil
	// when toolsd does not trace.
	traceContext TraceContext

	// ids issues provider ids: unique, and unrelated to each other, so a provider
	// learns nothing from its id of the providers that connected before or since.
	ids *connid.Source

	gate *streamgate.Gate

	mu    sync.RWMutex
	conns map[string]*conn
}

// New returns a broker that registers providers' tools through reg.
func New(reg Registrar, opts ...Option) *Broker {
	o := options{log: zap.NewNop(), obs: NopObserver{}, mapErr: defaultErrorMapper}
	for _, opt := range opts {
		opt(&o)
	}
	return &Broker{
		reg:          reg,
		log:          o.log,
		limits:       o.limits.withDefaults(),
		obs:          o.obs,
		mapErr:       o.mapErr,
		guard:        o.guard,
		clock:        o.clock,
		ids:          connid.New("p"),
		traceContext: o.traceContext,
		conns:        make(map[string]*conn),
		gate:         streamgate.New(),
	}
}

// Connected reports whether providerID names a live, welcomed stream.
func (b *Broker) Connected(providerID string) bool { return b.lookup(providerID) != nil }

// StreamContext returns the context of providerID's live stream, and false when there is
// none. It carries what the RPC layer attached to the stream (the provider's
// authenticated identity), so a caller acting on a provider's behalf can be checked
// against the identity that opened it.
func (b *Broker) StreamContext(providerID string) (context.Context, bool) {
	c := b.lookup(providerID)
	if c == nil {
		return nil, false
	}
	return c.ctx, true
}

// Providers lists the connected providers, oldest first.
func (b *Broker) Providers() []ProviderInfo {
	b.mu.RLock()
	conns := make([]*conn, 0, len(b.conns))
	for _, c := range b.conns {
		conns = append(conns, c)
	}
	b.mu.RUnlock()
	out := make([]ProviderInfo, 0, len(conns))
	for _, c := range conns {
		out = append(out, c.info())
	}
	slices.SortFunc(out, func(a, b ProviderInfo) int {
		return cmp.Or(a.ConnectedAt.Compare(b.ConnectedAt), cmp.Compare(a.ID, b.ID))
	})
	return out
}

// Shutdown says goodbye (with reason) to every provider, ends every stream, and returns
// once every Connect handler has returned. New streams are refused from then on. Calls
// still in flight fail with PROVIDER_GONE; drain them first for a graceful stop.
func (b *Broker) Shutdown(reason string) { b.gate.Shutdown(reason) }

// ShuttingDown is the error [Broker.Connect] refuses a new stream with once Shutdown
// has begun (Unavailable, SHUTTING_DOWN), nil before: a caller that refuses streams
// for reasons of its own checks it first, so that a stream refused for both is told to
// go elsewhere rather than to back off.
func (b *Broker) ShuttingDown() error {
	if !b.gate.Closing() {
		return nil
	}
	return errShuttingDown()
}

func (b *Broker) lookup(id string) *conn {
	b.mu.RLock()
	c := b.conns[id]
	b.mu.RUnlock()
	return c
}

func (b *Broker) newConnID() string { return b.ids.Next() }
