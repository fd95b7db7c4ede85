package pipeline

import (
	"context"
	"time"

	"github.com/toolsd/toolsd/internal/tool"
)

// Tool is a resolved tool as the pipeline needs it. The registry's entries satisfy it.
type Tool interface {
	// Definition is read-only: callers must not modify it.
	Definition() *tool.Definition
	// Owner is the id of the provider that serves the tool.
	Owner() string
	// Hash pins the definition: two registrations with the same hash have the same
	// schemas, annotations, mode and condition, so policy decides the same for both.
	Hash() string
	// ValidateArguments checks raw arguments as strict JSON against the parameter schema.
	// Its Error() text is shown to the model.
	ValidateArguments(raw string) error
	// ValidateOutput checks a JSON value against the output schema; nil when there is none.
	ValidateOutput(value []byte) error
}

// Resolver finds the tool a call names in the caller's scope and tool set. Errors that
// match [tool.ErrUnknownTool] become UNKNOWN_TOOL, [tool.ErrToolSetGone] becomes
// ABORTED_BEFORE_DISPATCH, anything else INTERNAL.
type Resolver interface {
	Resolve(ctx context.Context, c *tool.Call) (Tool, error)
}

// Dispatcher sends one call to the tool's provider and waits for its result. It reports
// provider failures as results (PROVIDER_GONE, PROVIDER_UNAVAILABLE, TOOL_ERROR, …), and it
// must honour ctx: when ctx ends it forwards the cancellation and returns promptly.
type Dispatcher interface {
	Dispatch(ctx context.Context, t Tool, e *tool.Exec) tool.Result
}

// Policy is an installable operator policy: a pre-execute participant that also supplies
// the decision used when every participant abstains and per-tool settings. The policy
// package's *Set satisfies it; [Pipeline.SetPolicy] swaps it at runtime.
type Policy interface {
	PreExecute
	// DefaultDecision is used when every participant abstains.
	DefaultDecision() Decision
	// Tool returns the operator's settings for a tool in a scope.
	Tool(scope, name string) ToolSettings
}

// Observer receives execute-stage measurements. The server adapts it to Prometheus, so
// this package never imports a metrics library.
type Observer interface {
	// DispatchStarted is called when a call enters the execute chain.
	DispatchStarted(toolName string)
	// DispatchFinished reports the execute chain's outcome ("" for success) and duration.
	DispatchFinished(toolName string, code tool.Code, d time.Duration)
	// Retried is called once a retry after a transient code has returned, code being
	// the one that caused it. attempt is the dispatch the retry is (2, 3, …), the number
	// the provider sees ([Attempt]). Only dispatched retries are reported: not tries that
	// found the tool unknown while waiting for its provider to register it, nor one
	// answered ABORTED_BEFORE_DISPATCH (cancelled, or past its deadline, before it was
	// sent), which never started.
	Retried(toolName string, code tool.Code, attempt int)
	// Panicked is called when a stage of a call panicked (the call gets INTERNAL), or a
	// result observer did (the call keeps its result).
	Panicked(toolName string)
}
