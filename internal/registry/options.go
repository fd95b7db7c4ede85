package registry

import (
	"time"

	"go.uber.org/zap"

	"github.com/toolsd/toolsd/internal/jsonx"
	"github.com/toolsd/toolsd/internal/tool"
)

// Limits bound what providers can register. Zero fields take the defaults.
type Limits struct {
	// MaxToolsPerScope caps registrations (quarantined included) in one scope. Default 1000.
	MaxToolsPerScope int
	// MaxToolsPerOwner caps registrations of one non-operator owner. Default 1000.
	MaxToolsPerOwner int
	// MaxSchemaBytes caps each of a definition's parameter and output schemas. Default 64 KiB.
	MaxSchemaBytes int
	// MaxDescriptionBytes caps a definition's description and its annotation title.
	// Default 8 KiB.
	MaxDescriptionBytes int
	// MaxConditionBytes caps a definition's CEL condition. Default 4 KiB.
	MaxConditionBytes int
	// MaxToolSets caps live tool sets. Default 100000.
	MaxToolSets int
	// MaxToolSetsPerOwner caps the live tool sets resolved for one owner (a
	// [ConditionEnv.Owner] other than ""), so that one tenant cannot take every place.
	// Default 1000.
	MaxToolSetsPerOwner int
	// MaxRestrictedNames caps the names that all live restrictions list, allow and deny
	// lists together. A scope holds at most 64 restrictions, whose allow and deny lists
	// name at most 4096 tools each, but an operator of a subtree may restrict any
	// number of scopes in it; this bounds what they keep in all. Default 262144.
	MaxRestrictedNames int
	// Args bounds tool arguments before schema validation. Default 1 MiB, depth 64.
	Args jsonx.Limits
	// Output bounds a tool's JSON value before output-schema validation. Default
	// [tool.MaxResultBytes], depth 64: the value's size is the pipeline's to limit
	// (limits.max_result_bytes, RESULT_TOO_LARGE), so a smaller bound here would fail a
	// value the configured limit admits as malformed JSON.
	Output jsonx.Limits
}

// Default limits.
const (
	DefaultMaxToolsPerScope    = 1000
	DefaultMaxToolsPerOwner    = 1000
	DefaultMaxSchemaBytes      = 64 << 10
	DefaultMaxDescriptionBytes = 8 << 10
	DefaultMaxConditionBytes   = 4 << 10
	DefaultMaxToolSets         = 100000
	DefaultMaxToolSetsPerOwner = 1000
	DefaultMaxRestrictedNames  = 1 << 18
	DefaultMaxOutputBytes      = tool.MaxResultBytes
	DefaultToolSetIdle         = 10 * time.Minute
	DefaultConditionCostLimit  = 10000
	// MaxPins bounds the remembered (scope, name) → hash pins; when it is reached, the
	// tenant root (first scope segment) holding the most pins forgets its least
	// recently pinned one.
	MaxPins = 100000
	// maxRestrictionsPerScope and maxRestrictionNames bound restriction masks.
	maxRestrictionsPerScope = 64
	maxRestrictionNames     = 4096
)

func (l Limits) withDefaults() Limits {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.MaxToolsPerScope, DefaultMaxToolsPerScope)
	def(&l.MaxToolsPerOwner, DefaultMaxToolsPerOwner)
	def(&l.MaxSchemaBytes, DefaultMaxSchemaBytes)
	def(&l.MaxDescriptionBytes, DefaultMaxDescriptionBytes)
	def(&l.MaxConditionBytes, DefaultMaxConditionBytes)
	def(&l.MaxToolSets, DefaultMaxToolSets)
	def(&l.MaxToolSetsPerOwner, DefaultMaxToolSetsPerOwner)
	def(&l.MaxRestrictedNames, DefaultMaxRestrictedNames)
	def(&l.Output.MaxBytes, DefaultMaxOutputBytes)
	l.Args = l.Args.WithDefaults()
	l.Output = l.Output.WithDefaults()
	return l
}

// PinMode says what happens when a (scope, name) is registered again with a different
// content hash than the one remembered for it.
type PinMode int

const (
	// PinOff remembers nothing.
	PinOff PinMode = iota
	// PinRefuse rejects the changed registration with [ErrPinMismatch].
	PinRefuse
	// PinQuarantine accepts it hidden (neither visible nor executable) until an operator
	// calls [Registry.ApproveQuarantined].
	PinQuarantine
)

// String returns the mode as config files spell it.
func (m PinMode) String() string {
	switch m {
	case PinRefuse:
		return "refuse"
	case PinQuarantine:
		return "quarantine"
	default:
		return "off"
	}
}

// Option configures a [Registry].
type Option func(*options)

type options struct {
	limits    Limits
	pin       PinMode
	pinned    []Pin
	log       *zap.Logger
	clock     func() time.Time
	idle      time.Duration
	costLimit uint64
	// lockedBudget bounds a resolution's evaluation under the write lock.
	lockedBudget time.Duration
}

func defaultOptions() options {
	return options{
		limits:    Limits{}.withDefaults(),
		log:       zap.NewNop(),
		clock:     time.Now,
		idle:      DefaultToolSetIdle,
		costLimit: DefaultConditionCostLimit,

		lockedBudget: DefaultLockedResolveBudget,
	}
}

// DefaultLockedResolveBudget bounds the last attempt of a resolution, which evaluates
// the scope's conditions holding the registry's write lock (see
// [Registry.ResolveToolSet]): every lookup and registration waits for it.
const DefaultLockedResolveBudget = 100 * time.Millisecond

// WithLockedResolveBudget sets how long the last attempt of a resolution may hold the
// registry's write lock to evaluate conditions (d > 0; default
// [DefaultLockedResolveBudget]). Past it the resolution fails with [ErrBusy].
func WithLockedResolveBudget(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.lockedBudget = d
		}
	}
}

// WithLimits sets the registration limits; zero fields keep their defaults.
func WithLimits(l Limits) Option { return func(o *options) { o.limits = l.withDefaults() } }

// WithPinning selects the pin mode (default [PinOff]).
func WithPinning(m PinMode) Option { return func(o *options) { o.pin = m } }

// WithPins starts the registry remembering pins, as [Registry.Pins] returned them (a
// restart keeps its rug-pull protection this way). Ignored with [PinOff]. The caller
// validates what it read: pins are taken as given.
func WithPins(pins []Pin) Option { return func(o *options) { o.pinned = pins } }

// WithLogger sets the logger; nil keeps the no-op logger.
func WithLogger(l *zap.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.log = l
		}
	}
}

// WithClock replaces time.Now for tool-set idle accounting (tests inject a fake clock).
func WithClock(now func() time.Time) Option {
	return func(o *options) {
		if now != nil {
			o.clock = now
		}
	}
}

// WithToolSetIdle sets how long an unused tool set lives (default 10m).
func WithToolSetIdle(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.idle = d
		}
	}
}

// WithConditionCostLimit sets the CEL runtime cost limit of one condition evaluation
// (default 10000).
func WithConditionCostLimit(limit uint64) Option {
	return func(o *options) {
		if limit > 0 {
			o.costLimit = limit
		}
	}
}
