package pipeline

import (
	"context"
	"time"

	"github.com/toolsd/toolsd/internal/tool"
)

// Defaults for zero [Config] fields.
const (
	DefaultTimeout         = 60 * time.Second
	DefaultApprovalTimeout = 60 * time.Second
	DefaultMaxResultBytes  = 1 << 20
	DefaultRetryAttempts   = 3
	DefaultRetryBudget     = 10 * time.Second
	DefaultRetryBaseDelay  = 100 * time.Millisecond
	DefaultRetryMaxDelay   = 2 * time.Second
)

// Config holds the pipeline's named limits. Zero fields take the defaults above.
type Config struct {
	// DefaultDecision applies when every participant abstains (Abstain means Allow).
	// An installed [Policy] supplies its own default instead.
	DefaultDecision Decision
	// DefaultTimeout bounds a dispatch when neither the operator nor the definition sets one.
	DefaultTimeout time.Duration
	// ApprovalTimeout bounds the wait for an approver's answer (APPROVAL_TIMEOUT).
	ApprovalTimeout time.Duration
	// MaxResultBytes caps content plus value of a dispatched result (RESULT_TOO_LARGE).
	MaxResultBytes int
	// ToolPolicy returns the operator's per-tool settings; nil means none.
	ToolPolicy func(scope, tool string) ToolSettings
	// Retry tunes the retry of idempotent tools.
	Retry RetryConfig
}

// RetryConfig tunes the retry interceptor.
type RetryConfig struct {
	// MaxAttempts counts every dispatch, the first included.
	MaxAttempts int
	// Budget bounds the time from the first dispatch to the start of the last retry.
	Budget time.Duration
	// BaseDelay is the first backoff; each retry doubles it up to MaxDelay, with jitter.
	BaseDelay time.Duration
	MaxDelay  time.Duration
}

// ToolSettings are the operator's per-tool settings. Zero fields mean "not set".
type ToolSettings struct {
	// Timeout overrides the definition's timeout and the default.
	Timeout time.Duration
	// Idempotent allows retrying the tool on transient provider failures.
	Idempotent bool
	// MaxResultBytes overrides Config.MaxResultBytes.
	MaxResultBytes int
	// Mode overrides the definition's concurrency mode.
	Mode tool.Mode
	// ModeFunc decides the mode per call when Mode is unset (a CEL mode expression).
	ModeFunc func(ctx context.Context, c *tool.Call) (tool.Mode, error)
}

// merge overlays the fields set in o; Idempotent is true when either says so.
func (s ToolSettings) merge(o ToolSettings) ToolSettings {
	if o.Timeout > 0 {
		s.Timeout = o.Timeout
	}
	s.Idempotent = s.Idempotent || o.Idempotent
	if o.MaxResultBytes > 0 {
		s.MaxResultBytes = o.MaxResultBytes
	}
	if o.Mode != tool.ModeUnspecified {
		s.Mode = o.Mode
	}
	if o.ModeFunc != nil {
		s.ModeFunc = o.ModeFunc
	}
	return s
}

func (c Config) withDefaults() Config {
	if c.DefaultDecision == Abstain {
		c.DefaultDecision = Allow
	}
	if c.DefaultTimeout <= 0 {
		c.DefaultTimeout = DefaultTimeout
	}
	if c.ApprovalTimeout <= 0 {
		c.ApprovalTimeout = DefaultApprovalTimeout
	}
	if c.MaxResultBytes <= 0 {
		c.MaxResultBytes = DefaultMaxResultBytes
	}
	if c.Retry.MaxAttempts <= 0 {
		c.Retry.MaxAttempts = DefaultRetryAttempts
	}
	if c.Retry.Budget <= 0 {
		c.Retry.Budget = DefaultRetryBudget
	}
	if c.Retry.BaseDelay <= 0 {
		c.Retry.BaseDelay = DefaultRetryBaseDelay
	}
	if c.Retry.MaxDelay <= 0 {
		c.Retry.MaxDelay = DefaultRetryMaxDelay
	}
	return c
}
