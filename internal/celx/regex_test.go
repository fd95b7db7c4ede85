package celx

import (
	"strings"
	"testing"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/interpreter"
)

// countedMatches is [ChargedMatches] with its matches counted in *n.
func countedMatches(n *int) cel.ProgramOption {
	return cel.OptimizeRegex(&interpreter.RegexOptimization{
		Function:   "matches",
		RegexIndex: 1,
		Factory: func(call interpreter.InterpretableCall, pattern string) (interpreter.InterpretableCall, error) {
			c, err := newChargedMatch(call, pattern)
			if err != nil {
				return nil, err
			}
			m := c.(*chargedMatch)
			match := m.match
			m.match = func(s string) bool { *n++; return match(s) }
			return m, nil
		},
	})
}

// TestChargedMatchesRefusedBeforeRunning: a match whose cost (the text's traversal times
// the pattern's program, see matchCost) would take the evaluation past its cost limit
// fails it without running; CEL charges a call after it returned, so the match ran to
// its end first, a whole uninterruptible match past the limit. A match within the limit
// runs once, charged once.
func TestChargedMatchesRefusedBeforeRunning(t *testing.T) {
	env, err := cel.NewEnv(cel.Variable("text", cel.StringType), BoundedRegex())
	if err != nil {
		t.Fatal(err)
	}
	const limit = 2000
	long := strings.Repeat("a", 10_000) // 1,000 units of traversal
	for name, tc := range map[string]struct {
		expr, text string
		runs       int
		fail       bool
	}{
		"over the limit, member form":   {expr: `text.matches(".{0,1000}x")`, text: long, fail: true},
		"over the limit, function form": {expr: `matches(text, ".{0,1000}x")`, text: long, fail: true},
		"over the limit after a match":  {expr: `text.matches("^a") && text.matches(".{0,1000}x")`, text: long, runs: 1, fail: true},
		"within the limit":              {expr: `text.matches(".{0,1000}x")`, text: "aaa", runs: 1},
	} {
		t.Run(name, func(t *testing.T) {
			ast, iss := env.Compile(tc.expr)
			if iss.Err() != nil {
				t.Fatal(iss.Err())
			}
			runs := 0
			prg, err := env.Program(ast, cel.CostLimit(limit), SizedOperatorCosts(), countedMatches(&runs))
			if err != nil {
				t.Fatal(err)
			}
			_, det, err := prg.Eval(map[string]any{"text": tc.text})
			if tc.fail != (err != nil) || (err != nil && !strings.Contains(err.Error(), "cost limit")) {
				t.Fatalf("Eval(%s) = %v, want failure over the cost limit %v", tc.expr, err, tc.fail)
			}
			if runs != tc.runs {
				t.Errorf("Eval(%s) ran %d matches, want %d", tc.expr, runs, tc.runs)
			}
			if !tc.fail && det.ActualCost() != nil {
				want := *matchCost(types.String(tc.text), types.String(".{0,1000}x")) + 1 // and reading text
				if got := *det.ActualCost(); got != want {
					t.Errorf("Eval(%s) cost %d, want %d (the match charged once)", tc.expr, got, want)
				}
			}
		})
	}
}
