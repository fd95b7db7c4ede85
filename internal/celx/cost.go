package celx

import (
	"math"
	"regexp/syntax"
	"strings"
	"sync"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/overloads"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
)

// traversalFactor is CEL's cost of visiting one byte of a string or bytes value
// (its standard model's StringTraversalCostFactor).
const traversalFactor = 0.1

// SizedOperatorCosts charges the concatenation and ordering operators by the size of
// their operands when those are strings or bytes, equality and membership in a list by
// what they compare, nested values included, membership in a map by the key it hashes,
// conversions and size by the text they read, and a timestamp's field in a time zone by
// the zone's name and, for a named zone, its file's load. CEL's standard cost model
// charges them so only when the checker picked one overload; on dyn operands (`args.a + args.b`,
// where args is a map of dyn) it charges 1 whatever the size, so a comprehension
// concatenating a megabyte of arguments per iteration would run for seconds and allocate
// gigabytes within the cost limit.
func SizedOperatorCosts() cel.ProgramOption { return cel.CostTracking(sizedOperators{}) }

type sizedOperators struct{}

func (sizedOperators) CallCost(function, _ string, args []ref.Val, _ ref.Val) *uint64 {
	if len(args) == 1 {
		return readCost(function, args[0])
	}
	if len(args) != 2 {
		return nil
	}
	switch function {
	case operators.Equals, operators.NotEquals:
		return scaled(float64(minWeight(args[0], args[1])))
	case operators.In:
		return inListCost(args[0], args[1])
	}
	if isTimeAccessor(function) {
		return zoneCost(args[1])
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

// readCost charges a conversion (`double(args.s)`, `timestamp(args.s)`, ...) or the size
// of a string by the text it reads: parsing, validating, copying or counting the runes
// of its argument (a failed parse quotes it whole in its error). CEL charges them 1
// whatever the size.
func readCost(function string, arg ref.Val) *uint64 {
	switch function {
	case overloads.TypeConvertInt, overloads.TypeConvertUint, overloads.TypeConvertDouble,
		overloads.TypeConvertBool, overloads.TypeConvertBytes, overloads.TypeConvertString,
		overloads.TypeConvertTimestamp, overloads.TypeConvertDuration:
		if n, ok := byteSize(arg); ok {
			return scaled(float64(n))
		}
	case overloads.Size:
		if s, ok := arg.(types.String); ok { // bytes know their size
			return scaled(float64(len(s)))
		}
	}
	return nil
}

// isTimeAccessor reports whether fn reads a field of a timestamp, which with a second
// argument is in that time zone.
func isTimeAccessor(fn string) bool {
	switch fn {
	case overloads.TimeGetFullYear, overloads.TimeGetMonth, overloads.TimeGetDayOfYear,
		overloads.TimeGetDate, overloads.TimeGetDayOfMonth, overloads.TimeGetDayOfWeek,
		overloads.TimeGetHours, overloads.TimeGetMinutes, overloads.TimeGetSeconds,
		overloads.TimeGetMilliseconds:
		return true
	}
	return false
}

// zoneCost charges a timestamp accessor by the time zone name it reads: looking one up
// searches the zone files for it and an unknown one is quoted whole in its error. A
// name (not an offset such as "+01:00", which is parsed) is charged a zone file's
// load on top, see [zoneLoadCost]. CEL charges the accessor 1 whatever the name.
func zoneCost(zone ref.Val) *uint64 {
	s, ok := zone.(types.String)
	if !ok {
		return nil
	}
	c := *scaled(float64(len(s)))
	if loadsZone(string(s)) {
		c += zoneLoadCost
	}
	return &c
}

// zoneLoadCost is the charge for looking a time zone up by name: time.LoadLocation
// reads and parses the zone's file at every call, and searches every source for an
// unknown name: tens of microseconds, what a few hundred other operations take.
// Charged by the name's length alone, a lookup cost 2, and a condition spending its
// cost limit on lookups ran 70 ms (180 ms with unknown names).
const zoneLoadCost = 500

// loadsZone reports whether CEL looks zone up with time.LoadLocation: a name rather
// than an offset (which holds a ':'), other than those it answers without reading.
func loadsZone(zone string) bool {
	switch zone {
	case "", "UTC", "Local":
		return false
	}
	return !strings.Contains(zone, ":")
}

// scaled is the cost of traversing units of a value.
func scaled(units float64) *uint64 {
	c := max(1, uint64(math.Ceil(units*traversalFactor)))
	return &c
}

// inListCost charges `x in list` by the comparisons it makes: one per element at least,
// and the traversal of what each comparison can walk, the smaller of x and the element.
// CEL charges membership by the list's size only when the checker knows the operand is
// a list; on dyn (`x in args.items`) it charges 1, and the same call nested in a
// comprehension over another argument compared billions of elements within the limit.
// Membership in a map is one lookup, charged by the string or bytes key it hashes.
func inListCost(x, list ref.Val) *uint64 {
	l, ok := list.(traits.Lister)
	if !ok {
		if n, isText := byteSize(x); isText {
			return scaled(float64(n))
		}
		return nil
	}
	elems, units := uint64(0), 0.0
	for it := l.Iterator(); it.HasNext() == types.True; elems++ {
		units += float64(minWeight(x, it.Next()))
	}
	c := max(elems, *scaled(units))
	return &c
}

// maxWeight bounds how far weight counts: far beyond any cost limit.
const maxWeight = 1 << 24

// minWeight is the smaller of the weights of a and b, which bounds what comparing them
// walks. The two are counted together with a growing bound, so the work is in
// proportion to the smaller one, as the comparison's is: a scalar compared with a
// large argument is not charged, nor counted, by the argument's size.
func minWeight(a, b ref.Val) int {
	for limit := 64; ; limit *= 8 {
		wa, wb := weight(a, limit), weight(b, limit)
		if wa < limit || wb < limit || limit >= maxWeight {
			return min(wa, wb)
		}
	}
}

// weight counts a value as equality walks it, up to limit: a unit per list element and
// map entry at every depth, per byte of a string or bytes, and per scalar. CEL's
// equality charge counts only the top level of a list (`[[...100000 elements]]` is
// one), whatever the nested values hold.
func weight(v ref.Val, limit int) int {
	w := weigher{limit: limit}
	w.val(v)
	return min(w.n, limit)
}

type weigher struct{ n, limit int }

func (w *weigher) val(v ref.Val) {
	switch nv := v.Value().(type) {
	case []any, map[string]any: // decoded JSON, as arguments are: walked without wrapping
		w.native(nv)
		return
	}
	switch v := v.(type) {
	case types.String:
		w.n += max(1, len(v))
	case types.Bytes:
		w.n += max(1, len(v))
	case traits.Mapper:
		w.n++
		for it := v.Iterator(); w.n < w.limit && it.HasNext() == types.True; {
			k := it.Next()
			w.val(k)
			w.val(v.Get(k))
		}
	case traits.Lister:
		w.n++
		for it := v.Iterator(); w.n < w.limit && it.HasNext() == types.True; {
			w.val(it.Next())
		}
	default:
		w.n++
	}
}

func (w *weigher) native(v any) {
	switch v := v.(type) {
	case string:
		w.n += max(1, len(v))
	case []any:
		w.n++
		for _, e := range v {
			if w.n >= w.limit {
				return
			}
			w.native(e)
		}
	case map[string]any:
		w.n++
		for k, e := range v {
			if w.n >= w.limit {
				return
			}
			w.n += max(1, len(k))
			w.native(e)
		}
	default:
		w.n++
	}
}
