package jsonx_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/toolsd/toolsd/internal/jsonx"
)

// benchDoc is a typical ~200-byte tool-argument object.
const benchDoc = `{"path":"/home/user/project/src/main.go","offset":120,"limit":400,` +
	`"pattern":"func (\\w+)\\(","case_sensitive":false,"context":{"before":2,"after":2},` +
	`"globs":["*.go","*.mod"],"note":"héllo wörld"}`

func BenchmarkDecode(b *testing.B) {
	doc := []byte(benchDoc)
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := jsonx.Decode(doc, jsonx.Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkValid(b *testing.B) {
	doc := []byte(benchDoc)
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		if err := jsonx.Valid(doc, jsonx.Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStdlibDecode is the encoding/json baseline (UseNumber) for the same document.
func BenchmarkStdlibDecode(b *testing.B) {
	doc := []byte(benchDoc)
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		dec := json.NewDecoder(bytes.NewReader(doc))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			b.Fatal(err)
		}
	}
}
