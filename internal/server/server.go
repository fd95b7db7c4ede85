package server

import (
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/broker"
	"github.com/toolsd/toolsd/internal/registry"
	"github.com/toolsd/toolsd/internal/scheduler"
	"github.com/toolsd/toolsd/internal/session"
	"github.com/toolsd/toolsd/internal/streamgate"
	"github.com/toolsd/toolsd/internal/tool"
)

// Limits are the request-shape limits the gRPC layer enforces before anything runs.
type Limits struct {
	MaxCallsPerBatch int
	// MaxRequestBytes caps an ExecuteBatch request. The gRPC server's message limit must
	// also fit provider results, so it alone may let larger requests through.
	MaxRequestBytes int
	MaxSessionIDLen int
	// MaxCallIDLen bounds a call id: the model's, repeated in every event, log line and
	// result of its call.
	MaxCallIDLen int
	OutboxSize   int
	WriteTimeout time.Duration
	// AcceptedHold is how long a single-call batch may start quietly, holding its
	// accepted message back and reading no client messages (see quietStart); 0 sends
	// accepted and starts reading at once.
	AcceptedHold time.Duration
	// FirstMessageTimeout is how long an ExecuteBatch stream may take to send its
	// batch: a stream that sends nothing would otherwise hold its handler and a stream
	// slot until drain or the client's deadline.
	FirstMessageTimeout time.Duration
	// MaxBatches caps the batches in flight: ExecuteBatch streams that sent their batch
	// and have not ended. MaxBatchesPerIdentity caps those of one confined identity (a
	// tenant's; see [Authorizer]), so that one tenant cannot take every place. A batch
	// over either is refused before anything is logged.
	MaxBatches            int
	MaxBatchesPerIdentity int
	// MaxWatches caps the open WatchSession and WatchSchemas streams together, each
	// holding a goroutine (and a WatchSession a store watch) until it ends;
	// MaxWatchesPerIdentity those of one confined identity.
	// A watch over either is refused before it reads anything.
	MaxWatches            int
	MaxWatchesPerIdentity int
	// MaxHealthWatches caps the open health Watch streams (see [Server.Health]) of all
	// callers together: the health service needs no credentials, so it has no
	// per-identity part. A watch over it is refused before it sends anything.
	MaxHealthWatches int
}

// DefaultLimits are used for zero fields.
var DefaultLimits = Limits{MaxCallsPerBatch: 128, MaxSessionIDLen: 256, MaxCallIDLen: 256, OutboxSize: 256, WriteTimeout: 10 * time.Second,
	FirstMessageTimeout: 10 * time.Second, MaxBatches: 10000, MaxBatchesPerIdentity: 1000,
	MaxWatches: 10000, MaxWatchesPerIdentity: 100, MaxHealthWatches: 10000}

// Deps are the domain services the handlers translate to.
type Deps struct {
	Registry  *registry.Registry
	Broker    *broker.Broker
	Scheduler *scheduler.Scheduler
	Sessions  session.Store
	Logger    *zap.Logger
	Limits    Limits
	// Authorizer decides per call whether the caller may act on a scope or session;
	// nil allows everything (no authentication configured).
	Authorizer Authorizer
	// WrapApprover, if set, wraps each batch's approver (the approvals-pending gauge).
	WrapApprover func(tool.Approver) tool.Approver
	// ApprovalWaitEnded, if set, runs in a batch's approval wait that ended without the
	// client's answer, before the wait is withdrawn (an answer read until then is still
	// checked against the wait): for tests that decide that order.
	ApprovalWaitEnded func()
	// SendClock, if set, is what the Sends of ReadSession, WatchSession and ExecuteBatch
	// streams, and a batch's waits for room in its outbox, are timed by against
	// Limits.WriteTimeout instead of the monotonic clock (the checks still run every
	// write timeout of real time): for tests that decide when a reader has waited too
	// long.
	SendClock streamgate.Clock
	// ExpiryTimer, if set, replaces the timer that ends a WatchSession once the
	// credential that opened it, or its connection's client certificate, stops being
	// accepted (see auth.Identity.Expires and CertExpires): it must call f once at has
	// passed, unless stop (which reports whether it kept f from
	// being called) was called first. The default is [time.AfterFunc] for the time until
	// at. For tests that decide when a token has expired.
	ExpiryTimer func(at time.Time, f func()) (stop func() bool)
	// BatchRefused, if set, counts a batch refused for Limits.MaxBatches or
	// MaxBatchesPerIdentity, named by the limit ([LimitMaxBatches],
	// [LimitMaxBatchesPerIdentity]).
	BatchRefused func(limit string)
	// SchemasSent, if set, runs in a WatchSchemas handler after each fingerprint it
	// sent, before it looks for the next: for tests that hold a watch there as a Send
	// waiting on a slow reader would.
	SchemasSent func()
	// WatchRefused, if set, counts a watch refused for Limits.MaxWatches,
	// MaxWatchesPerIdentity or MaxHealthWatches, named by the limit ([LimitMaxWatches],
	// [LimitMaxWatchesPerIdentity], [LimitMaxHealthWatches]).
	WatchRefused func(limit string)
}

// Server implements ToolService; ProviderService is the broker's.
type Server struct {
	toolsdv1.UnimplementedToolServiceServer
	reg      *registry.Registry
	broker   *broker.Broker
	sched    *scheduler.Scheduler
	sessions session.Store
	log      *zap.Logger
	limits   Limits
	authz    Authorizer
	draining atomic.Bool
	batchSeq atomic.Uint64
	bootID   string
	active   *batches
	// batchSlots are the places of the batches in flight (Limits.MaxBatches),
	// watchSlots those of the open watches (Limits.MaxWatches), healthSlots those of
	// the open health watches (Limits.MaxHealthWatches).
	batchSlots  *slots
	watchSlots  *slots
	healthSlots *slots
	wrapAppr    func(tool.Approver) tool.Approver
	// waitEnded is Deps.ApprovalWaitEnded.
	waitEnded func()
	// sendClock is Deps.SendClock.
	sendClock streamgate.Clock
	// expiryTimer is Deps.ExpiryTimer, or its default.
	expiryTimer func(at time.Time, f func()) (stop func() bool)
	// projections caches Schemas' wire messages by fingerprint.
	projections projectionCache
	// schemaWatches are the scopes WatchSchemas streams watch.
	schemaWatches *schemaWatches
	// schemasSent is Deps.SchemasSent.
	schemasSent func()
	// pageKey signs the paged list RPCs' page tokens (see [pageTokens]), so that only
	// this server's are read.
	pageKey []byte
}

var _ toolsdv1.ToolServiceServer = (*Server)(nil)

// New builds the ToolService handlers over deps.
func New(deps Deps) *Server {
	l := deps.Limits
	if l.MaxCallsPerBatch <= 0 {
		l.MaxCallsPerBatch = DefaultLimits.MaxCallsPerBatch
	}
	if l.MaxSessionIDLen <= 0 {
		l.MaxSessionIDLen = DefaultLimits.MaxSessionIDLen
	}
	if l.MaxCallIDLen <= 0 {
		l.MaxCallIDLen = DefaultLimits.MaxCallIDLen
	}
	if l.OutboxSize <= 0 {
		l.OutboxSize = DefaultLimits.OutboxSize
	}
	if l.WriteTimeout <= 0 {
		l.WriteTimeout = DefaultLimits.WriteTimeout
	}
	if l.FirstMessageTimeout <= 0 {
		l.FirstMessageTimeout = DefaultLimits.FirstMessageTimeout
	}
	if l.MaxBatches <= 0 {
		l.MaxBatches = DefaultLimits.MaxBatches
	}
	if l.MaxBatchesPerIdentity <= 0 {
		l.MaxBatchesPerIdentity = min(DefaultLimits.MaxBatchesPerIdentity, l.MaxBatches)
	}
	if l.MaxWatches <= 0 {
		l.MaxWatches = DefaultLimits.MaxWatches
	}
	if l.MaxWatchesPerIdentity <= 0 {
		l.MaxWatchesPerIdentity = min(DefaultLimits.MaxWatchesPerIdentity, l.MaxWatches)
	}
	if l.MaxHealthWatches <= 0 {
		l.MaxHealthWatches = DefaultLimits.MaxHealthWatches
	}
	log := deps.Logger
	if log == nil {
		log = zap.NewNop()
	}
	authz := deps.Authorizer
	if authz == nil {
		authz = allowAll{}
	}
	expiryTimer := deps.ExpiryTimer
	if expiryTimer == nil {
		expiryTimer = afterTime
	}
	return &Server{
		reg: deps.Registry, broker: deps.Broker, sched: deps.Scheduler, sessions: deps.Sessions,
		log: log, limits: l, authz: authz, bootID: newID(), active: newBatches(), wrapAppr: deps.WrapApprover,
		waitEnded: deps.ApprovalWaitEnded, sendClock: deps.SendClock, expiryTimer: expiryTimer,
		batchSlots: newBatchSlots(l, deps.BatchRefused), watchSlots: newWatchSlots(l, deps.WatchRefused),
		healthSlots:   newHealthWatchSlots(l, deps.WatchRefused),
		schemaWatches: newSchemaWatches(deps.Registry), schemasSent: deps.SchemasSent,
		pageKey: newKey(),
	}
}

// Drain makes new batches fail with Unavailable; running batches finish.
func (s *Server) Drain() {
	s.draining.Store(true)
	s.active.drain(errShuttingDown)
}
