package registry

import (
	"encoding/json"
	"math/big"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"

	"github.com/toolsd/toolsd/internal/textcut"
)

// violations decides v, which s.check rejected, exactly, and reports its failures as
// validating it with the library would: the same places, kinds and words, sorted by
// pointer. nil means v is valid after all (an integer written 1.0, say).
//
// Unlike the library, which builds every failure with a copy of its path, it stops at
// maxLeaves failures (past which the library's report depended on its walk order too),
// and keeps what it needs to word a failure, not the words: a failing megabyte costs
// about what a valid one does.
func (s *shape) violations(v any) []Violation {
	w := shapeWalk{ptr: make([]byte, 0, maxViolationMessage+1)}
	w.walk(s, v)
	if len(w.leaves) == 0 {
		return nil
	}
	return worded(w.leaves, shapeFailure.word)
}

// failKind is the keyword a shapeFailure failed.
type failKind uint8

const (
	failType failKind = iota
	failConst
	failEnum
	failMinLength
	failMaxLength
	failBound
	failRequired
	failAdditional
	failMinItems
	failMaxItems
	failMinProperties
	failMaxProperties
	failUniqueItems
	failPattern
	failMultipleOf
	failFalse // the schema false ("propertyNames": false too)
	failNot
	failOneOf // more than one branch holds
	failDependentRequired
)

// shapeFailure is a value v failing keyword k of s (bound: s.bounds[b]); its kind and
// words are built only for the failures reported. name: v is a member name failing
// "propertyNames", which the library words after the name.
type shapeFailure struct {
	s    *shape
	v    any
	k    failKind
	b    int
	name bool
}

// shapeWalk finds a document's failures; ptr is the pointer of the place walked,
// escaped, and cut like [pointer] cuts it: kept to one byte past maxViolationMessage,
// its length past that in ptrLen. A walk that only decides (see valid) records no
// failure and keeps no pointer: failed says it met one, and it stops there.
type shapeWalk struct {
	ptr    []byte
	ptrLen int
	leaves []leaf[shapeFailure]
	decide bool
	failed bool
}

// valid reports exactly whether v satisfies s, without allocating (as check, but for
// uniqueItems over 20 items and numbers of over 19 digits): check may reject a valid
// document, which "not" cannot take for a failure. It walks v as violations does,
// stopping at the first failure.
func (s *shape) valid(v any) bool {
	var w shapeWalk
	return w.holds(s, v)
}

// holds is valid for a walk under way: it decides s for v, then goes on as before. A
// walk never asks check (nor makes a walker of its own, which the compiler would move
// to the heap), so deciding a subschema costs one walk of it, however deep the "not"s
// and "anyOf"s inside it nest.
func (w *shapeWalk) holds(s *shape, v any) bool {
	decide, failed := w.decide, w.failed
	w.decide, w.failed = true, false
	w.walk(s, v)
	ok := !w.failed
	w.decide, w.failed = decide, failed
	return ok
}

func (w *shapeWalk) fail(s *shape, v any, k failKind, b int) {
	if w.decide {
		w.failed = true
		return
	}
	p := string(w.ptr)
	if w.ptrLen > maxViolationMessage {
		p = textcut.Prefix(p, maxViolationMessage) + "…"
	}
	w.leaves = append(w.leaves, leaf[shapeFailure]{p, shapeFailure{s: s, v: v, k: k, b: b}})
}

func (w *shapeWalk) full() bool { return w.failed || len(w.leaves) >= maxLeaves }

// enter moves to the member key (or, when key is "", the item i) of the place walked
// and returns what leave needs to come back.
func (w *shapeWalk) enter(key string, i int) (int, int) {
	n, l := len(w.ptr), w.ptrLen
	if w.decide || w.ptrLen > maxViolationMessage {
		return n, l // the pointer is cut already
	}
	w.ptr = append(w.ptr, '/')
	w.ptrLen++
	if key == "" && i >= 0 {
		before := len(w.ptr)
		w.ptr = strconv.AppendInt(w.ptr, int64(i), 10)
		w.ptrLen += len(w.ptr) - before
	} else {
		for j := 0; j < len(key) && w.ptrLen <= maxViolationMessage; j++ {
			switch c := key[j]; c {
			case '~':
				w.ptr = append(w.ptr, '~', '0')
				w.ptrLen += 2
			case '/':
				w.ptr = append(w.ptr, '~', '1')
				w.ptrLen += 2
			default:
				w.ptr = append(w.ptr, c)
				w.ptrLen++
			}
		}
	}
	w.ptr = w.ptr[:min(len(w.ptr), maxViolationMessage+1)]
	return n, l
}

func (w *shapeWalk) leave(n, l int) { w.ptr, w.ptrLen = w.ptr[:n], l }

// walk records v's failures of s in the library's order of checks: a wrong type, a
// const or an enum miss ends the place's checks; the others are all made.
func (w *shapeWalk) walk(s *shape, v any) {
	if w.failed {
		return // deciding, and decided
	}
	if s.never {
		w.fail(s, v, failFalse, 0)
		return
	}
	if s.types != 0 && !s.types.holds(v) {
		w.fail(s, v, failType, 0)
		return
	}
	if s.konst != nil && !s.konst.has(v) {
		w.fail(s, v, failConst, 0)
		return
	}
	if s.enum != nil && !s.enum.has(v) {
		w.fail(s, v, failEnum, 0)
		return
	}
	if s.ref != nil {
		w.walk(s.ref, v)
	}
	w.walkValue(s, v)
	if s.not != nil && w.holds(s.not, v) {
		w.fail(s, v, failNot, 0)
	}
	for _, a := range s.allOf {
		w.walk(a, v)
	}
	if len(s.anyOf) > 0 {
		w.walkAnyOf(s, v)
	}
	if len(s.oneOf) > 0 {
		w.walkOneOf(s, v)
	}
	if s.cond != nil {
		if c := s.conditional(w.holds(s.cond, v)); c != nil {
			w.walk(c, v)
		}
	}
}

// oneOfHolding returns the first two of s.oneOf that hold for v, by index; -1: none.
func (w *shapeWalk) oneOfHolding(s *shape, v any) (int, int) {
	first := -1
	for i, a := range s.oneOf {
		if w.holds(a, v) {
			if first >= 0 {
				return first, i
			}
			first = i
		}
	}
	return first, -1
}

// walkOneOf records v's failures of s.oneOf as the library reports them: when two
// branches hold, that failure; when none does, every branch's failures.
func (w *shapeWalk) walkOneOf(s *shape, v any) {
	switch i, j := w.oneOfHolding(s, v); {
	case j >= 0:
		w.fail(s, v, failOneOf, 0)
	case i < 0 && w.decide:
		w.failed = true
	case i < 0:
		for _, a := range s.oneOf {
			w.walk(a, v)
		}
	}
}

// walkAnyOf records v's failures of s.anyOf: the library reports every branch's
// failures when none holds, none when one does. Branches are walked for failures only
// when none holds, so a megabyte of values each holding for a later branch costs no
// failure per value.
func (w *shapeWalk) walkAnyOf(s *shape, v any) {
	for _, a := range s.anyOf {
		if w.holds(a, v) {
			return
		}
	}
	if w.decide {
		w.failed = true
		return
	}
	for _, a := range s.anyOf {
		w.walk(a, v)
	}
}

// walkValue records val's failures of the keywords of s for its type. A failure is
// given val itself: boxing v again would allocate, even in a walk that only decides.
func (w *shapeWalk) walkValue(s *shape, val any) {
	switch v := val.(type) {
	case string:
		if s.hasMinLen || s.hasMaxLen {
			n := int64(utf8.RuneCountInString(v))
			if s.hasMinLen && n < s.minLen {
				w.fail(s, val, failMinLength, 0)
			}
			if s.hasMaxLen && n > s.maxLen {
				w.fail(s, val, failMaxLength, 0)
			}
		}
		if s.pattern != nil && !s.pattern.MatchString(v) {
			w.fail(s, val, failPattern, 0)
		}
	case json.Number:
		if len(s.bounds) > 0 {
			n := readNumber(string(v))
			for i, b := range s.bounds {
				if !b.holds(n) {
					w.fail(s, val, failBound, i)
				}
			}
		}
		if s.multipleLit != "" && !isMultipleOf(string(v), s.multipleOf, s.multipleLit) {
			w.fail(s, val, failMultipleOf, 0)
		}
	case map[string]any:
		w.walkObject(s, v)
	case []any:
		if n := int64(len(v)); s.hasMinItems && n < s.minItems {
			w.fail(s, val, failMinItems, 0)
		}
		if n := int64(len(v)); s.hasMaxItems && n > s.maxItems {
			w.fail(s, val, failMaxItems, 0)
		}
		if s.unique {
			if _, _, dup := duplicatePair(v); dup {
				w.fail(s, val, failUniqueItems, 0)
			}
		}
		for i, e := range v {
			sub := s.itemShape(i)
			if sub == nil {
				if i >= len(s.prefix) {
					return
				}
				continue
			}
			if w.full() {
				return
			}
			n, l := w.enter("", i)
			w.walk(sub, e)
			w.leave(n, l)
		}
	}
}

func (w *shapeWalk) walkObject(s *shape, obj map[string]any) {
	if n := int64(len(obj)); s.hasMinProps && n < s.minProps {
		w.fail(s, obj, failMinProperties, 0)
	}
	if n := int64(len(obj)); s.hasMaxProps && n > s.maxProps {
		w.fail(s, obj, failMaxProperties, 0)
	}
	if !hasAll(obj, s.required) {
		w.fail(s, obj, failRequired, 0)
	}
	additional := false
	for name, pv := range obj {
		if w.full() {
			return
		}
		// The library applies a member's property, then every pattern matching its
		// name, and additionalProperties only when none did.
		sub, known := s.props[name]
		if known {
			w.walkMember(sub, name, pv)
		}
		for _, p := range s.patternProps {
			if p.re.MatchString(name) {
				known = true
				w.walkMember(p.sub, name, pv)
			}
		}
		switch {
		case known:
		case s.closed:
			additional = true
		case s.extra != nil:
			w.walkMember(s.extra, name, pv)
		}
	}
	if additional {
		w.fail(s, obj, failAdditional, 0)
	}
	if s.names != nil || s.noNames {
		for name := range obj {
			if w.full() {
				return
			}
			w.walkName(s, name)
		}
	}
	// The library checks dependentRequired last, each name present in turn.
	for i, d := range s.dependent {
		if w.full() {
			return
		}
		if _, ok := obj[d.name]; ok && !hasAll(obj, d.required) {
			w.fail(s, obj, failDependentRequired, i)
		}
	}
}

// walkMember records the failures of s by the member name's value pv.
func (w *shapeWalk) walkMember(s *shape, name string, pv any) {
	n, l := w.enter(name, -1)
	w.walk(s, pv)
	w.leave(n, l)
}

// walkName records the failures of the member name of s's "propertyNames". The
// library validates a name on its own, so they are at no pointer into the document:
// at "", wherever the object is.
func (w *shapeWalk) walkName(s *shape, name string) {
	if w.decide {
		if s.noNames || !s.names.nameHolds(name) {
			w.failed = true
		}
		return
	}
	if s.noNames {
		w.leaves = append(w.leaves, leaf[shapeFailure]{"", shapeFailure{s: s, v: name, k: failFalse, name: true}})
		return
	}
	if s.names.nameHolds(name) {
		return
	}
	names := shapeWalk{leaves: w.leaves}
	names.walk(s.names, name)
	for i := len(w.leaves); i < len(names.leaves); i++ {
		names.leaves[i].failure.name = true
	}
	w.leaves = names.leaves
}

// maxNamed bounds the property names a required or additionalProperties failure
// lists: each takes at least four bytes of the message (two quotes and ", "), so the
// names past it are cut off the message by truncate anyway.
const maxNamed = maxViolationMessage/4 + 1

// word words f as [describe] words the library's kind of it.
func (f shapeFailure) word() string {
	if f.name {
		return truncate("property name " + quoteName(f.v.(string)) + ": " + describe(f.kind()))
	}
	return describe(f.kind())
}

func (f shapeFailure) kind() jsonschema.ErrorKind {
	s := f.s
	switch f.k {
	case failType:
		return &kind.Type{Got: jsonTypeOf(f.v), Want: s.types.names()}
	case failConst:
		return &kind.Const{Got: f.v, Want: s.constVal}
	case failEnum:
		return &kind.Enum{Got: f.v, Want: s.enumList}
	case failMinLength:
		return &kind.MinLength{Got: utf8.RuneCountInString(f.v.(string)), Want: int(s.minLen)}
	case failMaxLength:
		return &kind.MaxLength{Got: utf8.RuneCountInString(f.v.(string)), Want: int(s.maxLen)}
	case failMinItems:
		return &kind.MinItems{Got: len(f.v.([]any)), Want: int(s.minItems)}
	case failMaxItems:
		return &kind.MaxItems{Got: len(f.v.([]any)), Want: int(s.maxItems)}
	case failMultipleOf:
		got, _ := new(big.Rat).SetString(string(f.v.(json.Number)))
		want, _ := new(big.Rat).SetString(s.multipleLit)
		return &kind.MultipleOf{Got: got, Want: want}
	case failPattern:
		return &kind.Pattern{Got: f.v.(string), Want: s.pattern.String()}
	case failUniqueItems:
		j, i, _ := duplicatePair(f.v.([]any))
		return &kind.UniqueItems{Duplicates: [2]int{j, i}}
	case failMinProperties:
		return &kind.MinProperties{Got: len(f.v.(map[string]any)), Want: int(s.minProps)}
	case failMaxProperties:
		return &kind.MaxProperties{Got: len(f.v.(map[string]any)), Want: int(s.maxProps)}
	case failBound:
		return s.bounds[f.b].kind(f.v.(json.Number))
	case failFalse:
		return &kind.FalseSchema{}
	case failNot:
		return &kind.Not{}
	case failOneOf:
		var w shapeWalk
		i, j := w.oneOfHolding(s, f.v)
		return &kind.OneOf{Subschemas: []int{i, j}}
	case failRequired:
		return &kind.Required{Missing: missing(f.v.(map[string]any), s.required)}
	case failDependentRequired:
		d := s.dependent[f.b]
		return &kind.DependentRequired{Prop: d.name, Missing: missing(f.v.(map[string]any), d.required)}
	default: // failAdditional
		// The library lists them in map order; the first maxNamed sorted are listed.
		var names []string
		for name := range f.v.(map[string]any) {
			if s.declared(name) {
				continue
			}
			i, _ := slices.BinarySearch(names, name)
			if i < maxNamed {
				names = slices.Insert(names, i, name)
				names = names[:min(len(names), maxNamed)]
			}
		}
		return &kind.AdditionalProperties{Properties: names}
	}
}

// missing lists the first maxNamed of names obj lacks, in their order.
func missing(obj map[string]any, names []string) []string {
	var out []string
	for _, name := range names {
		if _, ok := obj[name]; !ok && len(out) < maxNamed {
			out = append(out, name)
		}
	}
	return out
}

// kind is the library's failure of b for the number n.
func (b bound) kind(n json.Number) jsonschema.ErrorKind {
	got, _ := new(big.Rat).SetString(string(n))
	want, _ := new(big.Rat).SetString(b.lit)
	switch {
	case b.below && b.equal:
		return &kind.Maximum{Got: got, Want: want}
	case b.below:
		return &kind.ExclusiveMaximum{Got: got, Want: want}
	case b.equal:
		return &kind.Minimum{Got: got, Want: want}
	default:
		return &kind.ExclusiveMinimum{Got: got, Want: want}
	}
}

// jsonTypeOf names v's type as the library does (every number is a "number").
func jsonTypeOf(v any) string {
	switch v.(type) {
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case json.Number:
		return "number"
	case bool:
		return "boolean"
	}
	return "null"
}

// names lists t in the library's order.
func (t typeSet) names() []string {
	var out []string
	for _, n := range [...]struct {
		t    typeSet
		name string
	}{
		{typeNull, "null"}, {typeBoolean, "boolean"}, {typeNumber, "number"}, {typeInteger, "integer"},
		{typeString, "string"}, {typeArray, "array"}, {typeObject, "object"},
	} {
		if t&n.t != 0 {
			out = append(out, n.name)
		}
	}
	return out
}

// holds reports exactly whether v has one of the types in t: unlike admits, a number
// written 1.0 or 1e2 is an integer.
func (t typeSet) holds(v any) bool {
	if n, ok := v.(json.Number); ok && t&typeNumber == 0 && t&typeInteger != 0 {
		return readNumber(string(n)).integer()
	}
	return t.admits(v)
}
