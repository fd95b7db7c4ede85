package hook

import (
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/toolsd/toolsd/internal/glob"
	"github.com/toolsd/toolsd/internal/textcut"
	"github.com/toolsd/toolsd/internal/tool"
)

// errRequiredAbsent is the failure of a required hook that is not connected.
var errRequiredAbsent = errors.New("hook: required hook not connected")

// Requirement names a hook that must take part in some calls at one stage (see
// [WithRequired]). Create it with [NewRequirement].
type Requirement struct {
	name  string
	stage Stage
	tool  glob.Pattern
	scope glob.Pattern
}

// NewRequirement returns the requirement that a hook named name take part in stage
// ("pre_execute" or "post_execute") of the calls whose tool matches the tool glob and
// whose scope matches the scope glob, globs as a subscription's ("" matches every tool,
// every scope). A glob no tool name or scope can match is refused: the requirement
// would cover no call, and the calls it was written for would run without the hook.
func NewRequirement(name, stage, toolGlob, scopeGlob string) (Requirement, error) {
	r := Requirement{name: name}
	switch stage {
	case StagePreExecute.String():
		r.stage = StagePreExecute
	case StagePostExecute.String():
		r.stage = StagePostExecute
	default:
		return Requirement{}, fmt.Errorf("stage %q is not %s or %s", stage, StagePreExecute, StagePostExecute)
	}
	if name == "" || len(name) > maxNameBytes || !utf8.ValidString(name) {
		return Requirement{}, fmt.Errorf("name %q is not a hook's name (valid UTF-8 of 1 to %d bytes)", name, maxNameBytes)
	}
	var err error
	if r.tool, r.scope, err = parseGlobs(toolGlob, scopeGlob); err != nil {
		return Requirement{}, err
	}
	return r, nil
}

// absent returns the first requirement for stage covering e that none of hooks (those
// subscribed to e at stage) meets, or nil. Only a hook whose identity is not confined
// to some scopes meets one: hooks choose their names, and a tenant's hook named like
// the operator's must not stand in for it.
func (h *Hub) absent(stage Stage, e *tool.Exec, hooks []*conn) *Requirement {
	for i := range h.opts.required {
		r := &h.opts.required[i]
		if r.covers(stage, e) && !slices.ContainsFunc(hooks, r.metBy) {
			return r
		}
	}
	return nil
}

// covers reports whether r applies to e at stage.
func (r *Requirement) covers(stage Stage, e *tool.Exec) bool {
	return r.stage == stage && r.tool.Match(e.Name) && r.scope.Match(e.Scope)
}

// metBy reports whether c, subscribed to a call r covers, meets r.
func (r *Requirement) metBy(c *conn) bool { return c.hello.name == r.name && !c.confined }

// failsOpen reports whether c's failure at stage lets e go on without it: c said
// fail_open in its hello and meets no requirement covering e. A hook that meets one
// fails closed for the calls it covers, or its failures would let them run without
// the policy the requirement makes mandatory.
func (h *Hub) failsOpen(c *conn, stage Stage, e *tool.Exec) bool {
	if !c.hello.failOpen {
		return false
	}
	for i := range h.opts.required {
		if r := &h.opts.required[i]; r.covers(stage, e) && r.metBy(c) {
			return false
		}
	}
	return true
}

// failedAbsent logs and counts a call that a required hook would have seen, failed
// closed because no such hook is connected.
func (h *Hub) failedAbsent(r *Requirement, e *tool.Exec) {
	h.opts.obs.HookFailure(r.name, r.stage.String(), false)
	h.log.Warn("required hook absent", zap.String("hook", r.name), zap.String("stage", r.stage.String()), zap.String("tool", e.Name),
		zap.String("call_id", textcut.Ellipsis(e.CallID, textcut.MaxLoggedID)))
}
