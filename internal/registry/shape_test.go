package registry

import (
	"math/big"
	"strconv"
	"strings"
	"testing"

	"github.com/toolsd/toolsd/internal/jsonx"
)

func compileForTest(t testing.TB, raw string) *schema {
	t.Helper()
	s, err := compileSchema("t", []byte(raw), parametersSchema, false, schemaLimits{1 << 16, 64})
	if err != nil {
		t.Fatalf("compileSchema(%s) = %v", raw, err)
	}
	return s
}

func TestShapeEligibility(t *testing.T) {
	for raw, want := range map[string]bool{
		`{"type":"object"}`: true,
		`{"type":"object","properties":{"a":{"type":"string","description":"x","title":"A","default":"d","examples":["e"]}},"required":["a"],"additionalProperties":false}`:                                    true,
		`{"type":"object","properties":{"a":true,"b":{}},"additionalProperties":{"type":["integer","null"]}}`:                                                                                                  true,
		`{"type":"object","properties":{"a":{"type":"array","items":{"type":"object","properties":{"b":{"type":"boolean"}}}}}}`:                                                                                true,
		`{"type":"object","properties":{"m":{"enum":["x","y"]},"s":{"type":"string","minLength":1,"maxLength":9},"n":{"type":"integer","minimum":0,"exclusiveMaximum":10}}}`:                                   true,
		`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object"}`:                                                                                                                                true,
		`{"$schema":"http://json-schema.org/draft-04/schema#","type":"object"}`:                                                                                                                                false,
		`{"type":"object","properties":{"a":false}}`:                                                                                                                                                           true,
		`{"type":"object","properties":{"a":{"type":"array","items":false},"b":{"not":true,"if":false,"else":{"oneOf":[false,true]}}}}`:                                                                        true,
		`{"type":"object","properties":{"a":{"type":"string","pattern":"^a"}}}`:                                                                                                                                true,
		`{"type":"object","properties":{"a":{"prefixItems":[{"type":"string"},true],"items":{"type":"integer"}}}}`:                                                                                             true,
		`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"a":{"prefixItems":[{"type":"string"}]}}}`:                                                                         false,
		`{"type":"object","properties":{"a":{"type":"number","multipleOf":0.01},"b":{"multipleOf":5}}}`:                                                                                                        true,
		`{"type":"object","patternProperties":{"^a":{"type":"string"}}}`:                                                                                                                                       true,
		`{"type":"object","properties":{"a":{"type":"string","format":"email"},"b":{"type":"string","format":"date-time","contentEncoding":"base64"}}}`:                                                        true,
		`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"a":{"format":"ipv4"}}}`:                                                                                      true,
		`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"a":{"type":"string","format":"email"}}}`:                                                                          false,
		`{"type":"object","properties":{"a":{"enum":["x",1,2.5,true,null]},"b":{"const":"x"},"c":{"const":null},"d":{"enum":[]}}}`:                                                                             true,
		`{"type":"object","minProperties":1,"maxProperties":3,"additionalProperties":{"type":"object","maxProperties":0}}`:                                                                                     true,
		`{"type":"object","properties":{"a":{"type":"array","uniqueItems":true,"items":{"type":"string"}},"b":{"uniqueItems":false}}}`:                                                                         true,
		`{"type":"object","properties":{"a":{"enum":["x",[1]]}}}`:                                                                                                                                              false,
		`{"type":"object","properties":{"a":{"const":{}}}}`:                                                                                                                                                    false,
		`{"type":"object","properties":{"a":{"type":"number","minimum":0.5,"exclusiveMaximum":1.5e1,"maximum":-2E-3}}}`:                                                                                        true,
		`{"type":"object","properties":{"a":{"$ref":"#/$defs/x"}},"$defs":{"x":{"type":"string"}}}`:                                                                                                            true,
		`{"type":"object","properties":{"a":{"$ref":"#/$defs/n"}},"$defs":{"n":{"type":"object","properties":{"next":{"$ref":"#/$defs/n"},"up":{"$ref":"#"}}}}}`:                                               true,
		`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"a":{"$ref":"#/definitions/x","pattern":"^a"}},"definitions":{"x":{}}}`:                                            true,
		`{"type":"object","properties":{"a":{"$ref":"#/$defs/x","not":{}}},"$defs":{"x":{}}}`:                                                                                                                  true,
		`{"type":"object","not":{"required":["a"]},"properties":{"b":{"not":{"not":{"type":"string"}}}}}`:                                                                                                      true,
		`{"type":"object","properties":{"a":{"not":{"unevaluatedProperties":false}}}}`:                                                                                                                         false,
		`{"type":"object","allOf":[{"properties":{"a":{"type":"integer"}}},{"required":["a"]}]}`:                                                                                                               true,
		`{"type":"object","properties":{"a":{"$ref":"#/$defs/x"}},"$defs":{"x":{"$id":"x.json","type":"string"}}}`:                                                                                             false,
		`{"type":"object","properties":{"id":{"$ref":"#/$defs/x"},"$id":{"type":"string"}},"$defs":{"x":{"properties":{"$anchor":{}}}}}`:                                                                       true,
		`{"type":"object","properties":{"a":{"$ref":"#/properties/b"},"b":{"type":"string"}}}`:                                                                                                                 false,
		`{"type":"object","properties":{"a":{"$ref":"#/$defs/x%20y"}},"$defs":{"x y":{"type":"string"}}}`:                                                                                                      false,
		`{"type":"object","properties":{"a":{"anyOf":[{"type":"string"},{"type":"null"}]}}}`:                                                                                                                   true,
		`{"type":"object","oneOf":[{"required":["a"]}]}`:                                                                                                                                                       true,
		`{"type":"object","oneOf":[{"required":["a"]},{"unevaluatedProperties":false}]}`:                                                                                                                       false,
		`{"type":"object","patternProperties":{"^x":{"type":"string"},"y$":{"not":{"patternProperties":{"":false}}}},"properties":{"xy":{"type":"string"}},"additionalProperties":false}`:                      true,
		`{"type":"object","patternProperties":{"^x":{"type":"string","unevaluatedProperties":false}}}`:                                                                                                         false,
		`{"type":"object","if":{"required":["a"]},"then":{"required":["b"]},"else":{"maxProperties":0}}`:                                                                                                       true,
		`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","if":{"required":["a"]},"then":{"required":["b"]}}`:                                                                              true,
		`{"type":"object","if":{"required":["a"]},"then":{"unevaluatedProperties":false}}`:                                                                                                                     false,
		`{"type":"object","dependentRequired":{"a":["b","c"],"b":[]},"properties":{"o":{"not":{"dependentRequired":{"x":["y"]}}}}}`:                                                                            true,
		`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","dependentRequired":{"a":["b"]}}`:                                                                                                true,
		`{"type":"object","unevaluatedProperties":false}`:                                                                                                                                                      false,
		`{"type":"object","propertyNames":{"pattern":"^-?[0-9]+$"},"additionalProperties":{"type":"string"}}`:                                                                                                  true,
		`{"type":"object","properties":{"a":{"propertyNames":{"type":"string","minLength":1,"maxLength":3,"enum":["a","b"],"const":"a","title":"t"}},"b":{"propertyNames":false},"c":{"propertyNames":true}}}`: true,
		`{"type":"object","propertyNames":{"type":"integer"}}`:                                                                                                                                                 false,
		`{"type":"object","propertyNames":{"$ref":"#/$defs/k"},"$defs":{"k":{"type":"string"}}}`:                                                                                                               false,
		`{"type":"object","propertyNames":{"anyOf":[{"pattern":"^a"}]}}`:                                                                                                                                       false,
		`{"type":"object","propertyNames":{"format":"ipv4"}}`:                                                                                                                                                  false,
		`{"type":"object","x-order":["a"]}`: false,
		`{"type":"object","properties":{"a":{"$schema":"https://json-schema.org/draft/2020-12/schema"}}}`: false,
	} {
		if got := compileForTest(t, raw).shape != nil; got != want {
			t.Errorf("shape of %s: got %v, want %v", raw, got, want)
		}
	}
	// Every dependentRequired name is looked up in every object: past 16, the library
	// decides, priced.
	dependents := func(n int) string {
		var b strings.Builder
		for i := range n {
			b.WriteString(`,"k` + strconv.Itoa(i) + `":[]`)
		}
		return `{"type":"object","dependentRequired":{` + b.String()[1:] + `}}`
	}
	for n, want := range map[int]bool{maxShapeDependents: true, maxShapeDependents + 1: false} {
		if got := compileForTest(t, dependents(n)).shape != nil; got != want {
			t.Errorf("shape of a dependentRequired of %d names: got %v, want %v", n, got, want)
		}
	}
}

// TestShapeCheck pins what the shortcut accepts. Whatever it accepts the library must
// accept too; whatever it rejects is decided by the library (checked in both cases).
func TestShapeCheck(t *testing.T) {
	const s1 = `{"type":"object","properties":{` +
		`"s":{"type":"string","minLength":2,"maxLength":3},` +
		`"n":{"type":"integer","minimum":-1,"exclusiveMaximum":10},` +
		`"m":{"enum":["text","binary"]},` +
		`"a":{"type":"array","items":{"type":["string","null"]},"minItems":1,"maxItems":2},` +
		`"o":{"type":"object","additionalProperties":{"type":"boolean"}}},` +
		`"required":["s"],"additionalProperties":false}`
	tests := []struct {
		doc        string
		shape, lib bool // what the shape and the library say
	}{
		{`{"s":"ab"}`, true, true},
		{`{"s":"日本語"}`, true, true}, // three code points, nine bytes
		{`{"s":"é"}`, false, false}, // one code point, two bytes
		{`{"s":"ab","n":-1,"m":"text","a":["x",null],"o":{"k":true}}`, true, true},
		{`{"s":"ab","n":9}`, true, true},
		{`{"s":"a"}`, false, false},
		{`{"s":"abcd"}`, false, false},
		{`{}`, false, false},
		{`{"s":"ab","x":1}`, false, false},
		{`{"s":"ab","n":10}`, false, false},
		{`{"s":"ab","n":-2}`, false, false},
		{`{"s":"ab","n":1.5}`, false, false},
		{`{"s":"ab","n":1.0}`, false, true}, // an integer to the library, left to it
		{`{"s":"ab","n":2e0}`, false, true}, // likewise
		{`{"s":"ab","n":99999999999999999999}`, false, false},
		{`{"s":"ab","m":"other"}`, false, false},
		{`{"s":"ab","m":1}`, false, false},
		{`{"s":"ab","a":["x",1]}`, false, false},
		{`{"s":"ab","a":[]}`, false, false},
		{`{"s":"ab","a":["x","y","z"]}`, false, false},
		{`{"s":"ab","o":{"k":"yes"}}`, false, false},
		{`[]`, false, false},
	}
	sch := compileForTest(t, s1)
	if sch.shape == nil {
		t.Fatal("no shape for the test schema")
	}
	for _, tc := range tests {
		v, err := jsonx.Decode([]byte(tc.doc), jsonx.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if got := sch.shape.check(v); got != tc.shape {
			t.Errorf("shape.check(%s) = %v, want %v", tc.doc, got, tc.shape)
		}
		if got := sch.lib.Validate(v) == nil; got != tc.lib {
			t.Errorf("library on %s: valid = %v, want %v", tc.doc, got, tc.lib)
		}
		if got := validate(sch, []byte(tc.doc), jsonx.Limits{}, "arguments") == nil; got != tc.lib {
			t.Errorf("validate(%s): valid = %v, want the library's %v", tc.doc, got, tc.lib)
		}
	}
}

// FuzzShapeAgreesWithLibrary holds the shortcut to its one promise: a document the
// shape accepts is valid for the library. Seeds are schemas with shapes; the fuzzer
// mutates both schema and document.
func FuzzShapeAgreesWithLibrary(f *testing.F) {
	for _, seed := range [][2]string{
		{`{"type":"object","properties":{"a":{"type":"string","minLength":1}},"required":["a"],"additionalProperties":false}`, `{"a":"x"}`},
		{`{"type":"object","properties":{"n":{"type":"integer","minimum":0,"maximum":5}}}`, `{"n":3}`},
		{`{"type":"object","properties":{"n":{"type":["number","null"],"exclusiveMinimum":-3}}}`, `{"n":null}`},
		{`{"type":"object","properties":{"e":{"enum":["a","b"]},"l":{"type":"array","items":{"type":"boolean"},"maxItems":3}}}`, `{"e":"a","l":[true]}`},
		{`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","additionalProperties":{"type":"string","maxLength":2}}`, `{"k":"ab"}`},
		{`{"type":"object","properties":{"o":{"type":"object","properties":{"p":{"type":"integer"}},"required":["p"]}}}`, `{"o":{"p":-0}}`},
		{`{"type":"object","properties":{"w":{"type":"string","format":"date-time"},"b":{"format":"email","contentEncoding":"base64"}}}`, `{"w":"x","b":1}`},
		{`{"type":"object","properties":{"t":{"type":"number","minimum":0,"maximum":1.5},"p":{"exclusiveMinimum":-0.25,"exclusiveMaximum":1e2}}}`, `{"t":0.7,"p":99.99}`},
		{`{"type":"object","properties":{"l":{"type":"integer","enum":[1,2,3]},"m":{"enum":["a",1.5,false,null]},"c":{"const":10}}}`, `{"l":2,"m":15e-1,"c":1e1}`},
		{`{"type":"object","minProperties":1,"maxProperties":2,"additionalProperties":{"type":"object","maxProperties":0}}`, `{"a":{}}`},
		{`{"type":"object","properties":{"t":{"$ref":"#/$defs/node"}},"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["v"]}}}`, `{"t":{"v":1,"kids":[{"v":2}]}}`},
		{`{"type":"object","allOf":[{"$ref":"#/definitions/a"}],"definitions":{"a":{"properties":{"x":{"enum":[1,2]}}}}}`, `{"x":2}`},
		{`{"type":"object","properties":{"u":{"type":"array","uniqueItems":true}}}`, `{"u":[1,"1",[1],{"a":1},1.5,true,null]}`},
		{`{"type":"object","properties":{"p":{"type":"string","pattern":"^[a-z]+(-[a-z]+)*$"},"q":{"pattern":"\\d{2}"}}}`, `{"p":"ab-cd","q":"x12"}`},
		{`{"type":"object","properties":{"p":{"type":"number","multipleOf":0.01,"minimum":0},"k":{"multipleOf":5}}}`, `{"p":12.34,"k":-15}`},
		{`{"type":"object","properties":{"o":{"anyOf":[{"type":"string","maxLength":3},{"type":"integer","minimum":5},{"type":"null"}]}}}`, `{"o":6}`},
		{`{"type":"object","properties":{"a":{"type":"array","prefixItems":[{"type":"string"},{"enum":[1,2]}],"items":false}}}`, `{"a":["x",2]}`},
		{`{"type":"object","propertyNames":{"pattern":"^-?[0-9]+$"},"additionalProperties":{"type":"string"}}`, `{"1":"a","-20":"b"}`},
		{`{"type":"object","properties":{"o":{"oneOf":[{"type":"integer"},{"type":"number","minimum":1.5},{"type":"null"}]}},"oneOf":[{"required":["o"]},{"maxProperties":0}]}`, `{"o":1.0}`},
		{`{"type":"object","properties":{"c":{"if":{"type":"integer"},"then":{"minimum":0},"else":{"type":"string"}},"t":{"then":{"type":"null"}}},"if":{"required":["c"]},"then":{"required":["t"]}}`, `{"c":1.0,"t":1}`},
		{`{"type":"object","properties":{"a":false,"b":{"type":"array","prefixItems":[true],"items":false},"c":{"anyOf":[false,{"type":"null"}]},"d":{"not":false}},"additionalProperties":{"$ref":"#/$defs/no"},"$defs":{"no":false}}`, `{"b":[1],"c":null,"d":1}`},
		{`{"type":"object","dependentRequired":{"a":["b"],"b":["c","a"]},"properties":{"o":{"type":"array","items":{"dependentRequired":{"x":["y"]}}}}}`, `{"a":1,"b":2,"c":3,"o":[{"x":1,"y":2},{"y":1},1]}`},
		{`{"type":"object","properties":{"id":{"type":"string"}},"patternProperties":{"^x-":{"type":"integer"},"-n$":{"minimum":0}},"additionalProperties":false}`, `{"id":"a","x-a":1,"x-a-n":2,"b-n":0}`},
		{`{"type":"object","properties":{"n":{"not":{"type":"string"}},"m":{"not":{"not":{"type":"integer","minimum":0}}}},"not":{"required":["x"]}}`, `{"n":1,"m":2.0}`},
		{`{"type":"object","properties":{"m":{"propertyNames":{"type":"string","maxLength":2,"enum":["a","bc",1]}},"e":{"propertyNames":false}}}`, `{"m":{"bc":1},"e":{}}`},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, rawSchema, doc string) {
		sch, v, ok := fuzzedShape(rawSchema, doc)
		if !ok {
			return
		}
		if sch.shape.check(v) {
			if err := sch.lib.Validate(v); err != nil {
				t.Fatalf("shape accepts %s under %s, the library does not: %v", doc, rawSchema, err)
			}
		}
	})
}

// compareNumbers orders every pair of literals as the library's big rationals do.
func TestCompareNumbersIsExact(t *testing.T) {
	lits := []string{"0", "-0", "0.0", "0e5", "1", "1.0", "10e-1", "0.1e1", "-1", "-1.00", "1.5", "15e-1",
		"1.50001", "-1.49999", "100", "1e2", "99.9999", "1E+2", "0.001", "1e-3", "0.00100", "-0.001",
		"9223372036854775807", "9223372036854775808", "-9223372036854775809", "123456789012345678931234567890",
		"1.23456789012345678901234567893e29", "1e400", "-1e-400", "0.5", "5e-1", "50e-2"}
	for _, a := range lits {
		for _, b := range lits {
			ra, _ := new(big.Rat).SetString(a)
			rb, _ := new(big.Rat).SetString(b)
			if got, want := compareNumbers(readNumber(a), readNumber(b)), ra.Cmp(rb); got != want {
				t.Errorf("compareNumbers(%s, %s) = %d, want %d", a, b, got, want)
			}
		}
		r, _ := new(big.Rat).SetString(a)
		if got, want := readNumber(a).integer(), r.IsInt(); got != want {
			t.Errorf("readNumber(%s).integer() = %v, want %v", a, got, want)
		}
	}
}

// A valid document is checked without allocating: an enum or const of numbers finds a
// number in one lookup, and property names are checked against propertyNames as strings.
func TestShapeCheckDoesNotAllocate(t *testing.T) {
	for name, tc := range map[string]struct{ schema, doc string }{
		"enum and const of numbers": {`{"type":"object","properties":{"l":{"enum":[1,2.5,"x",null]},"c":{"const":-7e-3}}}`,
			`{"l":25e-1,"c":-0.0070}`},
		"not": {`{"type":"object","properties":{"a":{"type":"array","items":{"not":{"type":"string","minLength":2}}},"n":{"not":{"not":{"type":"integer"}}}}}`,
			`{"a":[1,"x",null,{"b":[]}],"n":1.0}`},
		"oneOf": {`{"type":"object","properties":{"a":{"type":"array","items":{"oneOf":[{"type":"string"},{"type":"integer"},{"not":{"type":["string","number"]}}]}}}}`,
			`{"a":[1,"x",[]]}`},
		"dependentRequired": {`{"type":"object","dependentRequired":{"a":["b","c"]},"properties":{"o":{"type":"array","items":{"dependentRequired":{"x":["y"]}}}}}`,
			`{"a":1,"b":2,"c":3,"o":[{"x":1,"y":2},{"y":1},{}]}`},
		"patternProperties": {`{"type":"object","patternProperties":{"^x-":{"type":"integer"},"[0-9]$":{"minimum":0}},"additionalProperties":{"type":"string"}}`,
			`{"x-a":1,"x-1":2,"b":"s"}`},
		"if": {`{"type":"object","properties":{"a":{"type":"array","items":{"if":{"type":"string"},"then":{"maxLength":2},"else":{"not":{"type":"null"}}}}}}`,
			`{"a":[1,"x",[]]}`},
		"property names": {`{"type":"object","properties":{"m":{"type":"object","propertyNames":{"pattern":"^-?[0-9]+$"},` +
			`"additionalProperties":{"type":"integer"}},"e":{"propertyNames":{"type":"string","enum":["a","b"],"maxLength":1}}}}`,
			`{"m":{"1":2,"-30":4,"500":6},"e":{"a":1,"b":2}}`},
	} {
		t.Run(name, func(t *testing.T) {
			sch := compileForTest(t, tc.schema)
			if sch.shape == nil {
				t.Fatal("no shape for the test schema")
			}
			v, err := jsonx.Decode([]byte(tc.doc), jsonx.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if !sch.shape.check(v) {
				t.Fatal("shape.check = false, want true")
			}
			if raceEnabled && sch.costs.patternSize > 0 {
				t.Skip("a pattern's matcher comes from a sync.Pool, which drops items under -race")
			}
			if allocs := testing.AllocsPerRun(100, func() { sch.shape.check(v) }); allocs != 0 {
				t.Errorf("shape.check allocated %v times, want 0", allocs)
			}
		})
	}
}

// A valid document under a schema with a shape costs a lookup per value whatever the
// enum's size, so it is not refused for the comparisons the library would make.
func TestShapeLargeEnumIsNotPriced(t *testing.T) {
	var enum strings.Builder
	for i := range 2000 {
		enum.WriteString(strconv.Itoa(i) + ",")
	}
	sch := compileForTest(t, `{"type":"object","properties":{"a":{"type":"array","items":{"enum":[`+enum.String()+`-1]}}}}`)
	if sch.shape == nil {
		t.Fatal("no shape for the test schema")
	}
	doc := `{"a":[` + strings.Repeat(`1999,`, 9999) + `-1]}`
	if err := validate(sch, []byte(doc), jsonx.Limits{}, "arguments"); err != nil {
		t.Errorf("validate(10,000 members of a 2,001-number enum) = %v, want nil", err)
	}
}

// A schema applying more than maxShapePlaces subschemas at a place has no shape: its
// documents are priced for that work before they are validated.
func TestShapePlacesAreBounded(t *testing.T) {
	refs := func(n int) string {
		return strings.TrimSuffix(strings.Repeat(`{"$ref":"#/$defs/e"},`, n), ",")
	}
	// Each member of allOf and the subschema it refers to apply: 1 + 2n in all.
	for n, want := range map[int]bool{1: true, (maxShapePlaces - 1) / 2: true, (maxShapePlaces + 1) / 2: false} {
		raw := `{"type":"object","$defs":{"e":{"minimum":-1}},"properties":{"a":{"allOf":[` + refs(n) + `]}}}`
		if got := compileForTest(t, raw).shape != nil; got != want {
			t.Errorf("shape of %d references at a place: got %v, want %v", n, got, want)
		}
	}
}

// multipleOf decides as the library's big rationals do, or says it cannot.
func TestMultipleOfIsExact(t *testing.T) {
	lits := []string{"0", "-0.0", "1", "3", "-3", "1.5", "0.5", "0.1", "0.01", "0.3", "0.7", "2.1", "1e2",
		"-1e-2", "7e-400", "1e400", "123456789", "0.000123", "9223372036854775807", "1234567890123456789"}
	for _, a := range lits {
		for _, b := range lits {
			m := readNumber(b)
			if m.sign() <= 0 {
				continue
			}
			ra, _ := new(big.Rat).SetString(a)
			rb, _ := new(big.Rat).SetString(b)
			want := ra.Quo(ra, rb).IsInt()
			got, decided := multipleOf(readNumber(a), m)
			if !decided {
				t.Errorf("multipleOf(%s, %s) undecided", a, b)
			} else if got != want {
				t.Errorf("multipleOf(%s, %s) = %v, want %v", a, b, got, want)
			}
			if got := isMultipleOf(a, m, b); got != want {
				t.Errorf("isMultipleOf(%s, %s) = %v, want %v", a, b, got, want)
			}
		}
	}
	if _, decided := multipleOf(readNumber("12345678901234567893"), readNumber("3")); decided {
		t.Error("multipleOf decided a 20-digit number, want undecided")
	}
	if !isMultipleOf("12345678901234567893", readNumber("3"), "3") {
		t.Error("isMultipleOf(12345678901234567893, 3) = false, want true")
	}
}

// fuzzedShape compiles a fuzzed schema and decodes a fuzzed document under it; ok is
// false when the schema does not compile or has no shape, or the document does not
// decode.
func fuzzedShape(rawSchema, doc string) (sch *schema, v any, ok bool) {
	sch, err := compileSchema("t", []byte(rawSchema), parametersSchema, false, schemaLimits{1 << 16, 64})
	if err != nil || sch.shape == nil {
		return nil, nil, false
	}
	v, err = jsonx.Decode([]byte(doc), jsonx.Limits{MaxDepth: 64})
	return sch, v, err == nil
}
