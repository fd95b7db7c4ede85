package celx

import (
	"math"

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
