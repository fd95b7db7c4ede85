package hook

import (
	"context"
	"fmt"

	"go.uber.org/zap"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/pipeline"
	"github.com/toolsd/toolsd/internal/textcut"
	"github.com/toolsd/toolsd/internal/tool"
)

// Model-facing messages of the hub's own verdicts.
const (
	msgPolicyUnavailable = "call denied: a policy hook is unavailable"
	msgResultUnavailable = "result withheld: a policy hook is unavailable"
	msgCancelledBefore   = "call was cancelled before dispatch"
	msgCancelledReview   = "call was cancelled before its result was reviewed"
)

// PreExecute returns the pre-execute participant of the connected hooks. For each call
// it asks every hook subscribed to the call at once and combines their verdicts with
// [pipeline.Combine] in priority order (lower first), so the decision and the reported
// reason do not depend on which hook answers first. It returns as soon as the outcome is
// settled: when a hook denies and every hook before it has answered. With no hook
// subscribed it abstains without cost, unless a required hook is absent (see
// [WithRequired]): the call is then denied without asking the others.
func (h *Hub) PreExecute() pipeline.PreExecute { return preExecute{h} }

type preExecute struct{ h *Hub }

func (preExecute) Name() string { return "hooks" }

func (p preExecute) PreExecute(ctx context.Context, e *tool.Exec, _ pipeline.Tool) pipeline.Verdict {
	hooks := p.h.subscribed(StagePreExecute, e)
	absent := p.h.absent(StagePreExecute, e, hooks)
	if len(hooks) == 0 && absent == nil {
		return pipeline.Verdict{}
	}
	if ctx.Err() != nil {
		return cancelledVerdict()
	}
	if absent != nil {
		p.h.failedAbsent(absent, e)
		return unavailablePre(absent.name, errRequiredAbsent)
	}
	x := p.h.send(StagePreExecute, hooks, hookCall(e), nil, p.h.traceContext(ctx))
	defer x.close()
	vs := make([]pipeline.Verdict, len(hooks))
	answered := make([]bool, len(hooks))
	for left := len(hooks); left > 0; left-- {
		a, end := x.next(ctx)
		switch end {
		case cancelled:
			return p.h.cancelledPre(x, hooks, e, vs)
		case expired:
			for i, c := range hooks {
				if !answered[i] {
					vs[i] = p.h.preFailure(c, e, errTimeout)
				}
			}
			return pipeline.Combine(vs...)
		}
		vs[a.slot], answered[a.slot] = p.h.preVerdict(hooks[a.slot], e, a), true
		if settled(vs, answered) {
			break
		}
	}
	return pipeline.Combine(vs...)
}

// cancelledPre is the verdict of a call whose context ended while hooks were still
// deciding. A deny already given (or a hook's DENY arriving with the cancellation)
// stands: nothing could turn it into permission, and it is more specific than the
// cancellation. The hooks that have not answered abstain from it, and so do those whose
// answer arriving with the cancellation is a failure (a dropped stream, a verdict not
// valid here): the call no longer waits for them, so it is neither denied for it nor
// counted as their failure.
func (h *Hub) cancelledPre(x *exchange, hooks []*conn, e *tool.Exec, vs []pipeline.Verdict) pipeline.Verdict {
	for drained := false; !drained; {
		select {
		case a := <-x.ch:
			if a.err == nil && a.d.GetVerdict() == toolsdv1.HookVerdict_HOOK_VERDICT_DENY {
				vs[a.slot] = h.preVerdict(hooks[a.slot], e, a)
			}
		default:
			drained = true
		}
	}
	if v := pipeline.Combine(vs...); v.Decision == pipeline.Deny {
		return v
	}
	return cancelledVerdict()
}

// settled reports whether the leading answered verdicts include a Deny: no later
// verdict can change the outcome or its reason.
func settled(vs []pipeline.Verdict, answered []bool) bool {
	for i := range vs {
		if !answered[i] {
			return false
		}
		if vs[i].Decision == pipeline.Deny {
			return true
		}
	}
	return true
}

// preVerdict maps one hook's answer to a verdict.
func (h *Hub) preVerdict(c *conn, e *tool.Exec, a answer) pipeline.Verdict {
	if a.err != nil {
		return h.preFailure(c, e, a.err)
	}
	d := a.d
	switch d.GetVerdict() {
	case toolsdv1.HookVerdict_HOOK_VERDICT_UNSPECIFIED:
		return pipeline.Verdict{}
	case toolsdv1.HookVerdict_HOOK_VERDICT_ALLOW:
		return pipeline.Verdict{Decision: pipeline.Allow}
	case toolsdv1.HookVerdict_HOOK_VERDICT_DENY:
		return pipeline.Verdict{Decision: pipeline.Deny, Reason: reasonOf(d), Private: d.GetPrivate(),
			UserReason: userReason(c, reasonOf(d), "denied the call")}
	case toolsdv1.HookVerdict_HOOK_VERDICT_ASK:
		return pipeline.Verdict{Decision: pipeline.Ask, Reason: reasonOf(d), Private: d.GetPrivate(),
			UserReason: userReason(c, reasonOf(d), "asks for approval")}
	}
	return h.preFailure(c, e, fmt.Errorf("%w: verdict %s is not valid before execution", errProtocol, d.GetVerdict()))
}

// preFailure is the verdict for a hook that could not decide: deny with
// POLICY_UNAVAILABLE, or abstain when the hook fails open for e (see [Hub.failsOpen]).
func (h *Hub) preFailure(c *conn, e *tool.Exec, err error) pipeline.Verdict {
	if h.failed(c, StagePreExecute, e, err) {
		return pipeline.Verdict{}
	}
	return unavailablePre(c.hello.name, err)
}

// unavailablePre denies a call that the hook named hook could not decide, for err.
func unavailablePre(hook string, err error) pipeline.Verdict {
	return pipeline.Verdict{
		Decision:   pipeline.Deny,
		Reason:     msgPolicyUnavailable,
		UserReason: failureReason(hook, err),
		Code:       tool.CodePolicyUnavailable,
	}
}

// cancelledVerdict ends a call whose context ended while hooks were deciding: it must
// not run, and its code says why.
func cancelledVerdict() pipeline.Verdict {
	return pipeline.Verdict{Decision: pipeline.Deny, Reason: msgCancelledBefore, Code: tool.CodeAbortedBeforeDispatch}
}

// failed logs and counts a hook that could not be used for a call, and reports
// whether the call goes on without it (see [Hub.failsOpen]).
func (h *Hub) failed(c *conn, stage Stage, e *tool.Exec, err error) (failOpen bool) {
	failOpen = h.failsOpen(c, stage, e)
	h.opts.obs.HookFailure(c.hello.name, stage.String(), failOpen)
	c.log.Warn("hook failed", zap.String("hook", c.hello.name), zap.String("stage", stage.String()), zap.String("tool", e.Name),
		zap.String("call_id", textcut.Ellipsis(e.CallID, textcut.MaxLoggedID)), zap.Bool("fail_open", failOpen), zap.Error(err))
	return failOpen
}

// MaxReasonBytes bounds a hook's reason: it becomes the model-facing content of a
// denied or blocked call (and its error's reason), which no result size limit covers.
const MaxReasonBytes = 4096

// reasonOf is the decision's reason, cut at MaxReasonBytes on a rune boundary.
func reasonOf(d *toolsdv1.HookDecision) string {
	r := d.GetReason()
	if len(r) <= MaxReasonBytes {
		return r
	}
	return textcut.Prefix(r, MaxReasonBytes-len("…")) + "…"
}

// userReason names the hook for users: `hook "x": reason`, or `hook "x" <what>`.
func userReason(c *conn, reason, what string) string {
	if reason == "" {
		return fmt.Sprintf("hook %q %s", c.hello.name, what)
	}
	return fmt.Sprintf("hook %q: %s", c.hello.name, reason)
}
