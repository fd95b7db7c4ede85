package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"cel.dev/cel-go/cel"

	"github.com/toolsd/toolsd/internal/celx"
	"github.com/toolsd/toolsd/internal/tool"
)

// CostLimit bounds the runtime cost of one CEL evaluation; beyond it the evaluation
// fails (and a rule denies).
const CostLimit = 100_000

var celEnv = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("args", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("scope", cel.StringType),
		cel.Variable("tool", cel.StringType),
		celx.BoundedRegex(),
	)
})

// compile type-checks expr to want (or dyn, checked at evaluation) and plans it.
func compile(expr string, want *cel.Type) (cel.Program, error) {
	env, err := celEnv()
	if err != nil {
		return nil, fmt.Errorf("cel environment: %w", err)
	}
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		return nil, iss.Err()
	}
	if out := ast.OutputType(); !out.IsExactType(want) && !out.IsExactType(cel.DynType) {
		return nil, fmt.Errorf("expression has type %s, want %s", out, want)
	}
	return env.Program(ast, cel.CostLimit(CostLimit), cel.InterruptCheckFrequency(100), celx.SizedOperatorCosts())
}

// vars is the activation of one call: its arguments decoded once.
func vars(c *tool.Call) (map[string]any, error) {
	args := map[string]any{}
	if len(c.Arguments) > 0 {
		if err := json.Unmarshal(c.Arguments, &args); err != nil {
			return nil, fmt.Errorf("arguments are not a JSON object: %w", err)
		}
	}
	return map[string]any{"args": args, "scope": c.Scope, "tool": c.Name}, nil
}

func evalBool(ctx context.Context, prg cel.Program, act map[string]any) (bool, error) {
	out, _, err := prg.ContextEval(ctx, act)
	if err != nil {
		return false, err
	}
	b, ok := out.Value().(bool)
	if !ok {
		return false, fmt.Errorf("condition returned %s, want bool", out.Type())
	}
	return b, nil
}

func evalString(ctx context.Context, prg cel.Program, act map[string]any) (string, error) {
	out, _, err := prg.ContextEval(ctx, act)
	if err != nil {
		return "", err
	}
	s, ok := out.Value().(string)
	if !ok {
		return "", fmt.Errorf("expression returned %s, want string", out.Type())
	}
	return s, nil
}
