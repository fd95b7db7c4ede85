package pipeline

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/toolsd/toolsd/internal/tool"
)

// complete wraps dispatch: it turns a success that finished after the caller cancelled
// into ABORTED (more specific failures stay; a tool's request to end the turn stays
// too), then runs the post-execute chain and normalization. Only dispatched results get
// here.
func (s *snapshot) complete(ctx context.Context, e *tool.Exec, t Tool) tool.Result {
	r := shape(e, s.dispatch(ctx, e, t))
	if ctx.Err() != nil && !r.IsError {
		r = keepContexts(r, failure(e, tool.CodeAborted, msgCancelledAfter, ""))
	}
	st := stateOf(ctx)
	r = s.postExecute(ctx, e, st, r)
	return s.normalize(e, st, r)
}

// shape makes IsError and Err agree and names the tool on every error.
func shape(e *tool.Exec, r tool.Result) tool.Result {
	if r.Err == nil && !r.IsError {
		return r
	}
	return shapeError(e, r)
}

//go:noinline
func shapeError(e *tool.Exec, r tool.Result) tool.Result {
	var er tool.Error
	if r.Err != nil {
		er = *r.Err
	} else {
		er = tool.Error{Code: tool.CodeToolError, Message: strings.TrimPrefix(r.Content, tool.ErrorContentPrefix)}
	}
	if er.Code == "" {
		er.Code = tool.CodeToolError
	}
	if er.Tool == "" {
		er.Tool = tool.NamedInResult(e.Name)
	}
	r.IsError, r.Err, r.Value = true, &er, nil
	return r
}

// postExecute runs the participants in order, each seeing the previous one's output.
// Replace swaps content and/or value (an error's message follows its content; content
// derived from the old value is derived again from a new value replacing it alone);
// Block ends the chain with BLOCKED; AddContext
// appends, in order, to the result's additional contexts (kept across a Block).
func (s *snapshot) postExecute(ctx context.Context, e *tool.Exec, st *callState, r tool.Result) tool.Result {
	for _, p := range s.p.opts.post {
		pv := p.PostExecute(ctx, st.exposed(e), st.tool, cloneResult(r))
		if len(pv.AddContext) > 0 {
			r.AdditionalContexts = append(slices.Clip(r.AdditionalContexts), pv.AddContext...)
		}
		switch pv.Action {
		case Accept:
		case Block:
			msg := pv.Reason
			if msg == "" {
				msg = msgBlockedByPolicy
			}
			return keepContexts(r, failure(e, cmp.Or(pv.Code, tool.CodeBlocked), msg, pv.UserReason))
		case Replace:
			if pv.Value != nil && r.IsError {
				return keepContexts(r, failure(e, tool.CodeInvalidResult, "post-execute policy produced an invalid result",
					fmt.Sprintf("post-execute %q replaced the value of an error result", p.Name())))
			}
			if pv.Content != nil {
				r = replaceContent(r, *pv.Content)
			} else if pv.Value != nil && tool.DerivedFrom(r.Content, r.Value) {
				// The content is the old value's text: kept, it would show the model
				// what the new value replaced (a redaction of the value alone).
				r.Content, _ = tool.ContentFromValue(pv.Value) // "" if invalid: normalize fails the value
			}
			if pv.Value != nil {
				r.Value = bytes.Clone(pv.Value)
			}
		default:
			return keepContexts(r, failure(e, tool.CodeInternal, msgInternal,
				fmt.Sprintf("post-execute %q returned unknown action %d", p.Name(), pv.Action)))
		}
	}
	return r
}

// replaceContent swaps a result's content; on an error result the model-facing message
// follows, so content stays "Error: <message>".
func replaceContent(r tool.Result, content string) tool.Result {
	if !r.IsError {
		r.Content = content
		return r
	}
	er := *r.Err
	er.Message = strings.TrimPrefix(content, tool.ErrorContentPrefix)
	r.Err, r.Content = &er, tool.ErrorContentPrefix+er.Message
	return r
}

// cloneResult gives a participant a result it can scribble on without effect.
func cloneResult(r tool.Result) tool.Result {
	r.Value = bytes.Clone(r.Value)
	r.Meta = bytes.Clone(r.Meta)
	r.AdditionalContexts = slices.Clip(r.AdditionalContexts)
	if r.Err != nil {
		er := *r.Err
		r.Err = &er
	}
	return r
}
