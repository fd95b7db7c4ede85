package celx

import (
	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common"
	"cel.dev/cel-go/common/ast"
)

// MaxComprehensionNesting bounds how deep macros (all, exists, exists_one, map,
// filter) nest within one another.
const MaxComprehensionNesting = 8

// DeepComprehension returns the location of the first comprehension of a parsed,
// unchecked expression nested more than [MaxComprehensionNesting] deep, and whether
// there is one. It is meant to run before the type check: checking nested map macros
// takes time cubic in their depth (about two seconds at the 120 levels a 4 KiB
// expression fits under the parser's recursion limit).
func DeepComprehension(parsed *cel.Ast) (common.Location, bool) {
	a := parsed.NativeRep()
	for _, c := range ast.MatchDescendants(ast.NavigateAST(a), ast.KindMatcher(ast.ComprehensionKind)) {
		depth := 1
		for p, ok := c.Parent(); ok; p, ok = p.Parent() {
			if p.Kind() == ast.ComprehensionKind {
				depth++
			}
		}
		if depth > MaxComprehensionNesting {
			return a.SourceInfo().GetStartLocation(c.ID()), true
		}
	}
	return nil, false
}
