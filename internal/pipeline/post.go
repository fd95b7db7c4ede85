package pipeline

import (
	"context"
	"encoding/json"

	"github.com/toolsd/toolsd/internal/tool"
)

// Action is a post-execute participant's answer.
type Action uint8

// The post-execute actions.
const (
	// Accept keeps the result (AddContext still applies).
	Accept Action = iota
	// Block turns the result into a BLOCKED error carrying Reason as feedback.
	Block
	// Replace swaps the result's Content and/or Value for the verdict's non-nil ones.
	Replace
)

// PostVerdict is one post-execute participant's answer.
type PostVerdict struct {
	Action Action
	// Reason is the model-facing feedback of a Block.
	Reason string
	// Content, when non-nil, replaces the content (Replace only).
	Content *string
	// Value, when non-nil, replaces the JSON value of a success (Replace only); it must
	// still validate against the tool's output schema.
	Value json.RawMessage
	// AddContext is appended to the result's additional contexts, in order.
	AddContext []string
	// UserReason is user-facing detail of a Block: it goes to the error's Reason, never
	// to content.
	UserReason string
	// Code, when set on a Block, replaces BLOCKED as the result's code: a remote policy
	// that could not be consulted blocks with POLICY_UNAVAILABLE.
	Code tool.Code
}

// PostExecute is a post-execute participant. Participants run in order, each seeing the
// previous one's output; they run only for dispatched results (success or tool error).
type PostExecute interface {
	Name() string
	PostExecute(ctx context.Context, e *tool.Exec, t Tool, r tool.Result) PostVerdict
}

// PostExecuteFunc adapts a function to a named [PostExecute] participant.
func PostExecuteFunc(name string, fn func(ctx context.Context, e *tool.Exec, t Tool, r tool.Result) PostVerdict) PostExecute {
	return postExecuteFunc{name: name, fn: fn}
}

type postExecuteFunc struct {
	name string
	fn   func(ctx context.Context, e *tool.Exec, t Tool, r tool.Result) PostVerdict
}

func (p postExecuteFunc) Name() string { return p.name }

func (p postExecuteFunc) PostExecute(ctx context.Context, e *tool.Exec, t Tool, r tool.Result) PostVerdict {
	return p.fn(ctx, e, t, r)
}
