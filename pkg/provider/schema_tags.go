package provider

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
)

// fieldTags is what a field's `jsonschema` and `description` tags add to its schema.
type fieldTags struct {
	required, optional bool
	title, description string
	enum               []json.RawMessage
	def                json.RawMessage
	// numbers and counts, in output order
	bounds  []bound
	format  string
	pattern string
}

type bound struct {
	key string
	val json.RawMessage
}

// Output order of the keyword constraints.
var boundKeys = []string{"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum",
	"minLength", "maxLength", "minItems", "maxItems"}

// valueKind is how a field's enum and default values are written in its schema.
type valueKind struct {
	t reflect.Type // the field's type, dereferenced
	// text: the field is a string in JSON although t is not (a type decoding from text,
	// such as netip.Addr or time.Time): values are strings as written.
	text bool
	// quoted: the field is tagged `json:",string"`: values are strings holding the
	// JSON value of type t (a JSON string when text is set).
	quoted bool
}

// literal encodes a tag value as a JSON value of the field's schema.
func (k valueKind) literal(v string) (json.RawMessage, error) {
	var raw json.RawMessage
	if k.text {
		var buf bytes.Buffer
		writeString(&buf, v)
		raw = buf.Bytes()
	} else {
		var err error
		if raw, err = literal(v, k.t); err != nil {
			return nil, err
		}
	}
	if !k.quoted {
		return raw, nil
	}
	if !k.text && isInteger(k.t) && strings.ContainsAny(string(raw), ".eE") {
		// encoding/json parses the string of a quoted integer with strconv.ParseInt.
		return nil, errors.New(`a field tagged json:",string" takes an integer as its digits`)
	}
	// A quoted text-decoding field's string holds a JSON string too: "\"debug\"".
	var buf bytes.Buffer
	writeString(&buf, string(raw))
	return buf.Bytes(), nil
}

func parseFieldTags(f reflect.StructField, ft valueKind) (fieldTags, error) {
	tags := fieldTags{description: f.Tag.Get("description")}
	found := map[string]json.RawMessage{}
	for _, item := range splitTag(f.Tag.Get("jsonschema")) {
		key, val, hasVal := strings.Cut(item, "=")
		key = strings.TrimSpace(key)
		if flag := key == "" || key == "required" || key == "optional"; flag == hasVal {
			if flag {
				return tags, fmt.Errorf("jsonschema tag key %q takes no value", key)
			}
			return tags, fmt.Errorf("jsonschema tag key %q needs a value", key)
		}
		var err error
		switch key {
		case "":
			continue
		case "required":
			tags.required = true
		case "optional":
			tags.optional = true
		case "description":
			tags.description = val
		case "title":
			tags.title = val
		case "format":
			tags.format = val
		case "pattern":
			// toolsd compiles patterns with Go's regexp (RE2) and refuses a tool whose
			// schema holds one it cannot compile, such as a lookahead.
			tags.pattern = val
			_, err = regexp.Compile(val)
		case "enum":
			for v := range strings.SplitSeq(val, "|") {
				raw, err := ft.literal(v)
				if err != nil {
					return tags, fmt.Errorf("enum value %q: %w", v, err)
				}
				tags.enum = append(tags.enum, raw)
			}
		case "default":
			tags.def, err = ft.literal(val)
		case "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum":
			found[key], err = number(val, false)
		case "minLength", "maxLength", "minItems", "maxItems":
			found[key], err = number(val, true)
		default:
			return tags, fmt.Errorf("unknown jsonschema tag key %q", key)
		}
		if err != nil {
			return tags, fmt.Errorf("jsonschema %s: %w", key, err)
		}
	}
	if tags.required && tags.optional {
		return tags, errors.New("a field cannot be both required and optional")
	}
	for _, k := range boundKeys {
		if v, ok := found[k]; ok {
			tags.bounds = append(tags.bounds, bound{k, v})
		}
	}
	return tags, nil
}

// apply merges the tags into a field's schema in the fixed key order.
func (t fieldTags) apply(s *object) *object {
	o := &object{}
	if v, ok := s.lookup("type"); ok {
		o.set("type", v)
	}
	if v, ok := s.lookup("format"); ok {
		o.set("format", v)
	} else if t.format != "" {
		o.set("format", t.format)
	}
	if t.title != "" {
		o.set("title", t.title)
	}
	if t.description != "" {
		o.set("description", t.description)
	}
	if len(t.enum) > 0 {
		o.set("enum", t.enum)
	}
	if t.def != nil {
		o.set("default", t.def)
	}
	for _, b := range t.bounds {
		o.set(b.key, b.val)
	}
	if t.pattern != "" {
		o.set("pattern", t.pattern)
	}
	for _, f := range s.fields {
		if f.key != "type" && f.key != "format" && !o.has(f.key) { // a tag's bound wins
			o.set(f.key, f.val)
		}
	}
	return o
}

// splitTag splits a jsonschema tag on commas; `\,` is a literal comma.
func splitTag(tag string) []string {
	if tag == "" {
		return nil
	}
	var (
		out []string
		cur strings.Builder
	)
	for i := 0; i < len(tag); i++ {
		switch {
		case tag[i] == '\\' && i+1 < len(tag) && tag[i+1] == ',':
			cur.WriteByte(',')
			i++
		case tag[i] == ',':
			out = append(out, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(tag[i])
		}
	}
	return append(out, cur.String())
}

// literal encodes a tag value as a JSON value of the field's type.
func literal(v string, t reflect.Type) (json.RawMessage, error) {
	switch t.Kind() {
	case reflect.String:
		if t == numberType {
			return number(v, false)
		}
		var buf bytes.Buffer
		writeString(&buf, v)
		return buf.Bytes(), nil
	case reflect.Bool:
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, err
		}
		return json.Marshal(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return integerLiteral(v, t)
	case reflect.Float32, reflect.Float64:
		return number(v, false)
	default:
		return nil, fmt.Errorf("values are supported only for string, boolean and number fields, not %s", t)
	}
}

// integerLiteral validates a JSON number literal as a value of integer type t: an
// integer in any JSON form (100, 1e2, 100.0, as JSON Schema counts them), within t's
// range. Any other would be a value the schema offers and decoding then refuses.
func integerLiteral(v string, t reflect.Type) (json.RawMessage, error) {
	raw, err := number(v, false)
	if err != nil {
		return nil, err
	}
	digits := string(raw)
	if strings.ContainsAny(digits, ".eE") {
		var ok bool
		if digits, ok = integral(digits); !ok {
			return nil, fmt.Errorf("%s is not an integer", raw)
		}
	}
	if isUnsigned(t) {
		_, err = strconv.ParseUint(digits, 10, t.Bits())
	} else {
		_, err = strconv.ParseInt(digits, 10, t.Bits())
	}
	if err != nil {
		return nil, fmt.Errorf("%s is out of range for %s", raw, t)
	}
	return raw, nil
}

func isInteger(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return true
	}
	return isUnsigned(t)
}

func isUnsigned(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return true
	}
	return false
}

// number validates a JSON number literal (a non-negative integer when count is set).
func number(v string, count bool) (json.RawMessage, error) {
	v = strings.TrimSpace(v)
	if count {
		if _, err := strconv.ParseUint(v, 10, 64); err != nil {
			return nil, fmt.Errorf("%q is not a non-negative integer", v)
		}
		return json.RawMessage(v), nil
	}
	var n json.Number
	if err := json.Unmarshal([]byte(v), &n); err != nil || v == "" || v[0] == '"' {
		return nil, fmt.Errorf("%q is not a JSON number", v)
	}
	return json.RawMessage(v), nil
}
