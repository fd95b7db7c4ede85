package policy

import (
	"context"
	"fmt"

	"cel.dev/cel-go/cel"

	"github.com/toolsd/toolsd/internal/glob"
	"github.com/toolsd/toolsd/internal/pipeline"
	"github.com/toolsd/toolsd/internal/tool"
)

// Set is one parsed, immutable policy section. The nil *Set is valid: it abstains on
// every call, defaults to allow and has no tool settings.
type Set struct {
	source string
	def    pipeline.Decision
	rules  []rule
	guards []pipeline.Guard
	tools  map[string]pipeline.ToolSettings
}

var (
	_ pipeline.Policy      = (*Set)(nil)
	_ pipeline.GuardSource = (*Set)(nil)
)

// rule is one permission rule or guard; its verdict applies when scope, tool and when
// match.
type rule struct {
	name    string // a guard's, as its position in the section: "guards[0]"
	where   string // "config.yaml:12:7: policy.rules[2].when" for fail-closed reasons
	scope   glob.Pattern
	tool    glob.Pattern
	when    cel.Program
	verdict pipeline.Verdict
}

// Name identifies the set among pre-execute participants.
func (s *Set) Name() string { return "policy" }

// DefaultDecision is the decision when every participant abstains (allow when unset).
func (s *Set) DefaultDecision() pipeline.Decision {
	if s == nil || s.def == pipeline.Abstain {
		return pipeline.Allow
	}
	return s.def
}

// Tool returns the settings configured for the named tool (zero when none).
func (s *Set) Tool(_, name string) pipeline.ToolSettings {
	if s == nil {
		return pipeline.ToolSettings{}
	}
	return s.tools[name]
}

// Rules reports how many rules the set holds.
func (s *Set) Rules() int {
	if s == nil {
		return 0
	}
	return len(s.rules)
}

// Guards returns the set's guards, in the order of the section's `guards:` list. Each
// denies a call its scope, tool and when match, with its reason, and abstains on others;
// a when that fails to evaluate denies. The pipeline runs them after pre-execute and
// approval.
func (s *Set) Guards() []pipeline.Guard {
	if s == nil {
		return nil
	}
	return s.guards
}

// PreExecute evaluates the rules in order and combines the verdicts of every rule that
// matches (see [pipeline.Combine]), stopping at the first deny; no match abstains. The
// arguments are decoded only when a matching rule has a condition. A condition that
// fails to evaluate makes its rule deny. A condition the call's cancellation interrupts
// does not end the rules: a later rule's denial is more specific than the
// cancellation, and stands as it would had it come first; without one, the call is
// cancelled before dispatch (see [interrupted]).
func (s *Set) PreExecute(ctx context.Context, e *tool.Exec, _ pipeline.Tool) pipeline.Verdict {
	var out, cut pipeline.Verdict
	if s == nil {
		return out
	}
	a := callVars{call: &e.Call}
	for i := range s.rules {
		v, ok := s.rules[i].verdictFor(ctx, e, &a, "rule")
		if !ok {
			continue
		}
		if v.Code == tool.CodeAbortedBeforeDispatch {
			cut = v
			continue
		}
		if out = pipeline.Combine(out, v); out.Decision == pipeline.Deny {
			return out
		}
	}
	if cut.Decision == pipeline.Deny {
		return cut
	}
	return out
}

// callVars decodes a call's variables for conditions once, when the first is evaluated.
type callVars struct {
	call *tool.Call
	act  map[string]any
	err  error
	done bool
}

func (c *callVars) get() (map[string]any, error) {
	if !c.done {
		c.act, c.err = vars(c.call)
		c.done = true
	}
	return c.act, c.err
}

// verdictFor is r's verdict on the call and whether r applies: its scope and tool match
// and its condition, if any, holds. A condition that fails to evaluate applies, with
// the fail-closed denial of a what ("rule" or "guard"), unless the call's cancellation
// interrupted it (see [interrupted]).
func (r *rule) verdictFor(ctx context.Context, e *tool.Exec, c *callVars, what string) (pipeline.Verdict, bool) {
	if !r.scope.Match(e.Scope) || !r.tool.Match(e.Name) {
		return pipeline.Verdict{}, false
	}
	if r.when == nil {
		return r.verdict, true
	}
	act, err := c.get()
	ok := false
	if err == nil {
		ok, err = evalBool(ctx, r.when, act)
	}
	switch {
	case err != nil && ctx.Err() != nil:
		return interrupted(what)
	case err != nil:
		return failClosed(r, err, what), true
	case !ok:
		return pipeline.Verdict{}, false
	}
	return r.verdict, true
}

// msgCancelledBefore is the pipeline's message for a call cancelled before dispatch.
const msgCancelledBefore = "call was cancelled before dispatch"

// interrupted is the verdict, and whether it applies, of a rule or guard (what) whose
// condition the call's cancellation interrupted (CEL checks the context as it loops).
// The condition did not fail, so the call is not denied as if it had: a rule answers
// the cancellation, as the hooks do (ABORTED_BEFORE_DISPATCH); a guard, whose denial
// cannot carry a code, abstains, and the gate after the guards ends the call the same
// way.
func interrupted(what string) (pipeline.Verdict, bool) {
	if what == "guard" {
		return pipeline.Verdict{}, false
	}
	return pipeline.Verdict{Decision: pipeline.Deny, Reason: msgCancelledBefore, Code: tool.CodeAbortedBeforeDispatch}, true
}

// failClosed is the denial of a rule or guard (what) whose condition failed.
func failClosed(r *rule, err error, what string) pipeline.Verdict {
	return pipeline.Verdict{
		Decision:   pipeline.Deny,
		Reason:     "call denied by policy (" + what + " evaluation failed)",
		UserReason: fmt.Sprintf("%s: %v", r.where, err),
	}
}

// guard is one parsed guard as the pipeline runs it.
type guard struct{ r rule }

func guardsOf(rs []rule) []pipeline.Guard {
	if len(rs) == 0 {
		return nil
	}
	gs := make([]pipeline.Guard, len(rs))
	for i := range rs {
		gs[i] = &guard{r: rs[i]}
	}
	return gs
}

// Name is the guard's position in the policy section, as "guards[0]".
func (g *guard) Name() string { return g.r.name }

// Guard denies a call that the guard's scope, tool and when match; the arguments are
// decoded only when it has a condition.
func (g *guard) Guard(ctx context.Context, e *tool.Exec, _ pipeline.Tool) pipeline.Verdict {
	v, _ := g.r.verdictFor(ctx, e, &callVars{call: &e.Call}, "guard")
	return v
}
