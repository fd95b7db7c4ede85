// Package celx holds the CEL environment options every toolsd expression (policy rules,
// tool conditions) compiles with.
package celx

import (
	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/ast"
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
