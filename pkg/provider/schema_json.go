package provider

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// object is a JSON object whose keys keep insertion order.
type object struct {
	fields []field
}

type field struct {
	key string
	val any // string, bool, json.RawMessage, []json.RawMessage, []string or *object
}

func (o *object) set(key string, val any) {
	for i := range o.fields {
		if o.fields[i].key == key {
			o.fields[i].val = val
			return
		}
	}
	o.fields = append(o.fields, field{key, val})
}

func (o *object) lookup(key string) (any, bool) {
	for _, f := range o.fields {
		if f.key == key {
			return f.val, true
		}
	}
	return nil, false
}

func (o *object) get(key string) any { v, _ := o.lookup(key); return v }

func (o *object) has(key string) bool { _, ok := o.lookup(key); return ok }

// write appends o as compact JSON.
func (o *object) write(buf *bytes.Buffer) {
	buf.WriteByte('{')
	for i, f := range o.fields {
		if i > 0 {
			buf.WriteByte(',')
		}
		writeString(buf, f.key)
		buf.WriteByte(':')
		writeValue(buf, f.val)
	}
	buf.WriteByte('}')
}

func writeValue(buf *bytes.Buffer, v any) {
	switch v := v.(type) {
	case string:
		writeString(buf, v)
	case bool:
		buf.WriteString(strconv.FormatBool(v))
	case json.RawMessage:
		buf.Write(v)
	case *object:
		v.write(buf)
	case []string:
		buf.WriteByte('[')
		for i, s := range v {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeString(buf, s)
		}
		buf.WriteByte(']')
	case []json.RawMessage:
		buf.WriteByte('[')
		for i, r := range v {
			if i > 0 {
				buf.WriteByte(',')
			}
			buf.Write(r)
		}
		buf.WriteByte(']')
	default:
		panic(fmt.Sprintf("provider: schema value of type %T", v))
	}
}

// writeString writes s as a JSON string without HTML escaping, so descriptions read
// naturally in prompts.
func writeString(buf *bytes.Buffer, s string) {
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // encoding a string cannot fail
	buf.Truncate(buf.Len() - 1)
}
