package registry

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/toolsd/toolsd/internal/jsonx"
	"github.com/toolsd/toolsd/internal/textcut"
)

// Violation is one schema failure at one place in the validated document.
type Violation struct {
	// Pointer is the JSON pointer of the offending value ("" for the document itself).
	Pointer string
	// Message says what is wrong, in words a model can act on.
	Message string
}

// ValidationError is a document that failed parsing or schema validation. Pointer and
// Message repeat the first violation; Error() is a concise, model-readable summary such
// as `invalid arguments: /a: expected number, got string`. It wraps
// [ErrInvalidArguments] or [ErrInvalidOutput], and the [jsonx] error when the document
// was not strict JSON.
type ValidationError struct {
	Pointer    string
	Message    string
	Violations []Violation

	what  string // "arguments" or "output"
	cause error
}

// Limits on what a ValidationError repeats, so a hostile document cannot produce a
// huge model-facing message.
const (
	maxViolations       = 20
	maxReportedInError  = 3
	maxViolationMessage = 200
)

// Error implements error.
func (e *ValidationError) Error() string {
	var b strings.Builder
	b.WriteString("invalid ")
	b.WriteString(e.what)
	b.WriteString(": ")
	for i, v := range e.Violations {
		if i == maxReportedInError {
			b.WriteString("; and " + strconv.Itoa(len(e.Violations)-i) + " more")
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		if v.Pointer != "" {
			b.WriteString(v.Pointer)
			b.WriteString(": ")
		}
		b.WriteString(v.Message)
	}
	return b.String()
}

// Unwrap exposes the sentinel and, for malformed JSON, the [*jsonx.Error].
func (e *ValidationError) Unwrap() []error {
	sentinel := ErrInvalidArguments
	if e.what == "output" {
		sentinel = ErrInvalidOutput
	}
	if e.cause != nil {
		return []error{sentinel, e.cause}
	}
	return []error{sentinel}
}

// ValidateArguments parses raw as strict JSON within the configured argument limits and
// validates it against the parameters schema. Failures are [*ValidationError].
func (e *Entry) ValidateArguments(raw string) error {
	return validate(e.params, raw, e.argLimits, "arguments")
}

// ValidateOutput validates a tool's JSON value against the output schema; it returns
// nil when the definition has none.
func (e *Entry) ValidateOutput(value []byte) error {
	if e.output == nil {
		return nil
	}
	return validate(e.output, value, e.outLimits, "output")
}

func validate[T jsonx.Text](sch *schema, raw T, lim jsonx.Limits, what string) error {
	v, err := jsonx.Decode(raw, lim)
	if err != nil {
		msg := "malformed JSON: " + jsonx.Describe(err)
		return &ValidationError{Message: msg, Violations: []Violation{{Message: msg}}, what: what, cause: err}
	}
	if sch.priceFirst {
		if err := sch.checkWork(v, what); err != nil {
			return err
		}
	}
	if sch.shape != nil {
		// The shape decides and words a failure at about the cost of checking it: the
		// library, whose work checkWork prices, does not run.
		if sch.shape.check(v) {
			return nil
		}
		vs := sch.shape.violations(v)
		if vs == nil {
			return nil
		}
		return &ValidationError{Pointer: vs[0].Pointer, Message: vs[0].Message, Violations: vs, what: what}
	}
	if !sch.priceFirst {
		if err := sch.checkWork(v, what); err != nil {
			return err
		}
	}
	err = sch.lib.Validate(v)
	if err == nil {
		return nil
	}
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		msg := truncate(err.Error())
		return &ValidationError{Message: msg, Violations: []Violation{{Message: msg}}, what: what}
	}
	vs := violations(verr, describe)
	return &ValidationError{Pointer: vs[0].Pointer, Message: vs[0].Message, Violations: vs, what: what}
}

// Bounds on one document's validation, which the library's work grows with. Every
// subschema applied at a place (up to perPlace of them, see checkFanout) may carry each
// costly keyword, so each is priced once per subschema applied:
//   - its values × subschemas applied at one place × (1 + the largest enum + 1,000 with
//     an asserted "format": "regex" + 20 per enclosing array with uniqueItems, whose
//     deep comparisons walk a value again for every array above it, + the enum members
//     and const of one subschema that are arrays or objects, per enclosing array or
//     object up to their depth, whose comparisons walk it again at every place above),
//   - its objects × subschemas applied × the longest required list of a subschema plus
//     its dependentRequired names and lists,
//   - its text (strings and keys) × subschemas applied × the largest pattern's program
//     (plus one with an asserted format other than "regex", which reads the text),
//   - with a reference resolved through a dynamic anchor, its values × subschemas
//     applied at one place (each may be such a reference) × the subschemas applied on
//     the way from the root (subschemas applied × enclosing arrays and objects), which
//     each resolution walks,
//   - its numbers, under a keyword that parses them exactly, × subschemas applied ×
//     how often each subschema parses one (and the enum members it is compared with,
//     at its place or, inside an array or object member, above it),
//
// each refused past its maximum before the library runs. A schema with one subschema per
// place and none of those keywords is never limited; one applying hundreds of subschemas
// at each place accepts documents of thousands of values, not a megabyte of them.
const (
	maxValidationWork = 1_000_000
	maxPatternWork    = 50_000_000 // program instructions × bytes of text; ~1 s of matching
	maxScopeWork      = 50_000_000 // subschemas walked to resolve dynamic references; ~15 ns each
	// maxNumberWork bounds the sum over a document's number parses of their length plus
	// their exponent's magnitude (~30 ns each when parsed exactly).
	maxNumberWork = 30_000_000
	// uniqueItemsCost and formatRegexCost price a value under those keywords: up to 20
	// deep comparisons per enclosing array, and compiling the string as a pattern (up to
	// ~1 ms).
	uniqueItemsCost = 20
	formatRegexCost = 1000
)

// workPrices is what checkWork charges a document's parts, per subschema applied at
// their place.
type workPrices struct {
	value  int // a value, outside any array
	array  int // a value, per enclosing array (uniqueItems)
	object int // an object (required lists)
	text   int // a byte of a string or key (patterns)
	// number parses a number, outside any array (numberParses per enclosing array on
	// top), each parse costing numberCost; member is the enum members and const it is
	// compared with, per number.
	number, numberParses, member int
	// deep is a value's comparisons with array and object members, per enclosing array
	// or object up to deepDepth above it; each parses a number beside one costing up to
	// deepNumber.
	deep, deepDepth, deepNumber int
	// scope is a value's dynamic references' walks, per place on the way from the root.
	scope int
}

// checkWork refuses a document whose validation would exceed the bounds above.
func (sch *schema) checkWork(v any, what string) error {
	k := &sch.costs
	places := max(sch.perPlace, 1)
	each := 1 + k.enumSize
	if k.formatRegex {
		each += formatRegexCost
	}
	var p workPrices
	p.value = places * each
	if k.uniqueItems {
		p.array = places * uniqueItemsCost
	}
	if k.requiredSize > 1 {
		p.object = places * k.requiredSize
	}
	p.text = places * k.patternSize
	if k.formatText {
		p.text += places // about one pattern instruction per byte
	}
	if k.numeric || k.enumNumbers > 0 || k.uniqueItems {
		parses := k.enumNumbers
		if k.numeric {
			parses++
		}
		p.number = places * parses
		p.numberParses = p.array
		p.member = places * k.memberNumbers
	}
	if k.deepMembers > 0 {
		p.deep, p.deepDepth, p.deepNumber = places*k.deepMembers, k.deepDepth, k.deepNumber
	}
	if k.dynamic {
		p.scope = places * places
	}
	if p.value <= 1 && p.array == 0 && p.object == 0 && p.text == 0 && p.number == 0 && p.numberParses == 0 && p.deep == 0 && p.scope == 0 {
		return nil
	}
	n := measure(v, p)
	var msg string
	switch {
	case n.values > maxValidationWork:
		msg = fmt.Sprintf("too many values for this tool's schema: checking them takes more than %d comparisons (each value against up to %d subschemas, and their enum members and comparisons)", maxValidationWork, places)
	case n.objects > maxValidationWork:
		msg = fmt.Sprintf("too many objects for this tool's schema: each checked for up to %d required properties in each of up to %d subschemas, more than %d checks", k.requiredSize, places, maxValidationWork)
	case n.text > maxPatternWork:
		msg = fmt.Sprintf("too much text for this tool's schema: its strings and keys, matched against patterns of up to %d instructions or read as formats in up to %d subschemas, take more than %d steps", k.patternSize, places, maxPatternWork)
	case n.scopes > maxScopeWork:
		msg = fmt.Sprintf("too deep for this tool's schema: its values resolve dynamic references by walking up to %d subschemas per level above them, more than %d steps", places, maxScopeWork)
	case n.numbers > maxNumberWork:
		msg = "numbers too large for this tool's schema: their digits and exponents, as often as the schema parses them, add up to more than " + strconv.Itoa(maxNumberWork)
	default:
		return nil
	}
	return &ValidationError{Message: msg, Violations: []Violation{{Message: msg}}, what: what}
}

// numberCost is a number's length plus its exponent's magnitude (jsonx bounds both).
func numberCost(s string) int {
	c := len(s)
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, _ := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+"))
		c += max(e, -e)
	}
	return c
}

// docSize is the work measure finds in a document, by bound.
type docSize struct{ values, objects, text, numbers, scopes int }

// measure prices the values, objects, text and numbers of v at p, stopping once any
// passes its bound. Every term is small enough (jsonx bounds a document's size and
// depth, the schema its prices) that the sums cannot overflow before the stop.
func measure(v any, p workPrices) docSize {
	var n docSize
	within := func() bool {
		return n.values <= maxValidationWork && n.objects <= maxValidationWork && n.text <= maxPatternWork &&
			n.numbers <= maxNumberWork && n.scopes <= maxScopeWork
	}
	// arrays counts the arrays enclosing v, containers the arrays and objects.
	var walk func(v any, arrays, containers int) bool
	walk = func(v any, arrays, containers int) bool {
		deep := p.deep * min(containers, p.deepDepth)
		n.values += p.value + p.array*arrays + deep
		n.scopes += p.scope * (containers + 1)
		switch v := v.(type) {
		case string:
			n.text += p.text * len(v)
		case json.Number:
			c := numberCost(string(v))
			n.numbers += (p.number+p.numberParses*arrays)*c + p.member + deep*(c+p.deepNumber)
		case map[string]any:
			n.objects += p.object
			for k, c := range v {
				n.text += p.text * len(k)
				if !walk(c, arrays, containers+1) {
					return false
				}
			}
		case []any:
			for _, c := range v {
				if !walk(c, arrays+1, containers+1) {
					return false
				}
			}
		}
		return within()
	}
	walk(v, 0, 0)
	return n
}

var printer = message.NewPrinter(language.English)

// violations flattens the library's error tree to its leaves, sorted by pointer so the
// message is deterministic (the library walks properties in map order). A failing
// document can have hundreds of thousands of leaves: only the first maxLeaves are read,
// and only the first by pointer are worded, by word (wording one can format a whole enum
// or required list).
func violations(root *jsonschema.ValidationError, word func(jsonschema.ErrorKind) string) []Violation {
	// libFailure is one leaf; key, when named, is the property name a propertyNames
	// failure is about (it may be ""): the library validates it on its own, at no
	// pointer into the document.
	type libFailure struct {
		kind  jsonschema.ErrorKind
		key   string
		named bool
	}
	var leaves []leaf[libFailure]
	var walk func(e *jsonschema.ValidationError, f libFailure)
	walk = func(e *jsonschema.ValidationError, f libFailure) {
		if len(leaves) == maxLeaves {
			return
		}
		if k, ok := e.ErrorKind.(*kind.PropertyNames); ok {
			f.key, f.named = k.Property, true
		}
		if len(e.Causes) == 0 {
			f.kind = e.ErrorKind
			leaves = append(leaves, leaf[libFailure]{pointer(e.InstanceLocation), f})
			return
		}
		for _, c := range e.Causes {
			walk(c, f)
		}
	}
	walk(root, libFailure{})
	out := worded(leaves, func(f libFailure) string {
		if f.named {
			return truncate("property name " + quoteName(f.key) + ": " + word(f.kind))
		}
		return word(f.kind)
	})
	if len(out) == 0 {
		out = []Violation{{Message: "does not match the schema"}}
	}
	return out
}

// leaf is one failure at one place; F says what failed, for word.
type leaf[F any] struct {
	pointer string
	failure F
}

// worded reports leaves as violations: sorted by pointer, the first maxWordedLeaves
// worded, and at most maxViolations distinct ones kept.
func worded[F any](leaves []leaf[F], word func(F) string) []Violation {
	slices.SortStableFunc(leaves, func(a, b leaf[F]) int { return cmp.Compare(a.pointer, b.pointer) })
	leaves = leaves[:min(len(leaves), maxWordedLeaves)]
	out := make([]Violation, len(leaves))
	for i, l := range leaves {
		out[i] = Violation{Pointer: l.pointer, Message: word(l.failure)}
	}
	slices.SortStableFunc(out, func(a, b Violation) int {
		return cmp.Or(cmp.Compare(a.Pointer, b.Pointer), cmp.Compare(a.Message, b.Message))
	})
	out = slices.Compact(out)
	if len(out) > maxViolations {
		out = out[:maxViolations]
	}
	return out
}

// maxWordedLeaves bounds the failures worded for one document, maxLeaves those read
// from the library's error tree at all (see violations): past it, which failures are
// reported may depend on the library's walk order.
const (
	maxWordedLeaves = 4 * maxViolations
	maxLeaves       = 10_000
)

// describe words one failure. Kinds that would echo the offending value (which may be
// huge) name only what was expected.
func describe(k jsonschema.ErrorKind) string {
	switch k := k.(type) {
	case *kind.Type:
		return "expected " + strings.Join(k.Want, " or ") + ", got " + k.Got
	case *kind.Pattern:
		return truncate("does not match pattern " + strconv.Quote(k.Want))
	case *kind.Format:
		return truncate("is not a valid " + k.Want)
	case *kind.FalseSchema:
		// The library's "false schema" names the mechanics, not the mistake: a property
		// the schema forbids, an item past a tuple's end, an unevaluated property.
		return "no value is allowed here"
	case *kind.Not:
		return `must not match the schema under "not"`
	case *kind.OneOf:
		if len(k.Subschemas) < 2 {
			return `matches none of the schemas under "oneOf"; it must match exactly one`
		}
		return fmt.Sprintf(`matches schemas %d and %d under "oneOf"; it must match exactly one`, k.Subschemas[0], k.Subschemas[1])
	case *kind.Const:
		// The library names an object or array it wants only as "'const' failed".
		switch k.Want.(type) {
		case map[string]any, []any:
			return truncate("value must be " + wantedJSON([]any{k.Want}))
		}
	case *kind.Enum:
		// As for const, when a member is an object or array ("'enum' failed").
		for _, v := range k.Want {
			switch v.(type) {
			case map[string]any, []any:
				return truncate("value must be one of " + wantedJSON(k.Want))
			}
		}
	}
	if s, ok := describeNumber(k); ok {
		return truncate(s)
	}
	return truncate(stripBase(k.LocalizedString(printer)))
}

// describeSchema words one failure of a submitted schema against its metaschema. The
// schema is the provider's own document, so a refused pattern's reason is given: RE2
// lacking the syntax, or the pattern over a size bound.
func describeSchema(k jsonschema.ErrorKind) string {
	if f, ok := k.(*kind.Format); ok && f.Err != nil {
		return truncate("is not a valid " + f.Want + ": " + f.Err.Error())
	}
	return describe(k)
}

// wantedJSON writes the values a const or enum wants as JSON, comma-separated, stopping
// once the text is longer than a violation's message may be: the values are the
// schema's, which may hold thousands.
func wantedJSON(values []any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // "a<b" as written, not "a\u003cb"
	for i, v := range values {
		if b.Len() > maxViolationMessage {
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		if enc.Encode(v) != nil {
			b.WriteString("?")
		}
		b.Truncate(len(bytes.TrimSuffix(b.Bytes(), []byte("\n"))))
	}
	return b.String()
}

func pointer(loc []string) string {
	if len(loc) == 0 {
		return ""
	}
	var b strings.Builder
	for _, tok := range loc {
		if b.Len() > maxViolationMessage {
			break // truncate cuts it there anyway
		}
		b.WriteByte('/')
		b.WriteString(escapePointer(tok[:min(len(tok), maxViolationMessage+1)]))
	}
	return truncate(b.String())
}

func truncate(s string) string { return textcut.Ellipsis(s, maxViolationMessage) }
