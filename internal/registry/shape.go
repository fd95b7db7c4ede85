package registry

import (
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// schema is a compiled schema: the library's validator, and the shape checker when the
// schema is simple enough for one.
type schema struct {
	lib   *jsonschema.Schema
	shape *shape // nil: every document goes to the library
	// perPlace is the most subschemas validation applies at one place of a document
	// (see checkFanout); it and costs bound a document (see checkWork).
	perPlace int
	costs    keywordCosts
	// priceFirst: checkWork prices every document, even one the shape accepts.
	// uniqueItems compares each value again for every array above it, for the shape
	// (hashing it) as for the library, and a pattern's matching costs up to its
	// program's size per byte, whoever runs it.
	priceFirst bool
}

// shape is a fast check, allocation-free but for uniqueItems over 20 items, for the
// schemas most tools register: objects of typed properties (named, or matching a
// pattern) with required keys, open or closed additional properties and bounded sizes, arrays of such items (unique or not,
// after prefixItems), enums and consts of scalars, string lengths and patterns, array
// lengths, numeric bounds and multipleOf, local references into $defs, allOf, anyOf,
// oneOf, not and if/then/else, names required by others (dependentRequired, of at
// most maxShapeDependents names), and
// property names held to a string's keywords (propertyNames); a subschema may be true
// or false.
// check is a shortcut: a document it accepts is valid (every keyword of the schema was
// checked). It may be conservative (an integer written 1.0 fails it) but never lenient
// — FuzzShapeAgreesWithLibrary holds it to that. A document it rejects is decided
// exactly, and its failures found and worded as the library would, by
// [shape.violations]: the library would build every failure of a megabyte of wrong
// values before toolsd reads the first few.
//
// "format" is an annotation, but only under draft 2020-12 (draft-07 asserts it). A
// "pattern", and each of "patternProperties", matches with the library's own compiled
// RE2 program. A local "$ref" into
// the root's $defs (or definitions), "allOf" and "anyOf" apply their subschemas'
// shapes; "not", "oneOf" and "if" decide theirs exactly (see valid). "propertyNames" is covered when its subschema is true, false or only type,
// pattern, minLength, maxLength, enum and const (as the Go SDK derives for
// integer-keyed maps). "dependentRequired" is unknown to draft-07, which ignores it. A
// schema with any other keyword (dependentSchemas, enums of arrays or objects, other
// references, unevaluated*, …) gets no shape.
type shape struct {
	never    bool              // the schema false, which nothing satisfies
	types    typeSet           // 0: any type
	props    map[string]*shape // checked when the document is an object
	required []string
	// dependent is "dependentRequired", sorted by name: the names each name present
	// requires.
	dependent []dependency
	closed    bool   // additionalProperties: false
	extra     *shape // additionalProperties as a schema; nil: anything
	// patternProps is "patternProperties", sorted by pattern: a member whose name a
	// pattern matches must satisfy its subschema, beside any of props, and is not
	// additional.
	patternProps []patternProp
	// names is "propertyNames": every member name must satisfy it (see nameShape);
	// noNames: "propertyNames": false, which no name satisfies.
	names   *shape
	noNames bool
	items   *shape // nil: anything
	// prefix holds prefixItems: the first items' shapes, items applying past them.
	prefix  []*shape
	unique  bool // uniqueItems
	pattern *regexp.Regexp
	// ref is the subschema a local "$ref" names, allOf the subschemas of "allOf": both
	// apply at the document's place too. A recursive schema's shape has cycles.
	ref   *shape
	allOf []*shape
	// anyOf holds the subschemas of "anyOf", one of which must hold.
	anyOf []*shape
	// not is the subschema of "not", which must not hold (see valid).
	not *shape
	// oneOf holds the subschemas of "oneOf", exactly one of which must hold.
	oneOf []*shape
	// cond is the subschema of "if": when it holds (see valid) then applies, else els;
	// each may be nil.
	cond, then, els *shape
	// enum and konst, when not nil, hold the scalars the document must be one of
	// (const: equal to); enumList and constVal are them as written, which the
	// library's message gives.
	enum, konst *scalars
	enumList    []any
	constVal    any
	// String lengths in code points, array and object sizes and numeric bounds; each applies
	// when set.
	minLen, maxLen, minItems, maxItems, minProps, maxProps                   int64
	hasMinLen, hasMaxLen, hasMinItems, hasMaxItems, hasMinProps, hasMaxProps bool
	bounds                                                                   []bound
	intBounds                                                                bool // every bound is a plain int64 (see boundsHold)
	// multipleOf, when multipleLit is not "", is what every number must be a multiple
	// of.
	multipleOf  number
	multipleLit string
}

// patternProp is one member of "patternProperties".
type patternProp struct {
	re  *regexp.Regexp
	sub *shape
}

// dependency is one member of "dependentRequired": when name is present, required
// must be too.
type dependency struct {
	name     string
	required []string
}

// bound is one of minimum, maximum, exclusiveMinimum, exclusiveMaximum, compared
// exactly, as the library compares them.
type bound struct {
	limit number
	lit   string // the limit as written, for the library's message
	// intLimit is the limit when it is written as a plain integer (see boundsHold).
	intLimit int64
	below    bool // the document must be below the limit (maximum); else above it
	equal    bool // the limit itself is allowed
}

// maxShapePlaces bounds the subschemas a shape applies at one place of a document
// (through $ref and allOf; see checkFanout). A document a shape accepts is not priced
// by checkWork: its work is its values × the subschemas applied at each, which a schema
// with hundreds of references behind each place would make seconds for a megabyte.
// Such a schema goes to the library, priced.
const maxShapePlaces = 16

// maxShapeDependents bounds the names of a "dependentRequired" with a shape. Each is
// looked up in every object at its place, whatever the object holds, and a document a
// shape accepts is not priced by checkWork: 6,000 names made 800 KB of objects take
// seconds. Such a schema goes to the library, priced.
const maxShapeDependents = 16

// typeSet is a set of JSON Schema type names.
type typeSet uint8

const (
	typeObject typeSet = 1 << iota
	typeArray
	typeString
	typeNumber
	typeInteger
	typeBoolean
	typeNull
)

var typeNames = map[string]typeSet{
	"object": typeObject, "array": typeArray, "string": typeString, "number": typeNumber,
	"integer": typeInteger, "boolean": typeBoolean, "null": typeNull,
}

// annotations are keywords that never affect validity: the library asserts
// contentEncoding and contentMediaType only when asked to, which toolsd never does.
var annotations = map[string]bool{
	"title": true, "description": true, "default": true, "examples": true, "$comment": true,
	"deprecated": true, "readOnly": true, "writeOnly": true, "contentEncoding": true, "contentMediaType": true,
}

// shapeDrafts are the $schema values whose meaning of the shape keywords is the one
// checked here (draft-04 differs on integers, so it has no shape), and whether the
// draft asserts "format" (the library asserts it before 2019-09; toolsd never asks it
// to after).
var shapeDrafts = map[string]bool{
	"https://json-schema.org/draft/2020-12/schema":  false,
	"https://json-schema.org/draft/2020-12/schema#": false,
	"http://json-schema.org/draft-07/schema":        true,
	"http://json-schema.org/draft-07/schema#":       true,
}

// shapeBuilder is what building a schema's shape needs beyond one subschema.
type shapeBuilder struct {
	// draft07: "format" validates, so a schema with one has no shape, and a "$ref"
	// voids the keywords beside it.
	draft07 bool
	root    map[string]any
	named   map[string]*shape // by reference, each built once (see resolve)
	// patterns are the schema's patterns as the library compiled them (RE2, see
	// compileSchema): a shape matches with the very same programs.
	patterns map[string]jsonschema.Regexp
}

// newShape returns the shape of the decoded schema doc, or nil when doc uses anything
// a shape cannot check.
func newShape(doc any, patterns map[string]jsonschema.Regexp) *shape {
	root, ok := doc.(map[string]any)
	if !ok || hasIdentifiers(doc, false) {
		return nil
	}
	b := shapeBuilder{root: root, named: map[string]*shape{}, patterns: patterns}
	if d, ok := root["$schema"]; ok {
		s, _ := d.(string)
		draft07, known := shapeDrafts[s]
		if !known {
			return nil
		}
		b.draft07 = draft07
	}
	if _, ok := root["$ref"]; ok && b.draft07 {
		return nil // the root's $ref voids its definitions too
	}
	s := &shape{}
	b.named["#"] = s
	if !b.fill(s, doc, true) {
		return nil
	}
	return s
}

func (b *shapeBuilder) shapeOf(doc any, root bool) *shape {
	s := &shape{}
	if !b.fill(s, doc, root) {
		return nil
	}
	return s
}

// fill makes s the shape of doc; false means a shape cannot check doc.
func (b *shapeBuilder) fill(s *shape, doc any, root bool) bool {
	switch d := doc.(type) {
	case bool:
		s.never = !d
		return true
	case map[string]any:
		if ref, ok := d["$ref"]; ok && b.draft07 {
			s.ref = b.resolve(ref)
			return s.ref != nil
		}
		for k, v := range d {
			if !s.keyword(b, k, v, root) {
				return false
			}
		}
		return true
	default:
		return false
	}
}

// nameKeywords are the keywords a "propertyNames" subschema with a shape may have
// beside annotations: those a name, always a string, is checked against.
var nameKeywords = map[string]bool{
	"type": true, "pattern": true, "minLength": true, "maxLength": true, "enum": true, "const": true,
}

// nameShape returns the shape of doc, a "propertyNames" subschema, or nil when it has
// a keyword not in nameKeywords or admits no string type.
func (b *shapeBuilder) nameShape(doc any) *shape {
	d, ok := doc.(map[string]any)
	if !ok {
		return nil
	}
	for k := range d {
		if !nameKeywords[k] && !annotations[k] {
			return nil
		}
	}
	s := b.shapeOf(d, false)
	if s == nil || (s.types != 0 && s.types&typeString == 0) {
		return nil
	}
	return s
}

// stringArray reads a JSON array of strings; false means v is not one.
func stringArray(v any) ([]string, bool) {
	items, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(items))
	for _, it := range items {
		str, ok := it.(string)
		if !ok {
			return nil, false
		}
		out = append(out, str)
	}
	return out, true
}

// keyword adds keyword k with value v to s; false means a shape cannot express it.
func (s *shape) keyword(b *shapeBuilder, k string, v any, root bool) bool {
	switch k {
	case "type":
		return s.setTypes(v)
	case "properties":
		props, ok := v.(map[string]any)
		if !ok {
			return false
		}
		s.props = make(map[string]*shape, len(props))
		for name, sub := range props {
			if s.props[name] = b.shapeOf(sub, false); s.props[name] == nil {
				return false
			}
		}
		return true
	case "required":
		names, ok := stringArray(v)
		s.required = names
		return ok
	case "dependentRequired":
		deps, ok := v.(map[string]any)
		if !ok || b.draft07 {
			return ok // an object the library ignores under draft-07
		}
		if len(deps) > maxShapeDependents {
			return false // checkWork prices every name's lookup in every object
		}
		for name, req := range deps {
			names, ok := stringArray(req)
			if !ok {
				return false
			}
			s.dependent = append(s.dependent, dependency{name, names})
		}
		slices.SortFunc(s.dependent, func(a, b dependency) int { return strings.Compare(a.name, b.name) })
		return true
	case "patternProperties":
		props, ok := v.(map[string]any)
		if !ok {
			return false
		}
		for pattern, sub := range props {
			re, ok := b.patterns[pattern].(re2Regexp)
			p := b.shapeOf(sub, false)
			if !ok || p == nil {
				return false
			}
			s.patternProps = append(s.patternProps, patternProp{re.Regexp, p})
		}
		slices.SortFunc(s.patternProps, func(a, b patternProp) int { return strings.Compare(a.re.String(), b.re.String()) })
		return true
	case "additionalProperties":
		if b, ok := v.(bool); ok {
			s.closed = !b
			return true
		}
		s.extra = b.shapeOf(v, false)
		return s.extra != nil
	case "items":
		s.items = b.shapeOf(v, false)
		return s.items != nil
	case "propertyNames":
		if t, ok := v.(bool); ok {
			s.noNames = !t
			return true
		}
		s.names = b.nameShape(v)
		return s.names != nil
	case "enum":
		var ok bool
		if s.enumList, ok = v.([]any); !ok {
			return false
		}
		s.enum, ok = newScalars(s.enumList)
		return ok
	case "const":
		var ok bool
		s.constVal = v
		s.konst, ok = newScalars([]any{v})
		return ok
	case "minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties":
		n, ok := integerValue(v)
		if !ok || n < 0 {
			return false
		}
		switch k {
		case "minLength":
			s.minLen, s.hasMinLen = n, true
		case "maxLength":
			s.maxLen, s.hasMaxLen = n, true
		case "minItems":
			s.minItems, s.hasMinItems = n, true
		case "maxItems":
			s.maxItems, s.hasMaxItems = n, true
		case "minProperties":
			s.minProps, s.hasMinProps = n, true
		default:
			s.maxProps, s.hasMaxProps = n, true
		}
		return true
	case "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum":
		n, ok := v.(json.Number)
		if !ok {
			return false
		}
		i, isInt := integerValue(n)
		s.intBounds = (len(s.bounds) == 0 || s.intBounds) && isInt
		s.bounds = append(s.bounds, bound{limit: readNumber(string(n)), lit: string(n), intLimit: i,
			below: k == "maximum" || k == "exclusiveMaximum", equal: k == "minimum" || k == "maximum"})
		return true
	case "$schema":
		return root // checked by newShape
	case "$ref":
		s.ref = b.resolve(v)
		return s.ref != nil
	case "$defs", "definitions":
		return true // each member referred to is built by resolve
	case "pattern":
		str, _ := v.(string)
		re, ok := b.patterns[str].(re2Regexp)
		s.pattern = re.Regexp
		return ok
	case "prefixItems":
		subs, ok := v.([]any)
		for _, sub := range subs {
			p := b.shapeOf(sub, false)
			if p == nil {
				return false
			}
			s.prefix = append(s.prefix, p)
		}
		return ok && !b.draft07 // draft-07 reads "items" as an array instead
	case "multipleOf":
		n, ok := v.(json.Number)
		s.multipleOf, s.multipleLit = readNumber(string(n)), string(n)
		return ok && s.multipleOf.sign() > 0
	case "uniqueItems":
		s.unique, _ = v.(bool)
		return true
	case "not":
		s.not = b.shapeOf(v, false)
		return s.not != nil
	case "if", "then", "else":
		sub := b.shapeOf(v, false)
		switch k {
		case "if":
			s.cond = sub
		case "then":
			s.then = sub
		default:
			s.els = sub
		}
		return sub != nil
	case "allOf", "anyOf", "oneOf":
		subs, ok := v.([]any)
		for _, sub := range subs {
			a := b.shapeOf(sub, false)
			if a == nil {
				return false
			}
			switch k {
			case "allOf":
				s.allOf = append(s.allOf, a)
			case "anyOf":
				s.anyOf = append(s.anyOf, a)
			default:
				s.oneOf = append(s.oneOf, a)
			}
		}
		return ok && len(subs) > 0
	case "format":
		return !b.draft07
	}
	return annotations[k]
}

func (s *shape) setTypes(v any) bool {
	switch t := v.(type) {
	case string:
		s.types = typeNames[t]
		return s.types != 0
	case []any:
		for _, e := range t {
			name, _ := e.(string)
			bit := typeNames[name]
			if bit == 0 {
				return false
			}
			s.types |= bit
		}
		return s.types != 0
	}
	return false
}

// check reports whether v, a document decoded by [jsonx.Decode], certainly satisfies s.
func (s *shape) check(v any) bool {
	if s.never {
		return false
	}
	if s.types != 0 && !s.types.admits(v) {
		return false
	}
	if (s.konst != nil && !s.konst.has(v)) || (s.enum != nil && !s.enum.has(v)) {
		return false
	}
	if s.ref != nil && !s.ref.check(v) {
		return false
	}
	for _, a := range s.allOf {
		if !a.check(v) {
			return false
		}
	}
	if len(s.anyOf) > 0 && !s.anyHolds(v) {
		return false
	}
	if s.not != nil && s.not.valid(v) {
		return false
	}
	if len(s.oneOf) > 0 {
		var w shapeWalk
		if i, j := w.oneOfHolding(s, v); i < 0 || j >= 0 {
			return false
		}
	}
	if s.cond != nil {
		if c := s.conditional(s.cond.valid(v)); c != nil && !c.check(v) {
			return false
		}
	}
	switch v := v.(type) {
	case string:
		return s.stringHolds(v)
	case json.Number:
		if len(s.bounds) > 0 && !s.boundsHold(v) {
			return false
		}
		if s.multipleLit != "" {
			if ok, decided := multipleOf(readNumber(string(v)), s.multipleOf); !ok || !decided {
				return false // over 19 digits: violations decides
			}
		}
	case map[string]any:
		return s.objectHolds(v)
	case []any:
		if n := int64(len(v)); (s.hasMinItems && n < s.minItems) || (s.hasMaxItems && n > s.maxItems) {
			return false
		}
		if s.unique {
			if _, _, dup := duplicatePair(v); dup {
				return false
			}
		}
		for i, e := range v {
			if sub := s.itemShape(i); sub != nil && !sub.check(e) {
				return false
			}
		}
	}
	return true
}

// memberHolds reports whether the member name's value pv certainly satisfies what s
// applies to it when s has patternProperties: its property's subschema and that of
// every pattern matching name, or else additionalProperties.
func (s *shape) memberHolds(name string, pv any) bool {
	ps, known := s.props[name]
	if known && !ps.check(pv) {
		return false
	}
	for _, p := range s.patternProps {
		if p.re.MatchString(name) {
			if !p.sub.check(pv) {
				return false
			}
			known = true
		}
	}
	return known || !s.closed && (s.extra == nil || s.extra.check(pv))
}

// declared reports whether the member name is one of s.props or matches one of
// s.patternProps: additionalProperties does not apply to it.
func (s *shape) declared(name string) bool {
	if _, ok := s.props[name]; ok {
		return true
	}
	for _, p := range s.patternProps {
		if p.re.MatchString(name) {
			return true
		}
	}
	return false
}

// hasAll reports whether obj has every one of names.
func hasAll(obj map[string]any, names []string) bool {
	for _, name := range names {
		if _, ok := obj[name]; !ok {
			return false
		}
	}
	return true
}

// objectHolds reports whether the object v certainly satisfies the object keywords of
// s. It is check's case for objects, apart: check, recursive, keeps a small frame for
// the scalars most of its calls are for.
func (s *shape) objectHolds(v map[string]any) bool {
	if n := int64(len(v)); (s.hasMinProps && n < s.minProps) || (s.hasMaxProps && n > s.maxProps) {
		return false
	}
	if !hasAll(v, s.required) {
		return false
	}
	if s.noNames && len(v) > 0 {
		return false
	}
	for name, pv := range v {
		if s.names != nil && !s.names.nameHolds(name) {
			return false
		}
		if len(s.patternProps) > 0 {
			if !s.memberHolds(name, pv) {
				return false
			}
			continue
		}
		if ps, ok := s.props[name]; ok {
			if !ps.check(pv) {
				return false
			}
			continue
		}
		if s.closed || (s.extra != nil && !s.extra.check(pv)) {
			return false
		}
	}
	for _, d := range s.dependent {
		if _, ok := v[d.name]; ok && !hasAll(v, d.required) {
			return false
		}
	}
	return true
}

// stringHolds reports whether the string v satisfies the string keywords of s.
func (s *shape) stringHolds(v string) bool {
	// v has at least ⌈len/4⌉ runes and at most len: only count them when that does not
	// settle the bounds, as a 16 KiB argument under a minLength of 1 would be counted.
	fewest, most := int64((len(v)+utf8.UTFMax-1)/utf8.UTFMax), int64(len(v))
	if (s.hasMinLen && fewest < s.minLen) || (s.hasMaxLen && most > s.maxLen) {
		n := int64(utf8.RuneCountInString(v))
		if (s.hasMinLen && n < s.minLen) || (s.hasMaxLen && n > s.maxLen) {
			return false
		}
	}
	return s.pattern == nil || s.pattern.MatchString(v)
}

// nameHolds reports whether the member name satisfies s, a shape built by nameShape,
// as check would, without boxing name in an interface (which allocates).
func (s *shape) nameHolds(name string) bool {
	if s.types != 0 && s.types&typeString == 0 {
		return false
	}
	if (s.konst != nil && !s.konst.hasString(name)) || (s.enum != nil && !s.enum.hasString(name)) {
		return false
	}
	return s.stringHolds(name)
}

// anyHolds reports whether one of s.anyOf certainly holds for v.
func (s *shape) anyHolds(v any) bool {
	for _, a := range s.anyOf {
		if a.check(v) {
			return true
		}
	}
	return false
}

// conditional is the subschema that applies when "if" holds or not: then or els.
func (s *shape) conditional(holds bool) *shape {
	if holds {
		return s.then
	}
	return s.els
}

// itemShape is the shape of item i of an array; nil: anything.
func (s *shape) itemShape(i int) *shape {
	if i < len(s.prefix) {
		return s.prefix[i]
	}
	return s.items
}

// admits reports whether v certainly has one of the types in t.
func (t typeSet) admits(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		return t&typeObject != 0
	case []any:
		return t&typeArray != 0
	case string:
		return t&typeString != 0
	case json.Number:
		return t&typeNumber != 0 || (t&typeInteger != 0 && plainInteger(string(v)))
	case bool:
		return t&typeBoolean != 0
	case nil:
		return t&typeNull != 0
	}
	return false
}

// boundsHold reports whether v is within every bound of s: a plain integer against
// integer bounds (the commonest case, from the Go SDK's sized integers) is compared as
// an int64, anything else exactly as a decimal.
func (s *shape) boundsHold(v json.Number) bool {
	if s.intBounds {
		if i, ok := integerValue(v); ok {
			for _, b := range s.bounds {
				if !b.holdsInt(i) {
					return false
				}
			}
			return true
		}
	}
	n := readNumber(string(v))
	for _, b := range s.bounds {
		if !b.holds(n) {
			return false
		}
	}
	return true
}

func (b bound) holdsInt(i int64) bool {
	switch {
	case i == b.intLimit:
		return b.equal
	case b.below:
		return i < b.intLimit
	default:
		return i > b.intLimit
	}
}

// holds reports whether the number n is within b.
func (b bound) holds(n number) bool {
	switch c := compareNumbers(n, b.limit); {
	case c == 0:
		return b.equal
	case b.below:
		return c < 0
	default:
		return c > 0
	}
}

// integerValue returns v as an int64 when it is a number written as a plain integer
// that fits.
func integerValue(v any) (int64, bool) {
	n, ok := v.(json.Number)
	if !ok || !plainInteger(string(n)) {
		return 0, false
	}
	i, err := strconv.ParseInt(string(n), 10, 64)
	return i, err == nil
}

// plainInteger reports whether a JSON number literal is written as an integer (no
// fraction, no exponent). 1.0 and 1e2 are integers too, but the library decides those.
func plainInteger(n string) bool {
	if n != "" && n[0] == '-' {
		n = n[1:]
	}
	if n == "" {
		return false
	}
	for i := 0; i < len(n); i++ {
		if n[i] < '0' || n[i] > '9' {
			return false
		}
	}
	return true
}
