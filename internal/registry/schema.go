package registry

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"net/url"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolsd/toolsd/internal/jsonx"
	"github.com/toolsd/toolsd/internal/textcut"
)

// schemaBase is the URL a submitted schema is compiled under. Relative $refs resolve
// against it (or an embedded $id) and then fail like any other outside reference.
const schemaBase = "toolsd://schema/root.json"

// maxPatternBytes bounds one regular expression in a schema.
const maxPatternBytes = 4096

// MaxSchemaObjects bounds the JSON objects in one schema document. The compiler's work
// grows faster than linearly with the number of subschemas, so a size limit alone would
// let one registration burn a CPU for a second.
const MaxSchemaObjects = 2000

// MaxSchemaPointerBytes bounds the JSON pointers to a schema document's objects,
// summed over its objects. The library keeps each subschema's location, looks it up
// in the document and compares it with the locations queued before it, and
// [checkCounts] walks each again, so compiling costs time growing with this sum (and
// memory holding it, percent-encoded, for as long as the tool is registered). Within
// max_schema_bytes and [MaxSchemaObjects], 30 levels of 1 KB keys above 1,900
// subschemas made 58 MB of pointers and took 4 s to compile; at this bound the worst
// takes about as long as 2,000 plain objects. A schema of 2,000 objects whose
// pointers average 128 bytes fits, and the repository's largest test schemas hold
// 33 KB.
const MaxSchemaPointerBytes = 256 << 10

// schemaKind names which schema of a definition is being compiled, for messages.
type schemaKind string

const (
	parametersSchema schemaKind = "parameters"
	outputSchema     schemaKind = "output schema"
)

// compileSchema parses raw as strict JSON and compiles it as a JSON Schema with every
// loader disabled: draft 2020-12 unless "$schema" names another draft the library
// embeds (draft-07, 2019-09, 06, 04). Patterns compile with Go's regexp (RE2), whose
// matching is linear in the input, so no pattern can backtrack catastrophically (and
// a pattern's size is bounded, see maxPatternSize); ECMA-262
// features RE2 lacks (lookaround, backreferences) are rejected at registration.
// With requireObject the root must declare "type": "object", and not beside a "$ref"
// of a draft before 2019-09, which would void it.
func compileSchema(name string, raw []byte, kind schemaKind, requireObject bool, lim schemaLimits) (_ *schema, err error) {
	maxBytes := lim.maxBytes
	where := "tool " + quoteName(name) + " " + string(kind)
	if len(raw) > maxBytes {
		return nil, fmt.Errorf("%w: %s is %d bytes, over the limit of %d", ErrLimit, where, len(raw), maxBytes)
	}
	depth := lim.schemaDepth()
	doc, err := jsonx.Decode(raw, jsonx.Limits{MaxBytes: maxBytes, MaxDepth: depth})
	if errors.Is(err, jsonx.ErrTooDeep) {
		return nil, fmt.Errorf("%w: %s nests deeper than %d levels (twice the depth of the documents it validates plus one, at least %d): %w",
			ErrLimit, where, depth, jsonx.DefaultMaxDepth, &jsonError{err: err})
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: malformed JSON: %w", ErrInvalidSchema, where, &jsonError{err: err})
	}
	size := measureDoc(doc, MaxSchemaObjects+1, MaxSchemaPointerBytes+1)
	if size.objects > MaxSchemaObjects {
		return nil, fmt.Errorf("%w: %s has more than %d JSON objects", ErrLimit, where, MaxSchemaObjects)
	}
	if size.pointerBytes > MaxSchemaPointerBytes {
		return nil, fmt.Errorf("%w: %s: the JSON pointers to its objects are more than %d bytes together (long keys nested deep)",
			ErrLimit, where, MaxSchemaPointerBytes)
	}
	if requireObject {
		if obj, ok := doc.(map[string]any); !ok || obj["type"] != "object" {
			return nil, fmt.Errorf(`%w: %s: root must be an object schema with "type": "object"`, ErrInvalidSchema, where)
		}
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(refuseLoader{})
	patterns := patternBudget{left: maxPatternsSize}
	c.UseRegexpEngine(patterns.compile)
	if err := c.AddResource(schemaBase, doc); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalidSchema, where, err)
	}
	defer func() {
		// The compiler runs on provider-supplied documents: a library bug must cost one
		// registration, not the daemon.
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %s: schema compiler failed: %v", ErrInvalidSchema, where, p)
		}
	}()
	lib, err := c.Compile(schemaBase)
	patterns.sealed = true
	if patterns.over {
		return nil, fmt.Errorf("%w: %s: its patterns together expand to more than %d regex instructions (counted repetitions multiply)",
			ErrLimit, where, maxPatternsSize)
	}
	if err != nil {
		return nil, schemaError(where, doc, err)
	}
	if requireObject && lib.Ref != nil && lib.DraftVersion < 2019 {
		// The library, as the draft says, compiles nothing else of such a root.
		return nil, fmt.Errorf(`%w: %s: root's "type": "object" is ignored beside its "$ref" (before draft 2019-09 a "$ref" replaces every keyword beside it); put the reference under "allOf"`,
			ErrInvalidSchema, where)
	}
	perPlace, costs, err := checkFanout(where, lib, lim.maxDepth)
	if err != nil {
		return nil, err
	}
	if err := checkCounts(where, doc, lib); err != nil {
		return nil, err
	}
	sch := &schema{lib: lib, perPlace: perPlace, costs: costs, priceFirst: costs.uniqueItems || costs.patternSize > 0}
	if perPlace <= maxShapePlaces {
		sch.shape = newShape(doc, patterns.compiled)
	}
	return sch, nil
}

// jsonError is a schema the JSON parser refused, worded by [jsonx.Describe]: its
// reason and offset without the parser's package name, which the provider reading the
// refusal never wrote. It unwraps to the parser's error, so its sentinel still matches.
type jsonError struct{ err error }

func (e *jsonError) Error() string { return jsonx.Describe(e.err) }
func (e *jsonError) Unwrap() error { return e.err }

// schemaLimits bound a schema (maxBytes) and the documents it validates (maxDepth,
// the deepest nesting the document's parser accepts).
type schemaLimits struct{ maxBytes, maxDepth int }

// schemaDepth is the deepest nesting a schema may have: a schema describes each level of
// an object with two (the object's schema and its "properties"), so it may nest twice as
// deep as its documents, plus one for their innermost values, and never less than
// jsonx's default, so that lowering the documents' depth refuses no schema it admitted.
func (l schemaLimits) schemaDepth() int {
	return min(max(jsonx.DefaultMaxDepth, 2*l.maxDepth+1), jsonx.MaxDepthCeiling)
}

// patternSizeOf is a pattern's estimated program size.
func patternSizeOf(re jsonschema.Regexp) int {
	if r, ok := re.(re2Regexp); ok {
		return r.size
	}
	return maxPatternSize // only re2 compiles schema patterns
}

// keywordCosts are the keywords of a schema whose cost per value is more than a
// constant (gathered by checkFanout, used by schema.checkWork).
type keywordCosts struct {
	// patternSize: the largest pattern's program (matching costs up to it per byte).
	patternSize int
	// enumSize: the largest enum (a value is compared with its members one by one,
	// numbers exactly, parsing both).
	enumSize int
	// requiredSize: the longest required list plus every dependentRequired (or draft-07
	// dependencies) name and list of one subschema, checked per object.
	requiredSize int
	// uniqueItems: arrays of up to 20 items are compared pairwise, deeply.
	uniqueItems bool
	// formatRegex: an asserted "format": "regex" compiles every string it checks.
	formatRegex bool
	// formatText: another asserted format reads every string it checks (parsing a URI,
	// a JSON pointer or a URI template costs a few nanoseconds per byte).
	formatText bool
	// numeric: a keyword compares numbers exactly (multipleOf, a bound, "integer", a
	// const): the library parses each number as a big rational, at a cost growing with
	// its exponent.
	numeric bool
	// enumNumbers: the most numeric enum members of one subschema, each of which a
	// number is compared with (parsing both); memberNumbers: the most one subschema's
	// numeric enum members and const cost to parse (see numberCost).
	enumNumbers, memberNumbers int
	// deepMembers: the most enum members and const of one subschema that are non-empty
	// arrays or objects. Comparing a value with one walks the value down in step with
	// it, up to deepDepth levels, parsing each number met beside one of the member's,
	// which costs up to deepNumber.
	deepMembers, deepDepth, deepNumber int
	// dynamic: a $dynamicRef or $recursiveRef resolves through a dynamic anchor, by
	// walking every subschema applied on the way from the document's root.
	dynamic bool
}

// add takes in the costly keywords of one subschema.
func (k *keywordCosts) add(s *jsonschema.Schema) {
	if s.Pattern != nil {
		k.patternSize = max(k.patternSize, patternSizeOf(s.Pattern))
	}
	for re := range s.PatternProperties {
		k.patternSize = max(k.patternSize, patternSizeOf(re))
	}
	members, numbers := 0, 0
	if s.Enum != nil {
		k.enumSize = max(k.enumSize, len(s.Enum.Values))
		for _, v := range s.Enum.Values {
			if n, ok := v.(json.Number); ok {
				members += numberCost(string(n))
				numbers++
			}
		}
	}
	k.enumNumbers = max(k.enumNumbers, numbers)
	if s.Const != nil {
		k.numeric = true
		if n, ok := (*s.Const).(json.Number); ok {
			members += numberCost(string(n))
		}
	}
	k.memberNumbers = max(k.memberNumbers, members)
	deep := 0
	if s.Enum != nil {
		for _, v := range s.Enum.Values {
			deep += k.addDeep(v)
		}
	}
	if s.Const != nil {
		deep += k.addDeep(*s.Const)
	}
	k.deepMembers = max(k.deepMembers, deep)
	// An object is looked up for every dependentRequired (or dependencies) name, then
	// for each list of a name it has.
	required := len(s.Required) + len(s.DependentRequired) + len(s.Dependencies)
	for _, names := range s.DependentRequired {
		required += len(names)
	}
	for _, d := range s.Dependencies {
		if names, ok := d.([]string); ok {
			required += len(names)
		}
	}
	k.requiredSize = max(k.requiredSize, required)
	k.uniqueItems = k.uniqueItems || s.UniqueItems
	k.dynamic = k.dynamic || s.DynamicRef != nil && s.DynamicRef.Anchor != "" || s.RecursiveRef != nil && s.RecursiveRef.RecursiveAnchor
	k.formatRegex = k.formatRegex || s.Format != nil && s.Format.Name == "regex"
	k.formatText = k.formatText || s.Format != nil && s.Format.Name != "regex"
	k.numeric = k.numeric || s.MultipleOf != nil || s.Minimum != nil || s.Maximum != nil ||
		s.ExclusiveMinimum != nil || s.ExclusiveMaximum != nil || s.Types != nil && slices.Contains(s.Types.ToStrings(), "integer")
}

// addDeep takes in an enum member or const, reporting 1 when it is a non-empty array
// or object.
func (k *keywordCosts) addDeep(v any) int {
	switch v.(type) {
	case map[string]any, []any:
	default:
		return 0
	}
	depth := memberDepth(v, k)
	k.deepDepth = max(k.deepDepth, depth)
	return min(depth, 1)
}

// memberDepth is how many levels below its place comparing a value with member v may
// walk: 0 for a scalar or an empty array or object, which is compared at once. It
// takes in the cost of v's numbers as deepNumber.
func memberDepth(v any, k *keywordCosts) int {
	d := 0
	switch v := v.(type) {
	case map[string]any:
		for _, c := range v {
			d = max(d, 1+memberDepth(c, k))
		}
	case []any:
		for _, c := range v {
			d = max(d, 1+memberDepth(c, k))
		}
	case json.Number:
		k.deepNumber = max(k.deepNumber, numberCost(string(v)))
	}
	return d
}

// schemaSize is what a schema document holds that compiling it costs.
type schemaSize struct {
	// objects: the JSON objects, each of which may be a subschema.
	objects int
	// pointerBytes: the JSON pointers to those objects (escaped, not
	// percent-encoded), summed.
	pointerBytes int
}

// measureDoc measures v in one pass, stopping once objects reaches stopObjects or
// pointerBytes reaches stopBytes. No pointer is built: each value is walked knowing
// its pointer's length.
func measureDoc(v any, stopObjects, stopBytes int) schemaSize {
	var n schemaSize
	var walk func(v any, ptrLen int)
	walk = func(v any, ptrLen int) {
		if n.objects >= stopObjects || n.pointerBytes >= stopBytes {
			return
		}
		switch v := v.(type) {
		case map[string]any:
			n.objects++
			n.pointerBytes += ptrLen
			for k, c := range v {
				walk(c, ptrLen+1+len(k)+strings.Count(k, "~")+strings.Count(k, "/"))
			}
		case []any:
			for i, c := range v {
				walk(c, ptrLen+1+len(strconv.Itoa(i)))
			}
		}
	}
	walk(v, 0)
	return n
}

// countKeywords are the keywords the library reads as an int.
var countKeywords = []string{"minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties", "minContains", "maxContains"}

// checkCounts refuses a count keyword of a subschema of root that does not fit an int.
// The library keeps only such a count's low bits: 1e19 read as a negative count and
// 2^64 as 0, so the tool accepted arguments its schema refuses, or refused them all.
// Each subschema is found in doc by its location, so a value (an enum member, a
// default) is never mistaken for one.
func checkCounts(where string, doc any, root *jsonschema.Schema) error {
	g := &fanout{node: map[*jsonschema.Schema]*fanNode{}}
	g.collect(root)
	for _, n := range g.order {
		obj, ok := locate(doc, n.s.Location).(map[string]any)
		if !ok {
			continue
		}
		for _, k := range countKeywords {
			v, ok := obj[k].(json.Number)
			if !ok {
				continue
			}
			if c, ok := new(big.Rat).SetString(string(v)); ok && c.IsInt() && c.Num().Cmp(big.NewInt(math.MaxInt)) > 0 {
				return fmt.Errorf("%w: %s: %s at %s is %s, over the largest count a schema may hold (%d)",
					ErrLimit, where, k, schemaPointer(n.s), v, math.MaxInt)
			}
		}
	}
	return nil
}

// locate returns the value of doc at a compiled subschema's location, nil when the
// location is outside doc (a standard metaschema).
func locate(doc any, location string) any {
	frag, ok := strings.CutPrefix(location, schemaBase+"#")
	if !ok {
		return nil
	}
	v := doc
	for _, tok := range strings.Split(frag, "/")[1:] {
		tok, err := url.PathUnescape(tok)
		if err != nil {
			return nil
		}
		tok = pointerUnescaper.Replace(tok)
		switch c := v.(type) {
		case map[string]any:
			v = c[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil
			}
			v = c[i]
		default:
			return nil
		}
	}
	return v
}

// refuseLoader is the only loader the compiler gets: every URL outside the document
// (http, https, file, relative, custom metaschemas) is refused.
type refuseLoader struct{}

func (refuseLoader) Load(u string) (any, error) {
	return nil, fmt.Errorf("loading %q is disabled", u)
}

// re2Regexp is a schema pattern with its estimated program size (matching costs up to
// the size per byte of input).
type re2Regexp struct {
	*regexp.Regexp
	size int
}

func re2(pattern string) (jsonschema.Regexp, error) {
	if len(pattern) > maxPatternBytes {
		return nil, fmt.Errorf("pattern longer than %d bytes", maxPatternBytes)
	}
	parsed, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil, err
	}
	size := regexSize(parsed, maxPatternSize+1)
	if size > maxPatternSize {
		return nil, fmt.Errorf("pattern expands to more than %d regex instructions (counted repetitions multiply)", maxPatternSize)
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, err
	}
	return re2Regexp{re, size}, nil
}

// maxPatternsSize bounds the compiled size of a schema's distinct patterns together.
// Each compiled instruction costs tens of bytes for as long as the tool is registered,
// and compiling it costs time on the provider's stream: without a bound for the whole
// schema, 64 KiB of ".{0,1000}" patterns, each under maxPatternSize, took seconds to
// compile and held 166 MB per tool, where a schema without patterns holds about 1 MB.
// Two of the largest single patterns fit.
const maxPatternsSize = 2 * maxPatternSize

// patternBudget is the regexp engine of one schema's compilation: it compiles each
// distinct pattern once (the metaschema's "format": "regex" check and the schema's own
// keywords ask for the same pattern) and refuses patterns once their sizes together
// pass the budget. Once sealed (compilation is over) it is plain re2: the compiled
// schema keeps the engine for an asserted "format": "regex", which checks argument
// strings, concurrently, for as long as the tool is registered.
type patternBudget struct {
	left     int
	over     bool
	sealed   bool
	compiled map[string]jsonschema.Regexp
}

func (b *patternBudget) compile(pattern string) (jsonschema.Regexp, error) {
	if b.sealed {
		return re2(pattern)
	}
	if re, ok := b.compiled[pattern]; ok {
		return re, nil
	}
	if b.over {
		return nil, errPatternsOverBudget
	}
	re, err := re2(pattern)
	if err != nil {
		return nil, err
	}
	size := re.(re2Regexp).size
	if size > b.left {
		b.over = true
		return nil, errPatternsOverBudget
	}
	b.left -= size
	if b.compiled == nil {
		b.compiled = make(map[string]jsonschema.Regexp)
	}
	b.compiled[pattern] = re
	return re, nil
}

var errPatternsOverBudget = errors.New("the schema's patterns together are over their size budget")

// maxPatternSize bounds a pattern's compiled size. RE2 matches in time linear in the
// input but proportional to the program too, and counted repetitions multiply it: a
// few hundred bytes of ".{0,1000}" make a program that takes seconds per kilobyte of
// argument, and seconds and hundreds of megabytes to compile.
const maxPatternSize = 10000

// regexSize estimates the instructions re compiles to, stopping once past limit.
func regexSize(re *syntax.Regexp, limit int) int {
	n := 1
	for _, sub := range re.Sub {
		if n += regexSize(sub, limit); n > limit {
			return n
		}
	}
	switch re.Op {
	case syntax.OpLiteral:
		n += len(re.Rune)
	case syntax.OpRepeat:
		times := re.Max
		if times < 0 {
			times = re.Min + 1
		}
		n *= max(times, 1)
	}
	return min(n, limit+1)
}

// schemaError turns a compiler error into a registration error; an outside reference
// names the JSON pointer of the offending keyword.
func schemaError(where string, doc any, err error) error {
	var load *jsonschema.LoadURLError
	if errors.As(err, &load) {
		base, _ := url.Parse(schemaBase)
		if ptr, ref, ok := findReference(doc, base, load.URL, ""); ok {
			return fmt.Errorf("%w: %s: %s %s at %s resolves outside the schema; remote and file references are not loaded",
				ErrInvalidSchema, where, refKeyword(ptr), quoteRef(ref), truncate(ptr))
		}
		return fmt.Errorf("%w: %s: reference to %s is not loaded (only the submitted document and the standard metaschemas are available)",
			ErrInvalidSchema, where, quoteRef(load.URL))
	}
	var self *jsonschema.UnsupportedDraftError
	if errors.As(err, &self) {
		base, _ := url.Parse(schemaBase)
		if ptr, ref, ok := findReference(doc, base, self.URL, ""); ok {
			return fmt.Errorf("%w: %s: $schema %s at %s names the document itself; name a draft (2020-12, 2019-09, draft-07, -06 or -04) or leave it out",
				ErrInvalidSchema, where, quoteRef(ref), truncate(ptr))
		}
	}
	var meta *jsonschema.SchemaValidationError
	var verr *jsonschema.ValidationError
	if errors.As(err, &meta) && errors.As(meta.Err, &verr) {
		vs := violations(verr, describeSchema)
		msgs := make([]string, 0, maxReportedInError)
		for i, v := range vs {
			if i == maxReportedInError {
				msgs = append(msgs, fmt.Sprintf("and %d more", len(vs)-i))
				break
			}
			msgs = append(msgs, cmp.Or(v.Pointer, "/")+": "+v.Message)
		}
		return fmt.Errorf("%w: %s: not a valid JSON Schema: %s", ErrInvalidSchema, where, strings.Join(msgs, "; "))
	}
	return fmt.Errorf("%w: %s: %s", ErrInvalidSchema, where, textcut.Ellipsis(stripBase(err.Error()), maxLibraryMessage))
}

// maxLibraryMessage bounds the library's own words for a refused schema, which quote
// the references and places they are about: each may be as long as the schema.
const maxLibraryMessage = 4 * maxViolationMessage

// quoteRef quotes a reference the provider wrote, cut as a violation's message is:
// a message naming it is logged and answered for every tool of a register message.
func quoteRef(ref string) string { return strconv.Quote(truncate(ref)) }

// refersTo reports whether the value s of reference keyword k names target: resolved
// against base, or, for $schema, which the library reads as written, without its
// fragment.
func refersTo(base *url.URL, k, s, target string) bool {
	if raw, _, _ := strings.Cut(s, "#"); k == "$schema" && raw == target {
		return true
	}
	u, err := base.Parse(s)
	if err != nil {
		return false
	}
	u.Fragment, u.RawFragment = "", ""
	return u.String() == target
}

func refKeyword(ptr string) string { return ptr[strings.LastIndexByte(ptr, '/')+1:] }

// findReference walks doc for the reference keyword whose target (resolved against base
// and any enclosing $id) is target, returning its JSON pointer and written value. Keys
// are walked in sorted order so the answer is deterministic.
func findReference(doc any, base *url.URL, target, ptr string) (string, string, bool) {
	switch v := doc.(type) {
	case map[string]any:
		if id, ok := v["$id"].(string); ok {
			if u, err := base.Parse(id); err == nil {
				base = u
			}
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if s, ok := v[k].(string); ok && (k == "$ref" || k == "$dynamicRef" || k == "$recursiveRef" || k == "$schema") {
				if refersTo(base, k, s, target) {
					return ptr + "/" + escapePointer(k), s, true
				}
			}
		}
		for _, k := range keys {
			if p, s, ok := findReference(v[k], base, target, ptr+"/"+escapePointer(k)); ok {
				return p, s, true
			}
		}
	case []any:
		for i, e := range v {
			if p, s, ok := findReference(e, base, target, fmt.Sprintf("%s/%d", ptr, i)); ok {
				return p, s, true
			}
		}
	}
	return "", "", false
}

// stripBase removes the internal base URL from library messages: "#/$defs/x" reads
// better than the URL the document was compiled under.
func stripBase(msg string) string { return strings.ReplaceAll(msg, schemaBase, "") }

var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

func escapePointer(tok string) string { return pointerEscaper.Replace(tok) }

var pointerUnescaper = strings.NewReplacer("~1", "/", "~0", "~")
