package pipeline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/toolsd/toolsd/internal/textcut"
	"github.com/toolsd/toolsd/internal/tool"
)

// Messages of the prepare stage.
const (
	msgDeniedByPolicy  = "call denied by policy"
	msgDeniedByGuard   = "call denied by guard"
	msgCancelledBefore = "call was cancelled before dispatch"
	msgToolSetEnded    = "call was not started: its tool set ended"
	msgToolChanged     = "call was not started: the tool changed while the call waited for approval"
	msgInternal        = "internal error"
	msgNoApprover      = "call requires approval but no approver is available"
	msgNotApproved     = "call was not approved"
	msgCancelledAfter  = "call was cancelled"
	msgBlockedByPolicy = "result blocked by policy"
)

// finish is the outermost stage: it recovers panics, runs definition-owned content
// finalization, replaces a result that does not fit where it is recorded
// ([WithResultFits]) with RESULT_TOO_LARGE, and notifies the result observers, for final
// results and post-results alike.
func (s *snapshot) finish(ctx context.Context, e *tool.Exec) tool.Result {
	start := s.p.opts.now()
	st := &callState{}
	r := s.protect(context.WithValue(ctx, stateKey{}, st), e)
	if st.tool != nil {
		r = finalizeContent(st.tool.Definition(), r)
	}
	if fits := s.p.opts.fits; fits != nil && !fits(e, &r) {
		r = s.tooLargeToRecord(e, r)
	}
	d := s.p.opts.now().Sub(start)
	for _, o := range s.p.opts.results {
		s.notify(o, e, r, d)
	}
	return r
}

// tooLargeToRecord is the RESULT_TOO_LARGE result of a call whose final result r does
// not fit where it is recorded ([WithResultFits]); it keeps what r asked of the turn.
//
//go:noinline
func (s *snapshot) tooLargeToRecord(e *tool.Exec, r tool.Result) tool.Result {
	s.p.opts.logger.Warn("tool result over the session log's event limit; recorded as RESULT_TOO_LARGE",
		zap.String("session_id", e.SessionID), zap.String("call_id", textcut.Ellipsis(e.CallID, textcut.MaxLoggedID)),
		zap.Int("content_bytes", len(r.Content)), zap.Int("value_bytes", len(r.Value)), zap.Int("meta_bytes", len(r.Meta)))
	return keepContexts(r, failure(e, tool.CodeResultTooLarge, fmt.Sprintf(
		"the tool's result (%d bytes) is over the session log's limit for one event", len(r.Content)+len(r.Value)+len(r.Meta)),
		tooLargeReason(r)))
}

// notify hands the final result to one result observer. A panicking observer is
// logged and counted, and the call keeps its result: a panic escaping Run would skip
// the stage tracer's End, leaving the call in flight and uncounted for good.
//
//go:noinline
func (s *snapshot) notify(o ResultObserver, e *tool.Exec, r tool.Result, d time.Duration) {
	defer func() {
		if v := recover(); v != nil {
			s.p.opts.logger.Error("result observer panicked", zap.String("tool", tool.NamedInResult(e.Name)),
				zap.String("call_id", textcut.Ellipsis(e.CallID, textcut.MaxLoggedID)), zap.Any("panic", v), zap.Stack("stack"))
			if s.p.opts.observer != nil {
				s.p.opts.observer.Panicked(e.Name)
			}
		}
	}()
	o(e, r, d)
}

func (s *snapshot) protect(ctx context.Context, e *tool.Exec) (r tool.Result) {
	defer func() {
		if v := recover(); v != nil {
			s.p.opts.logger.Error("tool call panicked", zap.String("tool", tool.NamedInResult(e.Name)),
				zap.String("call_id", textcut.Ellipsis(e.CallID, textcut.MaxLoggedID)), zap.Any("panic", v), zap.Stack("stack"))
			r = panicResult(e, v)
			if s.p.opts.observer != nil {
				s.p.opts.observer.Panicked(e.Name)
			}
		}
	}()
	return s.prepare(ctx, e)
}

// prepare is the prepare stage: the checks of [snapshot.admit]; a call that passes them
// goes on to complete, and through it to dispatch.
//
//nolint:contextcheck // complete and dispatch continue with tr.outer, ctx without the prepare span
func (s *snapshot) prepare(ctx context.Context, e *tool.Exec) tool.Result {
	tr := s.traceOf(ctx)
	if tr != nil {
		defer tr.closePrepare(ctx)
		tr.outer = ctx
		ctx = tr.start(ctx, StagePrepare)
	}
	var r tool.Result
	t, ok := s.admit(ctx, e, &r)
	if !ok {
		return r
	}
	if tr != nil {
		// Dispatch and complete continue with the context from before the prepare
		// span, so that their spans are its siblings.
		tr.end()
		ctx = tr.outer
	}
	return s.complete(ctx, e, t)
}

// admit runs the checks of the prepare stage in order: resolve, validate, pre-execute
// policy, approval, guards and the dispatch gate. It returns the resolved tool, or false
// with the first failure in *r, which is the call's result. The checks run one after
// another, not nested, so a call's stack holds one of them at a time.
func (s *snapshot) admit(ctx context.Context, e *tool.Exec, r *tool.Result) (Tool, bool) {
	t, ok := s.resolve(ctx, e, r)
	ok = ok && s.validate(e, t, r) && s.preExecute(ctx, e, t, r) && s.approval(ctx, e, r) &&
		s.guards(ctx, e, t, r) && s.gate(ctx, e, &t, r)
	return t, ok
}

// resolve finds the tool and the operator's settings for it. A call whose context has
// already ended goes no further: no policy is consulted for it.
func (s *snapshot) resolve(ctx context.Context, e *tool.Exec, r *tool.Result) (Tool, bool) {
	if ctx.Err() != nil {
		*r = failure(e, tool.CodeAbortedBeforeDispatch, msgCancelledBefore, "")
		return nil, false
	}
	t, err := s.p.res.Resolve(ctx, &e.Call)
	if err != nil || t == nil {
		*r = s.unresolved(ctx, e, err)
		return nil, false
	}
	st := stateOf(ctx)
	st.tool = t
	st.settings = s.settings(e.Scope, t.Definition().Name)
	if e.DefinitionMode == tool.ModeParallel && t.Definition().Mode == tool.ModeExclusive {
		*r = s.turnedExclusive(e)
		return nil, false
	}
	return t, true
}

// turnedExclusive is the result of a call scheduled as parallel, from its tool's
// definition, whose tool was registered again as exclusive before the call started: it
// would run beside the batch's other calls.
//
//go:noinline
func (s *snapshot) turnedExclusive(e *tool.Exec) tool.Result {
	return failure(e, tool.CodeAbortedBeforeDispatch,
		fmt.Sprintf("call was not started: tool %q was registered again as exclusive after the batch was scheduled", tool.NamedInResult(e.Name)), "")
}

// unresolved is the result of a call whose tool did not resolve. It is kept out of
// resolve, like the other failure paths of the chain, so that the frames of a call's
// common path stay small (see the scheduler's stack reservation).
//
//go:noinline
func (s *snapshot) unresolved(ctx context.Context, e *tool.Exec, err error) tool.Result {
	switch {
	case errors.Is(err, tool.ErrUnknownTool):
		return failure(e, tool.CodeUnknownTool, fmt.Sprintf("unknown tool %q", tool.NamedInResult(e.Name)), "")
	case errors.Is(err, tool.ErrToolSetGone):
		return failure(e, tool.CodeAbortedBeforeDispatch, msgToolSetEnded, err.Error())
	case ctx.Err() != nil:
		return failure(e, tool.CodeAbortedBeforeDispatch, msgCancelledBefore, "")
	}
	if err == nil {
		err = errors.New("pipeline: resolver returned no tool")
	}
	s.p.opts.logger.Error("resolve tool", zap.String("tool", tool.NamedInResult(e.Name)), zap.Error(err))
	return failure(e, tool.CodeInternal, msgInternal, err.Error())
}

// validate checks the raw arguments against the tool's parameter schema.
func (s *snapshot) validate(e *tool.Exec, t Tool, r *tool.Result) bool {
	if err := t.ValidateArguments(e.Arguments); err != nil {
		*r = invalidArguments(e, err)
		return false
	}
	return true
}

//go:noinline
func invalidArguments(e *tool.Exec, err error) tool.Result {
	// Validators may already say "invalid arguments: …"; say it once.
	detail := strings.TrimPrefix(err.Error(), "invalid arguments: ")
	return failure(e, tool.CodeInvalidArguments,
		fmt.Sprintf("invalid arguments for tool %q: %s", e.Name, detail), "")
}

// preExecute consults the policy and the participants and combines their verdicts (see
// [Combine]). It stops at the first Deny: no later participant could undo it, so the
// outcome is the same in every order. All-abstain takes the default decision.
func (s *snapshot) preExecute(ctx context.Context, e *tool.Exec, t Tool, r *tool.Result) bool {
	st := stateOf(ctx)
	v, by := s.preVerdict(ctx, st, e, t)
	switch v.Decision {
	case Deny:
		*r = s.denied(e, v, by)
		return false
	case Ask:
		st.verdict = v
	}
	return true
}

// preVerdict combines the pre-execute verdicts, naming the participant that decided.
//
//go:noinline
func (s *snapshot) preVerdict(ctx context.Context, st *callState, e *tool.Exec, t Tool) (v Verdict, by string) {
	consult := func(p PreExecute) {
		if pv := p.PreExecute(ctx, st.exposed(e), t); pv.outranks(v) {
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
		// An out-of-range default fails closed, as a participant's decision does.
		v, by = Verdict{Decision: s.cfg.DefaultDecision.strength()}, "default"
	}
	return v, by
}

//go:noinline
func (s *snapshot) denied(e *tool.Exec, v Verdict, by string) tool.Result {
	s.p.opts.logger.Debug("call denied", zap.String("tool", e.Name), zap.String("by", by))
	return denial(e, cmp.Or(v.Code, tool.CodeDenied), v, msgDeniedByPolicy)
}

// guards runs the monotonic guards in order; the first denial is final.
func (s *snapshot) guards(ctx context.Context, e *tool.Exec, t Tool, r *tool.Result) bool {
	if len(s.guardList) == 0 {
		return true
	}
	st := stateOf(ctx)
	for _, g := range s.guardList {
		if v := g.Guard(ctx, st.exposed(e), t); v.Decision.strength() == Deny {
			*r = s.guardDenied(e, v, g.Name())
			return false
		}
	}
	return true
}

// guardDenied renders a guard's denial: a private reason gives the generic message, an
// empty one names the guard.
//
//go:noinline
func (s *snapshot) guardDenied(e *tool.Exec, v Verdict, name string) tool.Result {
	s.p.opts.logger.Debug("call denied by guard", zap.String("tool", e.Name), zap.String("guard", name))
	generic := msgDeniedByGuard
	if !v.Private {
		generic = fmt.Sprintf("call denied by guard %q", name)
	}
	return denial(e, tool.CodeGuardDenied, v, generic)
}

// gate refuses to dispatch a call whose context already ended, or (see regate) whose
// tool set ended while its policy, approval or guards ran, or whose tool was restricted
// away or changed while it waited for approval, or was registered again as exclusive
// while the call, scheduled as parallel from its definition, waited for its policy (a
// remote hook may take seconds). A call that named no tool set, was not asked about and
// was not scheduled as parallel from its definition is not resolved again: nothing it
// waited for takes a person's time, and no other call of its batch runs beside it.
// A call resolved again goes to the tool as resolved now (*t): its provider may have
// reconnected meanwhile with the same definition.
func (s *snapshot) gate(ctx context.Context, e *tool.Exec, t *Tool, r *tool.Result) bool {
	if ctx.Err() != nil {
		*r = failure(e, tool.CodeAbortedBeforeDispatch, msgCancelledBefore, "")
		return false
	}
	if e.ToolSetID == "" && stateOf(ctx).verdict.Decision != Ask && e.DefinitionMode != tool.ModeParallel {
		return true
	}
	return s.regate(ctx, e, t, r)
}

// regate resolves the tool again for a call that may have waited: one of a tool set
// that ended (released, or invalidated by a restriction or replacement) since the call
// resolved it, one that waited for approval (a person may take minutes) while its
// tool was restricted away or registered again with another definition, and one
// scheduled as parallel from its definition whose tool was registered again as
// exclusive, do not start. Either way the call gets ABORTED_BEFORE_DISPATCH. An asked
// call whose tool is gone because its provider left goes on to dispatch, which finds
// the provider not connected.
//
//go:noinline
func (s *snapshot) regate(ctx context.Context, e *tool.Exec, t *Tool, r *tool.Result) bool {
	nt, err := s.p.res.Resolve(ctx, &e.Call)
	if errors.Is(err, tool.ErrToolSetGone) {
		*r = failure(e, tool.CodeAbortedBeforeDispatch, msgToolSetEnded, err.Error())
		return false
	}
	st := stateOf(ctx)
	if st.verdict.Decision != Ask {
		if err == nil && nt != nil && e.DefinitionMode == tool.ModeParallel && nt.Definition().Mode == tool.ModeExclusive {
			*r = s.turnedExclusive(e)
			return false
		}
		if err == nil && nt != nil && nt.Hash() == (*t).Hash() {
			*t, st.tool = nt, nt
		}
		return true
	}
	switch {
	case errors.Is(err, tool.ErrUnknownTool) && s.providerLeft(*t):
		// Not restricted away: its provider left and nothing serves it now. Dispatch
		// finds the provider not connected, as for a call that resolved the tool just
		// before it left, and an idempotent tool's call is retried.
		return true
	case err != nil:
		*r = failure(e, tool.CodeAbortedBeforeDispatch, msgToolChanged, err.Error())
		return false
	case nt == nil || nt.Hash() != (*t).Hash():
		*r = failure(e, tool.CodeAbortedBeforeDispatch, msgToolChanged, "registered again with another definition")
		return false
	}
	*t, st.tool = nt, nt
	return true
}

// providerLeft reports whether t's provider is known to be no longer connected
// ([WithProviderConnected]). An operator's tool (owner "") has no provider to leave.
func (s *snapshot) providerLeft(t Tool) bool {
	return s.p.opts.connected != nil && t.Owner() != "" && !s.p.opts.connected(t.Owner())
}
