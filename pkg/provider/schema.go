package provider

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// deriveSchema builds the JSON Schema text of an arguments type. The root must describe
// a JSON object. Properties keep field order and keys a fixed order, so the same type
// always yields the same bytes (the prompt prefix must not change between runs).
func deriveSchema(t reflect.Type, strict bool) (string, error) {
	t = indirectType(t)
	d := deriver{strict: strict, visiting: map[reflect.Type]bool{}}
	var root *object
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		// The root is described by its fields even when it decodes itself (often to fill
		// in defaults or to validate): the arguments are always a JSON object.
		schema := d.schema
		if fromJSON, _ := decodesItself(t); fromJSON && t.Kind() == reflect.Struct && t != timeType {
			schema = d.object
		}
		o, err := schema(t)
		if err != nil {
			return "", err
		}
		if o.get("type") != "object" {
			return "", fmt.Errorf("arguments type %s is not a JSON object", t)
		}
		root = o
	case reflect.Interface:
		if err := decodableInterface(t); err != nil {
			return "", err
		}
		root = &object{}
		root.set("type", "object")
	case reflect.Pointer:
		return "", errRecursive(t)
	default:
		return "", fmt.Errorf("arguments type %s must be a struct or a map (the root schema is an object)", t)
	}
	var buf bytes.Buffer
	root.write(&buf)
	return buf.String(), nil
}

type deriver struct {
	strict   bool
	visiting map[reflect.Type]bool
}

var (
	timeType            = reflect.TypeFor[time.Time]()
	rawMessageType      = reflect.TypeFor[json.RawMessage]()
	numberType          = reflect.TypeFor[json.Number]()
	jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// decodesItself reports how encoding/json decodes a type that implements a decoding
// interface: one that decodes itself from any JSON value (json.Unmarshaler), or one
// that decodes from a JSON string (encoding.TextUnmarshaler, such as netip.Addr).
func decodesItself(t reflect.Type) (fromJSON, fromText bool) {
	p := reflect.PointerTo(t)
	fromJSON = t.Implements(jsonUnmarshalerType) || p.Implements(jsonUnmarshalerType)
	fromText = t.Implements(textUnmarshalerType) || p.Implements(textUnmarshalerType)
	return fromJSON, fromText
}

// indirectType returns t without its pointers. A pointer type that points to itself,
// directly or through other pointer types (type P *P), is returned as it is.
func indirectType(t reflect.Type) reflect.Type {
	var seen map[reflect.Type]bool
	for t.Kind() == reflect.Pointer {
		if seen[t] {
			return t
		}
		if seen == nil {
			seen = map[reflect.Type]bool{}
		}
		seen[t] = true
		t = t.Elem()
	}
	return t
}

// schema returns the schema of a Go type as encoding/json encodes it.
func (d *deriver) schema(t reflect.Type) (*object, error) {
	t = indirectType(t)
	switch t.Kind() {
	case reflect.Slice, reflect.Array, reflect.Map:
		// A named slice, array or map type can contain itself (type Tree map[string]Tree),
		// as a struct can (see object).
		if d.visiting[t] {
			return nil, errRecursive(t)
		}
		d.visiting[t] = true
		defer delete(d.visiting, t)
	case reflect.Pointer:
		return nil, errRecursive(t)
	}
	o := &object{}
	switch t {
	case timeType:
		o.set("type", "string")
		o.set("format", "date-time")
		return o, nil
	case rawMessageType:
		return o, nil // any JSON value
	case numberType:
		// A string type that encoding/json fills from a JSON number (or a string holding
		// one): the number is what a caller sends.
		o.set("type", "number")
		return o, nil
	}
	switch fromJSON, fromText := decodesItself(t); {
	case fromJSON:
		return o, nil // the type decides what it accepts: any JSON value
	case fromText:
		o.set("type", "string")
		return o, nil
	}
	switch t.Kind() {
	case reflect.Bool:
		o.set("type", "boolean")
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		o.set("type", "integer")
		integerRange(o, t)
	case reflect.Float32, reflect.Float64:
		o.set("type", "number")
	case reflect.String:
		o.set("type", "string")
	case reflect.Interface:
		if err := decodableInterface(t); err != nil {
			return nil, err
		}
		// any JSON value
	case reflect.Slice, reflect.Array:
		if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 {
			o.set("type", "string")
			o.set("contentEncoding", "base64")
			return o, nil
		}
		items, err := d.schema(t.Elem())
		if err != nil {
			return nil, err
		}
		o.set("type", "array")
		o.set("items", items)
	case reflect.Map:
		// The keys encoding/json decodes: strings, integers and text-decoding types.
		switch t.Key().Kind() {
		case reflect.String, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		default:
			if !reflect.PointerTo(t.Key()).Implements(textUnmarshalerType) {
				return nil, fmt.Errorf("map key type %s cannot be a JSON object key", t.Key())
			}
		}
		o.set("type", "object")
		if p := integerKeys(t.Key()); p != "" {
			names := &object{}
			names.set("pattern", p)
			o.set("propertyNames", names)
		}
		if t.Elem().Kind() == reflect.Interface {
			if err := decodableInterface(t.Elem()); err != nil {
				return nil, err
			}
		} else {
			elem, err := d.schema(t.Elem())
			if err != nil {
				return nil, err
			}
			o.set("additionalProperties", elem)
		}
	case reflect.Struct:
		return d.object(t)
	default:
		return nil, fmt.Errorf("type %s has no JSON Schema", t)
	}
	return o, nil
}

// integerKeys returns the pattern of the keys encoding/json decodes into map key type
// k when it reads them as integers (strconv.ParseInt or ParseUint of the key: decimal
// digits, with a sign for signed types), or "" when it takes any string. A key it
// cannot parse fails the whole decoding, so the schema must not accept it.
func integerKeys(k reflect.Type) string {
	if reflect.PointerTo(k).Implements(textUnmarshalerType) {
		return "" // decoded from text, as the type likes
	}
	switch k.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "^[+-]?[0-9]+$"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "^[0-9]+$"
	}
	return ""
}

// integerRange bounds an integer schema by what encoding/json decodes into t: no
// negative number into an unsigned type, nothing outside a sized type's range.
func integerRange(o *object, t reflect.Type) {
	switch t.Kind() {
	case reflect.Int8, reflect.Int16, reflect.Int32:
		bits := t.Bits()
		o.set("minimum", json.RawMessage(strconv.FormatInt(-1<<(bits-1), 10)))
		o.set("maximum", json.RawMessage(strconv.FormatInt(1<<(bits-1)-1, 10)))
	case reflect.Uint8, reflect.Uint16, reflect.Uint32:
		o.set("minimum", json.RawMessage("0"))
		o.set("maximum", json.RawMessage(strconv.FormatUint(1<<t.Bits()-1, 10)))
	case reflect.Uint, reflect.Uint64, reflect.Uintptr:
		o.set("minimum", json.RawMessage("0"))
	}
}

// object describes a struct: properties in field order, then required.
func (d *deriver) object(t reflect.Type) (*object, error) {
	if d.visiting[t] {
		return nil, errRecursive(t)
	}
	d.visiting[t] = true
	defer delete(d.visiting, t)

	props := &object{}
	var required []string
	if err := d.fields(t, props, &required); err != nil {
		return nil, err
	}
	o := &object{}
	o.set("type", "object")
	o.set("properties", props)
	if len(required) > 0 {
		o.set("required", required)
	}
	if d.strict {
		o.set("additionalProperties", false)
	}
	return o, nil
}

// fields adds t's JSON fields to props, as encoding/json decodes them (see jsonFields).
func (d *deriver) fields(t reflect.Type, props *object, required *[]string) error {
	for _, jf := range jsonFields(t) {
		f, ft, name, opts, t := jf.f, jf.ft, jf.name, jf.opts, jf.owner
		if jf.hiddenPtr == f.Type {
			return fmt.Errorf("%s.%s: embedded pointer to unexported struct %s, which encoding/json cannot set (embed the struct, or export it)",
				t, f.Name, jf.hiddenPtr)
		}
		if jf.hiddenPtr != nil {
			return fmt.Errorf("%s.%s: reached through embedded pointer to unexported struct %s, which encoding/json cannot set (embed the struct, or export it)",
				t, f.Name, jf.hiddenPtr)
		}
		s, err := d.schema(f.Type)
		if err != nil {
			return fmt.Errorf("%s.%s: %w", t, f.Name, err)
		}
		v := valueKind{t: ft, text: s.get("type") == "string" && ft.Kind() != reflect.String}
		if hasOption(opts, "string") && quotable(f.Type) {
			// encoding/json reads such a field from a JSON string holding its value.
			s = quotedSchema(ft)
			v.quoted = true
		}
		tags, err := parseFieldTags(f, v)
		if err != nil {
			return fmt.Errorf("%s.%s: %w", t, f.Name, err)
		}
		props.set(name, tags.apply(s))
		optional := f.Type.Kind() == reflect.Pointer || hasOption(opts, "omitempty") || hasOption(opts, "omitzero")
		if tags.required || (!optional && !tags.optional) {
			*required = append(*required, name)
		}
	}
	return nil
}

// decodableInterface refuses an interface type with methods: encoding/json decodes a
// JSON value only into an empty interface (any) and fails on every other.
func decodableInterface(t reflect.Type) error {
	if t.NumMethod() > 0 {
		return fmt.Errorf("interface type %s has methods: encoding/json cannot decode into it (use any, json.RawMessage or a concrete type)", t)
	}
	return nil
}

// jsonField is one struct field encoding/json decodes into.
type jsonField struct {
	f          reflect.StructField
	owner      reflect.Type // the struct declaring it, for messages
	ft         reflect.Type // f.Type without pointers
	name, opts string
	tagged     bool // the name comes from the json tag
	depth      int  // how many embedded structs down
	// hiddenPtr is the embedded pointer to an unexported struct the field is reached
	// through, if any: encoding/json cannot allocate it, so it cannot set the field.
	hiddenPtr reflect.Type
}

// jsonFields lists the fields encoding/json decodes into a value of struct type t, in
// its order: embedded structs without a tag name are inlined where they are declared;
// of several fields with one JSON name the shallowest wins, then the one named by its
// tag, and a name left ambiguous is dropped (encoding/json ignores it too).
func jsonFields(t reflect.Type) []jsonField {
	var all []jsonField
	onPath := map[reflect.Type]bool{}
	var walk func(t reflect.Type, depth int, hiddenPtr reflect.Type)
	walk = func(t reflect.Type, depth int, hiddenPtr reflect.Type) {
		if onPath[t] {
			return
		}
		onPath[t] = true
		defer delete(onPath, t)
		for i := range t.NumField() {
			f := t.Field(i)
			ft := indirectType(f.Type)
			if f.Anonymous && !f.IsExported() && ft.Kind() != reflect.Struct || !f.Anonymous && !f.IsExported() {
				continue
			}
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			if !validTagName(name) {
				name = "" // encoding/json ignores the name and uses the field's
			}
			if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
				hp := hiddenPtr
				if hp == nil && !f.IsExported() && f.Type.Kind() == reflect.Pointer {
					hp = f.Type
				}
				walk(ft, depth+1, hp)
				continue
			}
			// An embedded unexported struct named by its tag is a field like any other;
			// through a pointer, encoding/json cannot allocate it.
			hp := hiddenPtr
			if hp == nil && !f.IsExported() && f.Type.Kind() == reflect.Pointer {
				hp = f.Type
			}
			jf := jsonField{f: f, owner: t, ft: ft, name: name, opts: opts, tagged: name != "", depth: depth, hiddenPtr: hp}
			if jf.name == "" {
				jf.name = f.Name
			}
			all = append(all, jf)
		}
	}
	walk(t, 0, nil)
	type rival struct{ depth, fields, tagged, tagIndex, index int }
	rivals := map[string]*rival{} // per name: its shallowest fields
	for i, jf := range all {
		r := rivals[jf.name]
		if r == nil || jf.depth < r.depth {
			r = &rival{depth: jf.depth, index: i}
			rivals[jf.name] = r
		} else if jf.depth > r.depth {
			continue
		}
		r.fields++
		if jf.tagged {
			r.tagged, r.tagIndex = r.tagged+1, i
		}
	}
	winner := func(name string) int {
		switch r := rivals[name]; {
		case r.fields == 1:
			return r.index
		case r.tagged == 1:
			return r.tagIndex
		}
		return -1 // ambiguous
	}
	out := all[:0:0]
	for i, jf := range all {
		if winner(jf.name) == i {
			out = append(out, jf)
		}
	}
	return out
}

// Patterns of the JSON strings encoding/json decodes into a field tagged
// `json:",string"`: the string holds the text of the field's value, which it parses
// with strconv (a leading zero is fine, a plus sign is not) or reads as a JSON string
// (whose escapes include \', as encoding/json reads them).
// It also takes "null" (leaving the field unset), which the schema, like everywhere
// else, does not offer; and it takes the hexadecimal and infinite floats and the digit
// separators (1_000) strconv.ParseFloat parses, which the schema leaves out to stay
// readable.
const (
	quotedBool   = `^(true|false)$`
	quotedInt    = `^-?[0-9]+$`
	quotedUint   = `^[0-9]+$`
	quotedFloat  = `^(-?[0-9]+\.?[0-9]*|-\.[0-9]+)([eE][+-]?[0-9]+)?$`
	quotedString = `^"([^"\\\x00-\x1f]|\\(["\\/'bfnrt]|u[0-9a-fA-F]{4}))*"$`
)

// quotedSchema is the schema of a quotable field of type t (dereferenced) tagged
// `json:",string"`: a string holding its value. A type that decodes itself from JSON
// decides what it accepts, and so does encoding/json for a json.Number (any text that
// starts like a number); one that decodes from text gets the text of a JSON string
// (encoding/json refuses anything else before the type sees it).
func quotedSchema(t reflect.Type) *object {
	o := &object{}
	o.set("type", "string")
	fromJSON, fromText := decodesItself(t)
	switch {
	case fromJSON || t == numberType:
		return o
	case fromText:
		o.set("pattern", quotedString)
		return o
	}
	switch t.Kind() {
	case reflect.Bool:
		o.set("pattern", quotedBool)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		o.set("pattern", quotedInt)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		o.set("pattern", quotedUint)
	case reflect.Float32, reflect.Float64:
		o.set("pattern", quotedFloat)
	case reflect.String:
		o.set("pattern", quotedString)
	}
	return o
}

// validTagName reports whether encoding/json takes name from a json tag as the field's
// JSON name: letters, digits and punctuation other than quotes and backslashes.
func validTagName(name string) bool {
	if name == "" {
		return false
	}
	for _, c := range name {
		if !strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c) && !unicode.IsLetter(c) && !unicode.IsDigit(c) {
			return false
		}
	}
	return true
}

// quotable reports whether the json tag's string option applies to a field of type t:
// encoding/json honours it for booleans, numbers and strings, and pointers to them
// (one unnamed pointer) only.
func quotable(t reflect.Type) bool {
	if t.Name() == "" && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.String:
		return true
	}
	return false
}

func hasOption(opts, want string) bool {
	for opts != "" {
		var o string
		o, opts, _ = strings.Cut(opts, ",")
		if o == want {
			return true
		}
	}
	return false
}

// errRecursive refuses a type whose schema would never end.
func errRecursive(t reflect.Type) error {
	return fmt.Errorf("recursive type %s needs an explicit schema (WithSchema)", t)
}
