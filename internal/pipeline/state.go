package pipeline

import (
	"context"
	"fmt"
	"slices"

	"github.com/toolsd/toolsd/internal/tool"
)

type stateKey struct{}

// callState is one call's private bookkeeping, shared by the layers of its onion through
// ctx. Only the goroutine running the call touches it.
type callState struct {
	// tool is the resolved tool, replaced when a retry re-resolves it.
	tool     Tool
	settings ToolSettings
	// attempt counts dispatches of this call: 1 for the first, 2… for retries.
	attempt int
	// verdict is the combined pre-execute verdict when it is Ask.
	verdict Verdict

	viewReady bool
	view      tool.Exec
	siblings  []string
}

// Attempt reports which dispatch of its call ctx belongs to: 1 for the first, 2 and up
// for retries of idempotent tools (0 outside a pipeline). Dispatchers pass it on to
// providers so they can tell a retry from a new call.
func Attempt(ctx context.Context) int {
	if st, ok := ctx.Value(stateKey{}).(*callState); ok {
		return max(st.attempt, 1)
	}
	return 0
}

func stateOf(ctx context.Context) *callState {
	if st, ok := ctx.Value(stateKey{}).(*callState); ok {
		return st
	}
	return &callState{}
}

// exposed returns the copy of e that policy code sees. Participants get the Exec by
// pointer, so each one is handed a fresh view whose Siblings are a private copy,
// re-copied when a previous participant wrote through it (Arguments is a string, which
// no one can write through): no participant can change what another one sees or what is
// dispatched.
func (st *callState) exposed(e *tool.Exec) *tool.Exec {
	if !st.viewReady || !slices.Equal(st.siblings, e.Siblings) {
		st.siblings = slices.Clone(e.Siblings)
	}
	st.viewReady = true
	st.view = *e
	st.view.Siblings = st.siblings[:len(st.siblings):len(st.siblings)]
	return &st.view
}

// failure builds an error result for the call. It is not inlined: every failure path
// of the chain would otherwise carry a Result of its own in its layer's frame, and a
// call's stack is the sum of those frames (see the scheduler's stack reservation).
//
//go:noinline
func failure(e *tool.Exec, code tool.Code, message, reason string) tool.Result {
	r := tool.FailureWithReason(code, message, reason)
	r.Err.Tool = tool.NamedInResult(e.Name)
	return r
}

// denial renders a Deny verdict: a private or empty reason gives the generic message.
func denial(e *tool.Exec, code tool.Code, v Verdict, generic string) tool.Result {
	msg, reason := v.Reason, v.UserReason
	if v.Private || msg == "" {
		if v.Private && reason == "" {
			reason = v.Reason
		}
		msg = generic
	}
	return failure(e, code, msg, reason)
}

// keepContexts carries what the result asked of its batch — the additional contexts
// gathered so far and concludes_turn — onto a replacement result: a replaced result
// still ran (the session log's own RESULT_TOO_LARGE keeps them too).
func keepContexts(from, to tool.Result) tool.Result {
	to.AdditionalContexts, to.ConcludesTurn = from.AdditionalContexts, from.ConcludesTurn
	return to
}

func panicResult(e *tool.Exec, v any) tool.Result {
	return failure(e, tool.CodeInternal, "internal error", fmt.Sprint("panic: ", v))
}
