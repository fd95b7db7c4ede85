package celx

import (
	"slices"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common"
	"cel.dev/cel-go/common/ast"
)

// MaxComprehensionNesting bounds how deep macros (all, exists, exists_one, map,
// filter) nest within one another.
const MaxComprehensionNesting = 8

// MaxLiteralNesting bounds how deep list and map literals nest within one another, the
// lists the map macro builds at each step included.
const MaxLiteralNesting = 16

// DeepComprehension returns the location of the first comprehension of a parsed,
// unchecked expression nested more than [MaxComprehensionNesting] deep, and whether
// there is one. It is meant to run before the type check: checking nested map macros
// takes time cubic in their depth (about two seconds at the 120 levels a 4 KiB
// expression fits under the parser's recursion limit).
func DeepComprehension(parsed *cel.Ast) (common.Location, bool) {
	return deepest(parsed, MaxComprehensionNesting, ast.ComprehensionKind)
}

// DeepLiteral returns the location of the first list or map literal of a parsed,
// unchecked expression nested more than [MaxLiteralNesting] deep, and whether there is
// one. It is meant to run before the type check, which takes time cubic in their depth
// too: the type of each nested literal holds every one inside it (a second and a half
// for 250 nested lists, 511 bytes under the parser's recursion limit).
func DeepLiteral(parsed *cel.Ast) (common.Location, bool) {
	return deepest(parsed, MaxLiteralNesting, ast.ListKind, ast.MapKind)
}

// deepest returns the location of an expression of one of kinds that has limit others
// of them on its way up to the root (where their nesting goes over limit), and whether
// there is one.
func deepest(parsed *cel.Ast, limit int, kinds ...ast.ExprKind) (common.Location, bool) {
	of := func(e ast.NavigableExpr) bool { return slices.Contains(kinds, e.Kind()) }
	a := parsed.NativeRep()
	for _, e := range ast.MatchDescendants(ast.NavigateAST(a), of) {
		depth := 1
		for p, ok := e.Parent(); ok; p, ok = p.Parent() {
			if of(p) {
				depth++
			}
		}
		if depth == limit+1 {
			return a.SourceInfo().GetStartLocation(e.ID()), true
		}
	}
	return nil, false
}
