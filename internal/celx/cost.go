package celx

import (
	"math"
	"regexp/syntax"
	"sync"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
)

// traversalFactor is CEL's cost of visiting one byte of a string or bytes value
// (its standard model's StringTraversalCostFactor).
const traversalFactor = 0.1

// SizedOperatorCosts charges the concatenation and ordering operators by the size of
// their operands when those are strings or bytes. CEL's standard cost model charges them
// so only when the checker picked one overload; on dyn operands (`args.a + args.b`,
// where args is a map of dyn) it charges 1 whatever the size, so a comprehension
// concatenating a megabyte of arguments per iteration would run for seconds and allocate
// gigabytes within the cost limit.
func SizedOperatorCosts() cel.ProgramOption { return cel.CostTracking(sizedOperators{}) }

type sizedOperators struct{}

func (sizedOperators) CallCost(function, _ string, args []ref.Val, _ ref.Val) *uint64 {
	if len(args) != 2 {
		return nil
	}
	a, aok := byteSize(args[0])
	b, bok := byteSize(args[1])
	if !aok || !bok {
		return nil
	}
	if isRegexFunction(function) {
		return matchCost(args[0], args[1])
	}
	var n float64
	switch function {
	case operators.Add:
		n = float64(a) + float64(b)
	case operators.Less, operators.LessEquals, operators.Greater, operators.GreaterEquals:
		n = float64(min(a, b))
	default:
		return nil
	}
	c := uint64(math.Ceil(n * traversalFactor))
	return &c
}

func byteSize(v ref.Val) (int, bool) {
	switch v := v.(type) {
	case types.String:
		return len(v), true
	case types.Bytes:
		return len(v), true
	}
	return 0, false
}

// matchCost charges a match of a text against a pattern by the text's traversal times
// the pattern's compiled program (an instruction per programFactor units): matching
// runs in time proportional to both. CEL's own model charges the pattern by its length,
// and ".{0,1000}x", ten characters, is some 3,000 instructions.
func matchCost(text, pattern ref.Val) *uint64 {
	t, ok := text.(types.String)
	p, pok := pattern.(types.String)
	if !ok || !pok {
		return nil
	}
	n := uint64(math.Ceil(float64(len(t))*traversalFactor)) * max(1, uint64(math.Ceil(float64(programSize(string(p)))*programFactor)))
	return &n
}

// programFactor is the cost of one compiled regex instruction per traversed unit of
// text: 20 instructions cost as much as CEL charges a one-character pattern.
const programFactor = 0.05

// programSizes caches the compiled size of the patterns seen: expressions' patterns
// are literals, so there are as many as registered expressions hold; the cache is
// emptied when it outgrows maxCachedPrograms.
var programSizes struct {
	sync.Mutex
	m map[string]int
}

const maxCachedPrograms = 4096

// programSize is the number of instructions pattern compiles to (1 if it does not
// compile: the match itself then fails).
func programSize(pattern string) int {
	programSizes.Lock()
	n, ok := programSizes.m[pattern]
	programSizes.Unlock()
	if ok {
		return n
	}
	n = 1
	if re, err := syntax.Parse(pattern, syntax.Perl); err == nil {
		if prog, err := syntax.Compile(re.Simplify()); err == nil {
			n = len(prog.Inst)
		}
	}
	programSizes.Lock()
	if programSizes.m == nil || len(programSizes.m) >= maxCachedPrograms {
		programSizes.m = make(map[string]int)
	}
	programSizes.m[pattern] = n
	programSizes.Unlock()
	return n
}
