package provider

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

// JSON Schema names properties exactly; encoding/json matches an object key to the
// struct field named exactly like it or, when there is none, to one whose name differs
// in case only (Unicode simple folding: "LIMIT" and "Limit" for "limit", "\u212aey"
// with a Kelvin sign for "key"). toolsd's validation takes such a key for an
// additional property, which a schema without "additionalProperties": false allows
// unchecked, as do the hooks and policy that read the property by its name. Decoded
// as encoding/json alone would, it would then reach the property's field: over the
// value that was checked, or past the property's constraints. The SDK treats it as
// what it is to the schema, a property the arguments type does not have.

// caseOnlyKey is an object key that names a struct field in case only.
type caseOnlyKey struct {
	name  string // as decoded
	quote int    // offset of its opening quote in the arguments
}

// keyWalker reads a JSON document the way encoding/json decodes it into a Go type,
// noting the keys that would reach a field in case only.
type keyWalker struct {
	dec    *json.Decoder
	doc    string
	found  []caseOnlyKey
	fields map[reflect.Type]structFields // keyCheck.fields
}

// structFields are the JSON names of a struct type's fields, with each field's type.
type structFields struct {
	exact map[string]reflect.Type
	names []string
}

// keyCheck finds the keys of a call's arguments that name a field of its arguments
// type in case only.
type keyCheck struct {
	t reflect.Type
	// fields are those of each struct type reachable from t, listed once per tool.
	fields map[reflect.Type]structFields
	// names are the JSON names of the struct fields reachable from t; ascii: all are.
	names []string
	ascii bool
}

// newKeyCheck returns the check for arguments of type t.
func newKeyCheck(t reflect.Type) *keyCheck {
	k := &keyCheck{t: t, fields: map[reflect.Type]structFields{}, ascii: true}
	seen := map[reflect.Type]bool{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		if t = container(t); t == nil || seen[t] {
			return
		}
		seen[t] = true
		if t.Kind() != reflect.Struct {
			walk(t.Elem())
			return
		}
		fs := structFields{exact: make(map[string]reflect.Type)}
		for _, jf := range jsonFields(t) {
			fs.exact[jf.name] = jf.f.Type
			fs.names = append(fs.names, jf.name)
			k.names = append(k.names, jf.name)
			k.ascii = k.ascii && isASCII(jf.name)
			walk(jf.f.Type)
		}
		k.fields[t] = fs
	}
	walk(reflect.PointerTo(t)) // decoded through its address
	return k
}

// find returns the keys of doc that name a field in case only (see caseOnlyKeys),
// walking doc only when a cheap look at its text finds one possible.
func (k *keyCheck) find(doc string) []caseOnlyKey {
	if len(k.names) == 0 || k.ascii && !k.mayHold(doc) {
		return nil
	}
	return k.caseOnlyKeys(doc)
}

// mayHold reports whether doc may hold a key that names one of the (ASCII) names in
// case only. Such a key folds to the name letter by letter: in ASCII it differs from
// it in the case of its letters only, and a k or an s may also be the Kelvin sign
// (U+212A) or the long s (U+017F). Written without escapes (a \u escape of one of
// those or of an ASCII character, or \/ for a "/" a name may hold), it is the name's
// quoted text but for the case of its letters.
func (k *keyCheck) mayHold(doc string) bool {
	for _, s := range []string{`\/`, "\u212a", "\u017f"} {
		if strings.Contains(doc, s) {
			return true
		}
	}
	if foldingEscape(doc) {
		return true
	}
	// Every quoted text of a name's length that follows a '"' is compared with each name,
	// letter case folded, in place: the arguments are neither copied nor lowered.
	for i := 0; ; {
		j := strings.IndexByte(doc[i:], '"')
		if j < 0 {
			return false
		}
		at := i + j + 1
		for _, name := range k.names {
			end := at + len(name)
			if end < len(doc) && doc[end] == '"' && foldsTo(doc[at:end], name) {
				return true
			}
		}
		i = at
	}
}

// foldingEscape reports whether doc holds a \u escape that may stand for a character
// of a name: an ASCII one, the Kelvin sign or the long s (or one it cannot read). Text
// whose other escapes write accented letters or other scripts (as Python's json.dumps
// writes all non-ASCII text) does not need the walk for them.
func foldingEscape(doc string) bool {
	for i := 0; ; {
		j := strings.Index(doc[i:], `\u`)
		if j < 0 {
			return false
		}
		at := i + j + 2
		if at+4 > len(doc) {
			return true
		}
		r, err := strconv.ParseUint(doc[at:at+4], 16, 16)
		if err != nil || r < utf8.RuneSelf || r == 0x212a || r == 0x017f {
			return true
		}
		i = at
	}
}

// foldsTo reports whether s is name (ASCII, of the same length) with the case of some
// of its letters changed.
func foldsTo(s, name string) bool {
	if s == name {
		return false
	}
	for i := range len(s) {
		a, b := s[i], name[i]
		if a == b {
			continue
		}
		if 'A' <= a && a <= 'Z' {
			a += 'a' - 'A'
		}
		if 'A' <= b && b <= 'Z' {
			b += 'a' - 'A'
		}
		if a != b {
			return false
		}
	}
	return true
}

// isASCII reports whether s is ASCII.
func isASCII(s string) bool {
	for i := range len(s) {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// caseOnlyKeys returns the keys of doc that encoding/json, decoding doc into a value of
// type k.t, would match to a struct field whose name differs from the key in case only,
// in their order in doc. The rest of a doc that is not JSON is not looked at: decoding
// it fails.
func (k *keyCheck) caseOnlyKeys(doc string) []caseOnlyKey {
	dec := json.NewDecoder(strings.NewReader(doc))
	dec.UseNumber() // a number too large for a float64 is still a token
	w := keyWalker{dec: dec, doc: doc, fields: k.fields}
	_ = w.value(reflect.PointerTo(k.t)) // decoded through its address
	return w.found
}

// hideKeys returns doc with each of keys hidden from encoding/json's field matching:
// its name is prefixed with a NUL character (written \u0000), which no field name
// holds, so that the key is unknown, as the schema has it, and ignored.
func hideKeys(doc string, keys []caseOnlyKey) string {
	var b strings.Builder
	b.Grow(len(doc) + 6*len(keys))
	kept := 0
	for _, k := range keys {
		b.WriteString(doc[kept : k.quote+1])
		b.WriteString(`\u0000`)
		kept = k.quote + 1
	}
	b.WriteString(doc[kept:])
	return b.String()
}

// value reads one value of type t (nil: not looked into).
func (w *keyWalker) value(t reflect.Type) error {
	tok, err := w.dec.Token()
	if err != nil {
		return err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	t = container(t)
	if d == '[' {
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for w.dec.More() {
			if err := w.value(elem); err != nil {
				return err
			}
		}
	} else if err := w.members(t); err != nil {
		return err
	}
	_, err = w.dec.Token() // the closing delimiter
	return err
}

// members reads an object's members, as decoded into a value of type t.
func (w *keyWalker) members(t reflect.Type) error {
	for w.dec.More() {
		before := int(w.dec.InputOffset()) // only space and a comma lie before the key
		tok, err := w.dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		ft, caseOnly := w.field(t, key)
		if caseOnly {
			w.found = append(w.found, caseOnlyKey{name: key, quote: before + strings.IndexByte(w.doc[before:], '"')})
		}
		if err := w.value(ft); err != nil {
			return err
		}
	}
	return nil
}

// field returns the type a member named key decodes into in a value of type t (nil:
// not looked into), and whether key names one of t's fields in case only.
func (w *keyWalker) field(t reflect.Type, key string) (reflect.Type, bool) {
	switch {
	case t == nil:
		return nil, false
	case t.Kind() == reflect.Map:
		return t.Elem(), false
	case t.Kind() != reflect.Struct:
		return nil, false
	}
	fs := w.fields[t]
	if ft, ok := fs.exact[key]; ok {
		return ft, false
	}
	for _, name := range fs.names {
		if strings.EqualFold(name, key) {
			return nil, true
		}
	}
	return nil, false
}

// container returns t without its pointers when encoding/json decodes an object or
// array into it member by member, nil otherwise (a type that decodes itself, any).
func container(t reflect.Type) reflect.Type {
	if t == nil {
		return nil
	}
	if fromJSON, fromText := decodesItself(t); fromJSON || fromText {
		return nil
	}
	t = indirectType(t)
	switch t.Kind() {
	case reflect.Struct, reflect.Map, reflect.Slice, reflect.Array:
		return t
	}
	return nil
}
