package policy

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"cel.dev/cel-go/cel"

	"github.com/toolsd/toolsd/internal/celx"
	"github.com/toolsd/toolsd/internal/textcut"
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

// compile type-checks expr to want (or dyn, checked at evaluation) and plans it. Macros
// nested more than [celx.MaxComprehensionNesting] deep, and list and map literals more
// than [celx.MaxLiteralNesting] deep, are refused before the check,
// whose time is cubic in their depth (seconds for a line of nested maps on a reload).
func compile(expr string, want *cel.Type) (cel.Program, error) {
	env, err := celEnv()
	if err != nil {
		return nil, fmt.Errorf("cel environment: %w", err)
	}
	ast, iss := env.Parse(expr)
	if iss.Err() != nil {
		return nil, parseError(iss)
	}
	if loc, deep := celx.DeepComprehension(ast); deep {
		return nil, fmt.Errorf("ERROR: <input>:%d:%d: macros (all, exists, map, ...) nest more than %d deep",
			loc.Line(), loc.Column()+1, celx.MaxComprehensionNesting)
	}
	if loc, deep := celx.DeepLiteral(ast); deep {
		return nil, fmt.Errorf("ERROR: <input>:%d:%d: list and map literals nest more than %d deep",
			loc.Line(), loc.Column()+1, celx.MaxLiteralNesting)
	}
	if ast, iss = env.Check(ast); iss.Err() != nil {
		return nil, iss.Err()
	}
	if out := ast.OutputType(); !out.IsExactType(want) && !out.IsExactType(cel.DynType) {
		return nil, fmt.Errorf("expression has type %s, want %s", out, want)
	}
	// Patterns are literals (see celx): compiled once here, not at every match, and
	// each match charged before it runs.
	return env.Program(ast, cel.CostLimit(CostLimit), cel.InterruptCheckFrequency(100), celx.SizedOperatorCosts(),
		celx.ChargedMatches())
}

// parseError is a failed parse's error as CEL prints it, except that an error without a
// location (the parser's recursion limit, which ends the parse) is placed at 1:1, as
// other errors name their line:column, rather than at -1:0.
func parseError(iss *cel.Issues) error {
	for _, e := range iss.Errors() {
		if e.Location.Line() < 1 {
			return fmt.Errorf("ERROR: <input>:1:1: %s", e.Message)
		}
	}
	return iss.Err()
}

// vars is the activation of one call: its arguments decoded once.
func vars(c *tool.Call) (map[string]any, error) {
	args := map[string]any{}
	if len(c.Arguments) > 0 {
		var err error
		if args, err = decodeArgs(c.Arguments); err != nil {
			// Validated arguments are an object, but one may hold a number beyond a
			// float64's range (1e399), which the decoder refuses, quoting its digits:
			// cut as an evaluation error is.
			return nil, evalError(fmt.Errorf("arguments cannot be decoded: %w", err))
		}
	}
	return map[string]any{"args": args, "scope": c.Scope, "tool": c.Name}, nil
}

// MaxEvalErrorBytes bounds the text of an evaluation error. Some quote the value that
// failed ("no such key: …", an invalid timestamp), which comes from the arguments: it
// becomes a fail-closed denial's reason, or a log line for every call of a tool whose
// mode expression fails, and must not carry the model's megabyte of text along.
const MaxEvalErrorBytes = 1024

// evalError is err with its text cut at MaxEvalErrorBytes.
func evalError(err error) error {
	if len(err.Error()) <= MaxEvalErrorBytes {
		return err
	}
	return errors.New(textcut.Ellipsis(err.Error(), MaxEvalErrorBytes-len("…")))
}

func evalBool(ctx context.Context, prg cel.Program, act map[string]any) (bool, error) {
	out, _, err := prg.ContextEval(ctx, act)
	if err != nil {
		return false, evalError(err)
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
		return "", evalError(err)
	}
	s, ok := out.Value().(string)
	if !ok {
		return "", fmt.Errorf("expression returned %s, want string", out.Type())
	}
	return s, nil
}
