package pipeline

import (
	"context"
	"fmt"

	"github.com/toolsd/toolsd/internal/tool"
)

// Decision is a pre-execute participant's answer. Decisions are ordered by strength:
// Abstain < Allow < Ask < Deny, and combining verdicts keeps the strongest.
type Decision uint8

// The pre-execute decisions.
const (
	// Abstain leaves the decision to the other participants (the zero value).
	Abstain Decision = iota
	// Allow lets the call proceed to the guards.
	Allow
	// Ask requires approval from the batch's approver before the guards run.
	Ask
	// Deny fails the call with DENIED; nothing can turn it back into permission.
	Deny
)

// String returns the decision as config files spell it.
func (d Decision) String() string {
	switch d {
	case Abstain:
		return "abstain"
	case Allow:
		return "allow"
	case Ask:
		return "ask"
	case Deny:
		return "deny"
	default:
		return fmt.Sprintf("Decision(%d)", uint8(d))
	}
}

// ParseDecision parses "allow", "deny", "ask" or "abstain".
func ParseDecision(s string) (Decision, error) {
	switch s {
	case "abstain":
		return Abstain, nil
	case "allow":
		return Allow, nil
	case "ask":
		return Ask, nil
	case "deny":
		return Deny, nil
	}
	return Abstain, fmt.Errorf("pipeline: unknown decision %q (want allow, deny or ask)", s)
}

// strength folds out-of-range decisions into Deny so a buggy participant fails closed.
func (d Decision) strength() Decision {
	if d > Deny {
		return Deny
	}
	return d
}

// Verdict is one participant's answer for one call.
type Verdict struct {
	Decision Decision
	// Reason is model-facing: a denial's message, or the question put to the approver.
	Reason string
	// UserReason is user-facing detail; it goes to the error's Reason, never to content.
	UserReason string
	// Private keeps Reason out of model content: the model sees a generic message and
	// Reason is kept (as the error's Reason) only when UserReason is empty.
	Private bool
	// Code, when set on a Deny, replaces DENIED as the result's code: a remote policy
	// that could not be consulted denies with POLICY_UNAVAILABLE.
	Code tool.Code
}

// Combine folds verdicts by the decision algebra:
//
//	any Deny          → Deny   (first denying verdict's reasons)
//	else any Ask      → Ask    (first asking verdict's reasons)
//	else any Allow    → Allow
//	else (all Abstain, or none) → Abstain; the pipeline then applies its default decision
//
// "First" skips verdicts without reasons (neither Reason nor UserReason) when a later
// one of the same decision has some: a policy rule that asks without saying why must
// not hide the question a hook asks. The decision is independent of the order of
// verdicts; only which reason is reported depends on it. A decision outside the enum
// counts as Deny.
func Combine(vs ...Verdict) Verdict {
	var out Verdict
	for _, v := range vs {
		if v.outranks(out) {
			out = v
			out.Decision = v.Decision.strength()
		}
	}
	return out
}

// outranks reports whether v replaces out, the verdicts combined so far: its decision is
// stronger, or it is the same Ask or Deny with reasons where out has none.
func (v Verdict) outranks(out Verdict) bool {
	d := v.Decision.strength()
	if d != out.Decision || d < Ask {
		return d > out.Decision
	}
	return out.Reason == "" && out.UserReason == "" && (v.Reason != "" || v.UserReason != "")
}

// PreExecute is a pre-execute participant (hooks, permission rules, sandbox rules). It
// sees a copy of the call: it cannot rewrite the arguments that run.
type PreExecute interface {
	Name() string
	PreExecute(ctx context.Context, e *tool.Exec, t Tool) Verdict
}

// PreExecuteFunc adapts a function to a named [PreExecute] participant.
func PreExecuteFunc(name string, fn func(ctx context.Context, e *tool.Exec, t Tool) Verdict) PreExecute {
	return preExecuteFunc{name: name, fn: fn}
}

type preExecuteFunc struct {
	name string
	fn   func(ctx context.Context, e *tool.Exec, t Tool) Verdict
}

func (p preExecuteFunc) Name() string { return p.name }

func (p preExecuteFunc) PreExecute(ctx context.Context, e *tool.Exec, t Tool) Verdict {
	return p.fn(ctx, e, t)
}

// Guard is a monotonic owner policy that runs after pre-execute and approval. It can only
// deny or abstain: a Deny verdict is final (GUARD_DENIED), any other decision abstains (a
// guard cannot allow or ask), and a decision outside the enum denies. The denial's
// Reason is model-facing unless Private, and UserReason goes to the error's Reason, as
// for a policy's denial; Code is ignored. A denial without a reason names the guard.
type Guard interface {
	Name() string
	Guard(ctx context.Context, e *tool.Exec, t Tool) Verdict
}

// GuardSource is a [Policy] that also supplies guards: [Pipeline.SetPolicy] installs
// them, after those of [WithGuards], together with the policy, so that a reload swaps
// rules and guards at once. The policy package's *Set satisfies it.
type GuardSource interface {
	// Guards returns the guards in the order they run; the caller must not modify it.
	Guards() []Guard
}

// GuardFunc adapts a function to a named [Guard]: deny true denies with reason as the
// model-facing message.
func GuardFunc(name string, fn func(ctx context.Context, e *tool.Exec, t Tool) (deny bool, reason string)) Guard {
	return guardFunc{name: name, fn: fn}
}

type guardFunc struct {
	name string
	fn   func(ctx context.Context, e *tool.Exec, t Tool) (bool, string)
}

func (g guardFunc) Name() string { return g.name }

func (g guardFunc) Guard(ctx context.Context, e *tool.Exec, t Tool) Verdict {
	if deny, reason := g.fn(ctx, e, t); deny {
		return Verdict{Decision: Deny, Reason: reason}
	}
	return Verdict{}
}
