package pipeline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"

	"go.uber.org/zap"

	"github.com/toolsd/toolsd/internal/tool"
)

// Messages of the prepare stage.
const (
	msgDeniedByPolicy  = "call denied by policy"
	msgCancelledBefore = "call was cancelled before dispatch"
	msgToolSetReleased = "call was not started: tool set released"
	msgInternal        = "internal error"
	msgNoApprover      = "call requires approval but no approver is available"
	msgNotApproved     = "call was not approved"
	msgCancelledAfter  = "call was cancelled"
	msgBlockedByPolicy = "result blocked by policy"
)

// finish is the outermost layer: it recovers panics, runs definition-owned content
// finalization and notifies the result observers, for final results and post-results alike.
func (s *snapshot) finish(ctx context.Context, e *tool.Exec, _ Tool, next Handler) tool.Result {
	start := s.p.opts.now()
	st := &callState{}
	r := s.protect(context.WithValue(ctx, stateKey{}, st), e, next)
	if st.tool != nil {
		r = finalizeContent(st.tool.Definition(), r)
	}
	d := s.p.opts.now().Sub(start)
	for _, o := range s.p.opts.results {
		o(e, r, d)
	}
	return r
}

func (s *snapshot) protect(ctx context.Context, e *tool.Exec, next Handler) (r tool.Result) {
	defer func() {
		if v := recover(); v != nil {
			s.p.opts.logger.Error("tool call panicked", zap.String("tool", e.Name),
				zap.String("call_id", e.CallID), zap.Any("panic", v), zap.Stack("stack"))
			r = panicResult(e, v)
		}
	}()
	return next(ctx, e, nil)
}

// resolve finds the tool and the operator's settings for it. A call whose context has
// already ended goes no further: no policy is consulted for it.
func (s *snapshot) resolve(ctx context.Context, e *tool.Exec, _ Tool, next Handler) tool.Result {
	if ctx.Err() != nil {
		return failure(e, tool.CodeAbortedBeforeDispatch, msgCancelledBefore, "")
	}
	t, err := s.p.res.Resolve(ctx, &e.Call)
	switch {
	case err == nil && t != nil:
	case errors.Is(err, tool.ErrUnknownTool):
		return failure(e, tool.CodeUnknownTool, fmt.Sprintf("unknown tool %q", e.Name), "")
	case errors.Is(err, tool.ErrToolSetGone):
		return failure(e, tool.CodeAbortedBeforeDispatch, msgToolSetReleased, err.Error())
	case ctx.Err() != nil:
		return failure(e, tool.CodeAbortedBeforeDispatch, msgCancelledBefore, "")
	default:
		if err == nil {
			err = errors.New("pipeline: resolver returned no tool")
		}
		s.p.opts.logger.Error("resolve tool", zap.String("tool", e.Name), zap.Error(err))
		return failure(e, tool.CodeInternal, msgInternal, err.Error())
	}
	st := stateOf(ctx)
	st.tool = t
	st.settings = s.settings(e.Scope, t.Definition().Name)
	return next(ctx, e, t)
}

// validate checks the raw arguments against the tool's parameter schema.
func (s *snapshot) validate(ctx context.Context, e *tool.Exec, t Tool, next Handler) tool.Result {
	if err := t.ValidateArguments(e.Arguments); err != nil {
		// Validators may already say "invalid arguments: …"; say it once.
		detail := strings.TrimPrefix(err.Error(), "invalid arguments: ")
		return failure(e, tool.CodeInvalidArguments,
			fmt.Sprintf("invalid arguments for tool %q: %s", e.Name, detail), "")
	}
	return next(ctx, e, t)
}

// preExecute consults the policy and the participants and combines their verdicts (see
// [Combine]). It stops at the first Deny: no later participant could undo it, so the
// outcome is the same in every order. All-abstain takes the default decision.
func (s *snapshot) preExecute(ctx context.Context, e *tool.Exec, t Tool, next Handler) tool.Result {
	st := stateOf(ctx)
	var v Verdict
	by := ""
	consult := func(p PreExecute) {
		if pv := p.PreExecute(ctx, st.exposed(e), t); pv.Decision.strength() > v.Decision {
			v, by = Combine(pv), p.Name()
		}
	}
	if s.policy != nil {
		consult(s.policy)
	}
	for _, p := range s.p.opts.pre {
		if v.Decision == Deny {
			break
		}
		consult(p)
	}
	if v.Decision == Abstain {
		v, by = Verdict{Decision: s.cfg.DefaultDecision}, "default"
	}
	switch v.Decision {
	case Deny:
		s.p.opts.logger.Debug("call denied", zap.String("tool", e.Name), zap.String("by", by))
		return denial(e, cmp.Or(v.Code, tool.CodeDenied), v, msgDeniedByPolicy)
	case Ask:
		st.verdict = v
	}
	return next(ctx, e, t)
}

// guards runs the monotonic guards in order; the first denial is final.
func (s *snapshot) guards(ctx context.Context, e *tool.Exec, t Tool, next Handler) tool.Result {
	if len(s.p.opts.guards) == 0 {
		return next(ctx, e, t)
	}
	st := stateOf(ctx)
	for _, g := range s.p.opts.guards {
		if deny, reason := g.Guard(ctx, st.exposed(e), t); deny {
			if reason == "" {
				reason = fmt.Sprintf("call denied by guard %q", g.Name())
			}
			return failure(e, tool.CodeGuardDenied, reason, "")
		}
	}
	return next(ctx, e, t)
}

// gate refuses to dispatch a call whose context already ended.
func (s *snapshot) gate(ctx context.Context, e *tool.Exec, t Tool, next Handler) tool.Result {
	if ctx.Err() != nil {
		return failure(e, tool.CodeAbortedBeforeDispatch, msgCancelledBefore, "")
	}
	return next(ctx, e, t)
}
