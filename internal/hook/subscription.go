package hook

import (
	"cmp"
	"fmt"
	"unicode/utf8"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/glob"
	"github.com/toolsd/toolsd/internal/registry"
)

// Stage is a pipeline stage a hook can subscribe to.
type Stage uint8

// The stages.
const (
	// StagePreExecute: before execution; the hook allows, denies, asks or abstains.
	StagePreExecute Stage = iota
	// StagePostExecute: after execution; the hook accepts, blocks or replaces the result.
	StagePostExecute
	// StageResult: the frozen final result; notification only.
	StageResult

	numStages = 3
)

// String returns the stage as logs and metrics spell it.
func (s Stage) String() string {
	switch s {
	case StagePreExecute:
		return "pre_execute"
	case StagePostExecute:
		return "post_execute"
	case StageResult:
		return "result"
	default:
		return fmt.Sprintf("Stage(%d)", uint8(s))
	}
}

func (s Stage) proto() toolsdv1.HookStage {
	switch s {
	case StagePreExecute:
		return toolsdv1.HookStage_HOOK_STAGE_PRE_EXECUTE
	case StagePostExecute:
		return toolsdv1.HookStage_HOOK_STAGE_POST_EXECUTE
	default:
		return toolsdv1.HookStage_HOOK_STAGE_RESULT
	}
}

func stageOf(s toolsdv1.HookStage) (Stage, bool) {
	switch s {
	case toolsdv1.HookStage_HOOK_STAGE_PRE_EXECUTE:
		return StagePreExecute, true
	case toolsdv1.HookStage_HOOK_STAGE_POST_EXECUTE:
		return StagePostExecute, true
	case toolsdv1.HookStage_HOOK_STAGE_RESULT:
		return StageResult, true
	}
	return 0, false
}

// Subscription is one stage a hook receives requests for.
type Subscription struct {
	Stage Stage
	// Tool is a glob over whole tool names (path.Match syntax, '/' an ordinary
	// character); "" and "*" match every tool.
	Tool string
	// Scope is a glob over scope paths, matched per '/' segment with path.Match, "**"
	// standing for any number of segments; "" matches every scope.
	Scope string
	// Priority orders the hooks of one stage: lower runs first.
	Priority int32
}

// subscription is a validated Subscription with its matchers.
type subscription struct {
	Subscription
	tool  glob.Pattern
	scope glob.Pattern
}

func (s *subscription) matches(toolName, scope string) bool {
	return s.tool.Match(toolName) && s.scope.Match(scope)
}

// hello is a validated HookHello.
type hello struct {
	name     string
	failOpen bool
	subs     []subscription
}

// parseHello validates a hook's hello; its errors are shown to the hook.
func parseHello(h *toolsdv1.HookHello) (hello, error) {
	out := hello{name: h.GetName(), failOpen: h.GetFailOpen()}
	switch {
	case out.name == "":
		return hello{}, fmt.Errorf("%w: hello.name is empty", errBadHello)
	case len(out.name) > maxNameBytes || !utf8.ValidString(out.name):
		return hello{}, fmt.Errorf("%w: hello.name must be valid UTF-8 of at most %d bytes", errBadHello, maxNameBytes)
	case len(h.GetSubscriptions()) == 0:
		return hello{}, fmt.Errorf("%w: hello.subscriptions is empty", errBadHello)
	case len(h.GetSubscriptions()) > maxSubscriptions:
		return hello{}, fmt.Errorf("%w: %d subscriptions, at most %d", errBadHello, len(h.GetSubscriptions()), maxSubscriptions)
	}
	for i, s := range h.GetSubscriptions() {
		sub, err := parseSubscription(s)
		if err != nil {
			return hello{}, fmt.Errorf("%w: hello.subscriptions[%d]: %w", errBadHello, i, err)
		}
		out.subs = append(out.subs, sub)
	}
	return out, nil
}

func parseSubscription(s *toolsdv1.HookSubscription) (subscription, error) {
	stage, ok := stageOf(s.GetStage())
	if !ok {
		return subscription{}, fmt.Errorf("invalid stage %s", s.GetStage())
	}
	tg, sg, err := parseGlobs(s.GetTool(), s.GetScope())
	if err != nil {
		return subscription{}, err
	}
	return subscription{
		Subscription: Subscription{Stage: stage, Tool: s.GetTool(), Scope: s.GetScope(), Priority: s.GetPriority()},
		tool:         tg,
		scope:        sg,
	}, nil
}

// parseGlobs compiles a tool and a scope glob, a subscription's or a requirement's; ""
// matches every tool, every scope. A glob no tool name or scope can match is refused,
// as a policy rule's is: a hook subscribed with it would never be asked, and a
// requirement with it would cover no call, so the calls either was written to guard
// would run without the hook.
func parseGlobs(toolGlob, scopeGlob string) (tg, sg glob.Pattern, err error) {
	if len(toolGlob) > maxGlobBytes || len(scopeGlob) > maxGlobBytes {
		return tg, sg, fmt.Errorf("globs are limited to %d bytes", maxGlobBytes)
	}
	if tg, err = glob.Tool(cmp.Or(toolGlob, "*")); err != nil {
		return tg, sg, fmt.Errorf("tool glob %q: %w", toolGlob, err)
	}
	if sg, err = glob.Scope(cmp.Or(scopeGlob, "**"), maxGlobStars); err != nil {
		return tg, sg, fmt.Errorf("scope glob %q: %w", scopeGlob, err)
	}
	if err = registry.ToolPatternProblem(cmp.Or(toolGlob, "*")); err != nil {
		return tg, sg, fmt.Errorf("tool glob %q: %w", toolGlob, err)
	}
	if err = registry.ScopePatternProblem(scopeGlob); err != nil {
		return tg, sg, fmt.Errorf("scope glob %q: %w", scopeGlob, err)
	}
	return tg, sg, nil
}
