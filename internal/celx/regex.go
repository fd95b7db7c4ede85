// Package celx holds the CEL environment options every toolsd expression (policy rules,
// tool conditions) compiles with.
package celx

import (
	"regexp"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/interpreter"
)

// MaxRegexProgram bounds the compiled size of a literal pattern in an expression, as the
// registry bounds a schema's patterns.
const MaxRegexProgram = 10000

// BoundedRegex makes a regular expression's pattern a string literal of bounded size.
// A pattern computed at evaluation (`args.text.matches(args.re)`) would be compiled on
// every evaluation from data the caller chose, and CEL charges a function's cost only
// after it returned: the cost limit could not stop a pattern and a text of a megabyte
// each.
func BoundedRegex() cel.EnvOption {
	return func(e *cel.Env) (*cel.Env, error) {
		e, err := cel.RegexProgramSizeLimit(MaxRegexProgram)(e)
		if err != nil {
			return nil, err
		}
		return cel.ASTValidators(literalPatterns{})(e)
	}
}

type literalPatterns struct{}

func (literalPatterns) Name() string { return "toolsd.literal_patterns" }

func (literalPatterns) Validate(_ *cel.Env, _ cel.ValidatorConfig, a *ast.AST, iss *cel.Issues) {
	for _, call := range ast.MatchDescendants(ast.NavigateAST(a), ast.KindMatcher(ast.CallKind)) {
		c := call.AsCall()
		fn := c.FunctionName()
		if !isRegexFunction(fn) {
			continue
		}
		i := 1
		if c.IsMemberFunction() {
			i = 0
		}
		if args := c.Args(); i < len(args) && args[i].Kind() != ast.LiteralKind {
			iss.ReportErrorAtID(args[i].ID(), "the pattern of %s must be a string literal", fn)
		}
	}
}

// isRegexFunction reports whether fn takes a pattern: the text and the pattern are its
// first two arguments (a member call's receiver first).
func isRegexFunction(fn string) bool {
	return fn == "matches" || fn == "regex.extract" || fn == "regex.extractAll" || fn == "regex.replace"
}

// ChargedMatches compiles the literal pattern of every `matches` call once, as
// [interpreter.MatchesRegexOptimization] does, and charges each match its cost before
// it runs (with [SizedOperatorCosts], the text's traversal times the pattern's
// program). CEL charges a call after it returned: a match past the cost limit ran to
// its end, uninterruptible and unbounded by the limit (a quarter of a second for
// 10 KB against ".{0,1000}x"), before it failed the evaluation.
func ChargedMatches() cel.ProgramOption {
	return cel.OptimizeRegex(&interpreter.RegexOptimization{Function: "matches", RegexIndex: 1, Factory: newChargedMatch})
}

func newChargedMatch(call interpreter.InterpretableCall, pattern string) (interpreter.InterpretableCall, error) {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, err
	}
	args := call.Args() // a binary call builds this slice at every Args
	return &chargedMatch{InterpretableCall: call, text: args[0], pattern: args[1], match: re.MatchString}, nil
}

// chargedMatch is a `matches` call whose pattern is compiled: text and pattern are its
// arguments, as planned.
type chargedMatch struct {
	interpreter.InterpretableCall
	text, pattern interpreter.InterpretableV2
	match         func(string) bool
}

// Exec charges the match, which panics past the cost limit as CEL's own charges do,
// and then runs it.
func (m *chargedMatch) Exec(frame *interpreter.ExecutionFrame) ref.Val {
	text := m.text.Exec(frame)
	if types.IsUnknownOrError(text) {
		return text
	}
	s, ok := text.(types.String)
	if !ok {
		return types.NoSuchOverloadErr()
	}
	if costs := frame.CostTracker(); costs != nil {
		costs.EvalBinary(frame, m.ID(), m, text, m.pattern.Exec(frame), nil)
	}
	return types.Bool(m.match(string(s)))
}

// Eval implements [interpreter.Interpretable].
func (m *chargedMatch) Eval(vars interpreter.Activation) ref.Val {
	return interpreter.EvalActivation(vars, m.Exec)
}
