package provider

import (
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

var (
	jsonMarshalerType = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

// unencodable returns why encoding/json fails to encode every value of type t, or ""
// when some value of t encodes: a channel, a function or a complex number, a map whose
// keys it cannot write, and a struct or a non-empty array holding one where it is
// always written. Behind a pointer, a slice, a map or an interface the value may be
// nil or empty, and a field tagged omitzero may be left out (omitempty never leaves out
// a channel or a function); a type that encodes itself decides.
func unencodable(t reflect.Type) string {
	return (&encodability{seen: map[reflect.Type]bool{}}).check(t)
}

type encodability struct{ seen map[reflect.Type]bool }

func (e *encodability) check(t reflect.Type) string {
	if t.Implements(jsonMarshalerType) || t.Implements(textMarshalerType) ||
		reflect.PointerTo(t).Implements(jsonMarshalerType) || reflect.PointerTo(t).Implements(textMarshalerType) {
		return ""
	}
	switch t.Kind() {
	case reflect.Chan, reflect.Func, reflect.Complex64, reflect.Complex128, reflect.UnsafePointer:
		return fmt.Sprintf("%s cannot be JSON-encoded", t)
	case reflect.Map:
		switch t.Key().Kind() {
		case reflect.String, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
			return ""
		}
		if t.Key().Implements(textMarshalerType) {
			return ""
		}
		return fmt.Sprintf("%s cannot be JSON-encoded (its keys cannot)", t)
	case reflect.Array:
		if t.Len() == 0 {
			return ""
		}
		return e.check(t.Elem())
	case reflect.Struct:
		if e.seen[t] {
			return ""
		}
		e.seen[t] = true
		defer delete(e.seen, t)
		for _, jf := range jsonFields(t) {
			if jf.throughPointer || hasOption(jf.opts, "omitzero") {
				continue // may be left out
			}
			if why := e.check(jf.f.Type); why != "" {
				if inner, ok := strings.CutPrefix(why, "field "); ok {
					return fmt.Sprintf("field %s.%s", jf.f.Name, inner)
				}
				return fmt.Sprintf("field %s: %s", jf.f.Name, why)
			}
		}
	}
	return ""
}
