package registry

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"

	"github.com/toolsd/toolsd/internal/celx"
)

// ModelSelection is the provider, model and reasoning effort a step runs with.
type ModelSelection struct {
	Provider, Model, ReasoningEffort string
}

// History answers what a session has done so far; conditions read it through
// session.called and session.succeeded.
type History interface {
	Called(name string) bool
	Succeeded(name string) bool
}

// ConditionEnv is everything a condition can see. Conditions only read it: they can
// neither change registrations nor do tool work.
type ConditionEnv struct {
	// Owner is who the set is resolved for (an authenticated identity; "" for none). It
	// is not visible to conditions: it counts the set against MaxToolSetsPerOwner.
	Owner     string
	SessionID string
	Turn      uint64
	Step      uint64
	Model     ModelSelection
	// History may be nil: session.called and session.succeeded are then false.
	History History
}

// Condition variables and functions. A condition is a CEL expression that must return
// bool, for example:
//
//	model.provider == "anthropic" && step > 0 && !session.called("get_db_schema")
//
//	scope                      string  the scope the tool set is resolved for
//	turn, step                 int     the step's turn and step numbers
//	model.provider             string  the step's model selection
//	model.model                string
//	model.reasoning_effort     string
//	session.called(name)       bool    the session has called the tool before
//	session.succeeded(name)    bool    ... and at least one call succeeded
const (
	fnCalled    = "session.called"
	fnSucceeded = "session.succeeded"

	ovCalled    = "session_called_string"
	ovSucceeded = "session_succeeded_string"
)

// celEnv is the one CEL environment every condition compiles in.
var celEnv = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("scope", cel.StringType),
		cel.Variable("turn", cel.IntType),
		cel.Variable("step", cel.IntType),
		cel.Variable("model.provider", cel.StringType),
		cel.Variable("model.model", cel.StringType),
		cel.Variable("model.reasoning_effort", cel.StringType),
		cel.Function(fnCalled, cel.Overload(ovCalled,
			[]*cel.Type{cel.StringType}, cel.BoolType, cel.LateFunctionBinding())),
		cel.Function(fnSucceeded, cel.Overload(ovSucceeded,
			[]*cel.Type{cel.StringType}, cel.BoolType, cel.LateFunctionBinding())),
		celx.BoundedRegex(),
	)
})

// interruptEvery is how many comprehension iterations pass between context checks.
const interruptEvery = 100

// maxConditionValueSize bounds every value a condition computes, in CEL's aggregate
// size units (an element of a list or map, or 10 bytes of a string); a value more than
// 5 levels deep or of more than 10000 elements counts as over it. The cost limit alone
// does not bound sizes: lists that share elements (`[x, x]`) or were concatenated lazily
// grow exponentially with nesting at a linear cost, and so did dyn strings
// (`[model.model, 1].map(x, x + x)`) before [celx.SizedOperatorCosts]: a condition of a
// few hundred bytes could allocate gigabytes, or make one `==` or `in` traverse 2^40
// elements before its cost was charged.
const maxConditionValueSize = 10000

// compileCondition parses and type-checks src, and reports whether it reads the
// session's history (see [readsHistory]); errors name line:column.
func compileCondition(name, src string, costLimit uint64) (cel.Program, bool, error) {
	where := "tool " + quoteName(name) + " condition"
	env, err := celEnv()
	if err != nil {
		return nil, false, fmt.Errorf("%w: %s: environment: %w", ErrInvalidCondition, where, err)
	}
	ast, iss := env.Parse(src)
	if iss == nil || iss.Err() == nil {
		if loc, deep := celx.DeepComprehension(ast); deep {
			return nil, false, fmt.Errorf("%w: %s: %d:%d: macros nest more than %d deep", ErrInvalidCondition, where,
				loc.Line(), loc.Column()+1, celx.MaxComprehensionNesting)
		}
		if loc, deep := celx.DeepLiteral(ast); deep {
			return nil, false, fmt.Errorf("%w: %s: %d:%d: list and map literals nest more than %d deep", ErrInvalidCondition, where,
				loc.Line(), loc.Column()+1, celx.MaxLiteralNesting)
		}
		ast, iss = env.Check(ast)
	}
	if iss != nil && iss.Err() != nil {
		msgs := make([]string, 0, len(iss.Errors()))
		for _, e := range iss.Errors() {
			line, col := e.Location.Line(), e.Location.Column()+1
			if line < 1 { // the parser's recursion limit has no location
				line, col = 1, 1
			}
			msgs = append(msgs, fmt.Sprintf("%d:%d: %s", line, col, e.Message))
		}
		return nil, false, fmt.Errorf("%w: %s: %s", ErrInvalidCondition, where, strings.Join(msgs, "; "))
	}
	if !ast.OutputType().IsExactType(cel.BoolType) {
		return nil, false, fmt.Errorf("%w: %s: 1:1: must return bool, not %s", ErrInvalidCondition, where, ast.OutputType())
	}
	// Patterns are literals (see celx): compiled once here, not at every match, and
	// each match charged before it runs.
	prg, err := env.Program(ast, cel.CostLimit(costLimit), cel.InterruptCheckFrequency(interruptEvery),
		cel.MemoryLimit(maxConditionValueSize), celx.SizedOperatorCosts(),
		celx.ChargedMatches())
	if err != nil {
		return nil, false, fmt.Errorf("%w: %s: %w", ErrInvalidCondition, where, err)
	}
	return prg, readsHistory(ast), nil
}

// readsHistory reports whether a checked condition calls session.called or
// session.succeeded anywhere, whether or not a given evaluation reaches the call: a
// set resolved without a session judged such a condition on an empty history.
func readsHistory(checked *cel.Ast) bool {
	for _, ref := range checked.NativeRep().ReferenceMap() {
		for _, id := range ref.OverloadIDs {
			if id == ovCalled || id == ovSucceeded {
				return true
			}
		}
	}
	return false
}

// activation builds the variables and history functions of one resolution.
func activation(scope string, env ConditionEnv) (cel.Activation, error) {
	vars := map[string]any{
		"scope":                  scope,
		"turn":                   clampInt(env.Turn),
		"step":                   clampInt(env.Step),
		"model.provider":         env.Model.Provider,
		"model.model":            env.Model.Model,
		"model.reasoning_effort": env.Model.ReasoningEffort,
	}
	h := env.History
	ask := func(q func(string) bool) cel.LateBoundFunction {
		return func(_ string, args ...ref.Val) ref.Val {
			name, ok := args[0].(types.String)
			if !ok {
				return types.NewErr("expected a string tool name")
			}
			return types.Bool(h != nil && q(string(name)))
		}
	}
	var called, succeeded func(string) bool
	if h != nil {
		called, succeeded = h.Called, h.Succeeded
	}
	return cel.FunctionVars(vars, map[string]cel.LateBoundFunction{
		fnCalled:    ask(called),
		fnSucceeded: ask(succeeded),
	})
}

func clampInt(v uint64) int64 {
	if v > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(v)
}

// evalCondition runs one condition; any failure (including an exceeded cost limit)
// becomes an [ErrActivationFailed] naming the tool, except the caller's own
// cancellation, which is returned as such.
func evalCondition(ctx context.Context, e *Entry, act cel.Activation) (bool, error) {
	out, _, err := e.cond.ContextEval(ctx, act)
	if ctxErr := ctx.Err(); ctxErr != nil {
		return false, ctxErr
	}
	if err != nil {
		return false, fmt.Errorf("%w: condition of tool %s: %w", ErrActivationFailed, strconv.Quote(e.def.Name), err)
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, fmt.Errorf("%w: condition of tool %s returned %s, not bool", ErrActivationFailed, strconv.Quote(e.def.Name), out.Type())
	}
	return bool(b), nil
}
