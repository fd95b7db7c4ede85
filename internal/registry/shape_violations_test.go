package registry

import (
	"errors"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolsd/toolsd/internal/jsonx"
)

// libraryViolations is what validate reported for a document before schemas with a
// shape found their own violations: the library's, through [violations]. nil: valid.
func libraryViolations(t testing.TB, sch *schema, doc string) []Violation {
	t.Helper()
	v, err := jsonx.Decode([]byte(doc), jsonx.Limits{MaxDepth: 64})
	if err != nil {
		t.Fatalf("jsonx.Decode(%d bytes) = %v", len(doc), err)
	}
	err = sch.lib.Validate(v)
	if err == nil {
		return nil
	}
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		t.Fatalf("library on %s: %v, want a validation error", doc, err)
	}
	return violations(verr, describe)
}

// validateViolations is what validate reports for doc now. nil: valid.
func validateViolations(t testing.TB, sch *schema, doc string) []Violation {
	t.Helper()
	err := validate(sch, []byte(doc), jsonx.Limits{MaxDepth: 64}, "arguments")
	if err == nil {
		return nil
	}
	var verr *ValidationError
	if !errors.As(err, &verr) {
		t.Fatalf("validate(%s) = %v, want a *ValidationError", doc, err)
	}
	if verr.Pointer != verr.Violations[0].Pointer || verr.Message != verr.Violations[0].Message {
		t.Errorf("validate(%s) = %q at %q, want its first violation %v", doc, verr.Message, verr.Pointer, verr.Violations[0])
	}
	return verr.Violations
}

// A document failing a schema with a shape is reported as the library reported it:
// the same pointers, in the same order, with the same words.
func TestShapeViolationsAreTheLibrarys(t *testing.T) {
	const s1 = `{"type":"object","$defs":{"nul":{"type":"null"}},"properties":{` +
		`"s":{"type":"string","minLength":2,"maxLength":3},` +
		`"n":{"type":"integer","minimum":-1,"exclusiveMaximum":10},` +
		`"x":{"type":["number","null"],"maximum":5,"exclusiveMinimum":-5},` +
		`"m":{"enum":["text","binary","text"]},` +
		`"a":{"type":"array","items":{"type":["string","null"]},"minItems":1,"maxItems":2},` +
		`"w":{"type":"array","minItems":3,"maxItems":1},` +
		`"o":{"type":"object","additionalProperties":{"type":"boolean"}},` +
		`"r":{"type":"object","required":["p","q","r"],"properties":{"p":{"type":"object","properties":{"deep":{"type":"integer"}}}}},` +
		`"l":{"type":"array","items":{"type":"array","items":{"type":"integer","minimum":0}}},` +
		`"f":{"type":"string","format":"date-time","contentEncoding":"base64","maxLength":3},` +
		`"t":{"type":"number","minimum":-0.5,"maximum":1.25,"exclusiveMinimum":-5e-1,"exclusiveMaximum":12.5E-1},` +
		`"h":{"type":"array","items":{"minimum":1e-3,"maximum":100000000000000000000.5}},` +
		`"e":{"type":"array","items":{"enum":["a",1,2.5,true,null]}},` +
		`"c":{"type":"array","items":{"const":1.5,"type":"number","maximum":1}},` +
		`"k":{"const":null},` +
		`"ao":{"type":"array","items":{"anyOf":[{"type":"string","maxLength":2},{"type":"integer","minimum":5},{"$ref":"#/$defs/nul"}]}},` +
		`"mo":{"type":"array","items":{"multipleOf":0.25,"maximum":10}},` +
		`"z":{"type":"array","prefixItems":[{"type":"string"},{"enum":[1,2]},true],"items":{"type":"boolean"},"maxItems":5},` +
		`"y":{"type":"array","prefixItems":[{"type":"integer"}]},` +
		`"g":{"type":"array","items":{"type":"string","pattern":"^[a-z]+(-[a-z]+)*$","maxLength":5}},` +
		`"j":{"type":"array","items":{"pattern":"\\d{2}|é","minLength":2}},` +
		`"q":{"type":"array","uniqueItems":true,"items":{"type":["string","number","array","object"]}},` +
		`"p":{"type":"array","items":{"type":"object","minProperties":2,"maxProperties":3,"required":["a"],"additionalProperties":{"type":"integer"}}}},` +
		`"required":["s"],"additionalProperties":false}`
	long := strings.Repeat("k", 150)
	s2 := `{"type":"object","additionalProperties":{"type":"object","additionalProperties":{"type":"array","items":{"type":"string"}}}}`
	const s3 = `{"type":"object","properties":{"t":{"$ref":"#/$defs/node"},"u":{"$ref":"#"},` +
		`"a":{"allOf":[{"type":"string","maxLength":3},{"$ref":"#/$defs/short"}],"minLength":2}},` +
		`"allOf":[{"properties":{"b":{"type":"integer"}}}],` +
		`"$defs":{"short":{"maxLength":4,"enum":["a","toolong"]},"node":{"type":"object","properties":{"v":{"type":"integer","minimum":0},` +
		`"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["v"],"additionalProperties":false}}}`
	const s4 = `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{` +
		`"a":{"$ref":"#/definitions/n","type":"string"},"b":{"type":"array","items":{"$ref":"#/definitions/s"}}},` +
		`"definitions":{"n":{"type":"number"},"s":{"$ref":"#/definitions/n"}}}`
	const s5 = `{"type":"object","propertyNames":{"pattern":"^[a-z]+$","maxLength":3},"required":["a","b"],"minProperties":4,"properties":{"a":{},"b":{},` +
		`"i":{"type":"object","propertyNames":{"pattern":"^-?[0-9]+$"},"additionalProperties":{"type":"string"}},` +
		`"e":{"type":"array","items":{"type":"object","propertyNames":{"type":"string","enum":["x","yy"],"minLength":2}}},` +
		`"c":{"type":"object","propertyNames":{"const":"k","type":["string","null"]},"additionalProperties":false},` +
		`"f":{"type":"object","propertyNames":false,"required":["z"]},` +
		`"t":{"type":"object","propertyNames":true}},"additionalProperties":false}`
	const s6 = `{"type":"object","not":{"required":["z"]},"properties":{` +
		`"n":{"type":"array","items":{"not":{"type":"string"}}},` +
		`"m":{"type":"object","not":{"required":["x"]},"properties":{"x":{"not":{"enum":[1,2]}}}},` +
		`"d":{"not":{"not":{"type":"integer","minimum":0}}},` +
		`"a":{"type":"array","items":{"anyOf":[{"not":{"type":"number"}},{"not":{"type":"string"}}],"not":{"anyOf":[{"type":"null"},{"not":{"type":"array","items":{"not":{"const":1}}}}]}}}}}`
	const s7 = `{"type":"object","oneOf":[{"required":["a"]},{"required":["b"]}],"properties":{` +
		`"o":{"type":"array","items":{"oneOf":[{"type":"integer"},{"type":"number","minimum":1.5},{"type":"string","maxLength":1},{"not":{"type":"array","items":{"type":"null"}}}]}},` +
		`"p":{"oneOf":[{"oneOf":[{"type":"null"},{"type":"boolean"}]},{"anyOf":[{"const":true},{"type":"array"}]}]}}}`
	const s8 = `{"type":"object","if":{"required":["a"]},"then":{"required":["b"]},"else":{"maxProperties":1},"properties":{` +
		`"c":{"type":"array","items":{"if":{"type":"integer"},"then":{"minimum":0},"else":{"type":"string","maxLength":1}}},` +
		`"d":{"type":"array","items":{"if":{"type":"string"},"then":{"if":{"maxLength":1},"else":{"pattern":"^a"}}}},` +
		`"e":{"then":{"type":"null"},"else":{"type":"null"}},"f":{"if":{"type":"null"}}}}`
	const s9 = `{"type":"object","properties":{"a":false,"b":{"type":"array","items":false},` +
		`"c":{"type":"array","prefixItems":[true,false],"items":false},"d":{"anyOf":[false,{"type":"null"}]},"e":{"not":false},` +
		`"f":{"if":false,"else":{"type":"string"}},"g":{"oneOf":[true,false,{"type":"null"}]}},"additionalProperties":{"$ref":"#/$defs/no"},"$defs":{"no":false}}`
	const s10 = `{"type":"object","dependentRequired":{"a":["b","c"],"b":[],"c":["a"],"":["a/b"]},"required":["r"],"properties":{` +
		`"o":{"type":"array","items":{"type":"object","dependentRequired":{"x":["y"]},"propertyNames":{"maxLength":1},"additionalProperties":{"type":"integer"}}},` +
		`"n":{"not":{"dependentRequired":{"p":["q"]}}}}}`
	const s11 = `{"type":"object","properties":{"id":{"type":"string"},"x-id":{"maxLength":1}},"patternProperties":{"^x-":{"type":"integer"},"[0-9]$":{"minimum":0},"":{"not":{"type":"null"}}},` +
		`"additionalProperties":false,"required":["id"],"propertyNames":{"maxLength":4},` +
		`"$defs":{"m":{"type":"object","patternProperties":{"^[a-z]+$":{"type":"string"}},"additionalProperties":{"type":"boolean"}}}}`
	const s12 = `{"type":"object","properties":{"m":{"$ref":"#/$defs/m"},"l":{"type":"array","items":{"$ref":"#/$defs/m"}}},` +
		`"$defs":{"m":{"type":"object","patternProperties":{"^[a-z]+$":{"type":"string"},"^a":{"maxLength":2}},"additionalProperties":{"type":"boolean"}}}}`
	tests := map[string]struct{ schema, doc string }{
		"patternProperties valid":     {s11, `{"id":"a","x-a":1,"x-1":2,"b1":3}`},
		"patternProperties":           {s11, `{"x-id":"ab","x-a":"s","x-1":-2,"b1":null,"k":1,"longer":2}`},
		"patternProperties nested":    {s12, `{"m":{"abc":"x","aaa":"y","A":1,"b":2},"l":[{"a":"abc","B":true},{"0":"s"}]}`},
		"dependentRequired valid":     {s10, `{"r":1,"a":1,"b":2,"c":3,"o":[{"x":1,"y":2},{"y":1}],"n":{"p":1}}`},
		"dependentRequired":           {s10, `{"a":1,"c":3,"":0,"o":[{"x":1},{"x":"s","zz":1},{}],"n":{"p":1,"q":2}}`},
		"false valid":                 {s9, `{"b":[],"c":[1],"d":null,"e":1,"f":"x","g":1}`},
		"false":                       {s9, `{"a":1,"b":[1,2],"c":[1,2,3],"d":1,"f":1,"g":null,"z":1}`},
		"if valid":                    {s8, `{"a":1,"b":2,"c":[1.0,"x",0],"d":["x","ab",1],"e":1,"f":2}`},
		"if":                          {s8, `{"a":1,"c":[-1,"xy",1.5,null],"d":["ba","b",[]]}`},
		"else":                        {s8, `{"x":1,"y":2}`},
		"oneOf valid":                 {s7, `{"a":1,"o":[1.0,"x",1.25,[1]],"p":null}`},
		"oneOf":                       {s7, `{"a":1,"b":2,"o":[2,"xy",[null],[],{}],"p":true}`},
		"oneOf none":                  {s7, `{"o":[[null,null],0.5],"p":1}`},
		"not valid":                   {s6, `{"n":[1,null,[]],"m":{"x":3},"d":1.0,"a":[[2,3],{}]}`},
		"not":                         {s6, `{"n":["a",1,"b"],"m":{"x":1},"d":-1,"a":[null,[1],[2,{"k":1}],"s"],"z":0}`},
		"property names valid":        {s5, `{"a":1,"b":2,"i":{"1":"x","-22":"y"},"e":[{"yy":1}],"c":{},"f":{},"t":{"Any":1}}`},
		"property names":              {s5, `{"a":1,"Long":3,"i":{"1":1,"x":"y","0x1":2},"e":[{"x":1,"yy":2,"zz":3},{}],"c":{"j":2},"f":{"q":1},"t":{"é":1}}`},
		"property names and sizes":    {s5, `{"t":{"A/~":1},"` + strings.Repeat("é", 200) + `":2}`},
		"valid":                       {s1, `{"s":"ab","n":9,"m":"text","a":["x",null],"o":{"k":true}}`},
		"integer written 1.0":         {s1, `{"s":"ab","n":1.0,"l":[[2e0,0.0,-0e5,1E+2]]}`},
		"not an object":               {s1, `[]`},
		"short":                       {s1, `{"s":"a"}`},
		"long in code points":         {s1, `{"s":"日本語x"}`},
		"missing":                     {s1, `{}`},
		"one extra":                   {s1, `{"s":"ab","a/b~c":1}`},
		"fraction":                    {s1, `{"s":"ab","n":1.5}`},
		"bounds":                      {s1, `{"s":"ab","n":-2,"x":5.5}`},
		"exclusive bounds":            {s1, `{"s":"ab","n":10,"x":-5}`},
		"exact bounds":                {s1, `{"s":"ab","n":9.9999999999999999999999,"x":-4.99999999999999999999}`},
		"huge numbers":                {s1, `{"s":"ab","n":99999999999999999999,"x":-99999999999999999999.5}`},
		"exponents":                   {s1, `{"s":"ab","n":1e1,"x":5e-1,"l":[[1e-400,-1e400,1.5e1]]}`},
		"number as string":            {s1, `{"s":"ab","x":"1"}`},
		"format is not asserted":      {s1, `{"s":"ab","f":"now"}`},
		"fractional bounds":           {s1, `{"s":"ab","t":1.25,"h":[0.001,1e-3,0.0009999,100000000000000000000.5,100000000000000000000.50001,-0,"x"]}`},
		"fractional exclusive bounds": {s1, `{"s":"ab","t":-0.5}`},
		"fractional bounds met":       {s1, `{"s":"ab","t":1.2499999,"h":[1,10e0,0.00100]}`},
		"format beside a length":      {s1, `{"s":"ab","f":"never"}`},
		"enum":                        {s1, `{"s":"ab","m":"other"}`},
		"enum of a number":            {s1, `{"s":"ab","m":1}`},
		"items":                       {s1, `{"s":"ab","a":["x",1]}`},
		"too few items":               {s1, `{"s":"ab","a":[]}`},
		"too many items":              {s1, `{"s":"ab","a":["x","y",3]}`},
		"min above max":               {s1, `{"s":"ab","w":[1,2]}`},
		"additional schema":           {s1, `{"s":"ab","o":{"k":"yes","j":null,"i":true}}`},
		"required list":               {s1, `{"s":"ab","r":{"q":1,"p":{"deep":"x"}}}`},
		"everything at once":          {s1, `{"n":"1","x":null,"m":"x","a":[1,2,3],"o":[],"r":{},"l":[[-1,"a",1],{},[-2]]}`},
		"more than 20 in order":       {s1, `{"s":"ab","l":[[` + strings.Repeat(`-1,`, 30) + `0],[-1],[-1],[-1],[-1],[-1],[-1],[-1],[-1],[-1],[-1],[-1,-1]]}`},
		"long pointers":               {s2, `{"` + long + `":{"` + long + `":[1,"a",2,true,{}]},"` + long + `x":{"a":[1],"b":[2,[]]}}`},
		"pointer cut in a character":  {s2, `{"` + strings.Repeat("é", 99) + `":{"` + long + `":[1,2]}}`},
		"refs valid":                  {s3, `{"t":{"v":1,"kids":[{"v":2,"kids":[]}]},"a":"ab","b":3,"u":{"a":"a"}}`},
		"refs recursive":              {s3, `{"t":{"v":-1,"kids":[{"kids":[{"v":"x","w":1}]}]}}`},
		"refs through allOf":          {s3, `{"a":"toolong","b":1.5,"u":{"a":"abcd"}}`},
		"definitions valid":           {s4, `{"a":1,"b":[1,2.5]}`},
		"definitions":                 {s4, `{"a":"x","b":[1,"y",true]}`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			sch := compileForTest(t, tc.schema)
			if sch.shape == nil {
				t.Fatal("no shape for the test schema")
			}
			want := libraryViolations(t, sch, tc.doc)
			got := validateViolations(t, sch, tc.doc)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("validate(%s) violations (-want +got):\n%s", tc.doc, diff)
			}
		})
	}
}

// The library lists additional properties in the order it meets them (a map's); they
// are now listed sorted, and a long list only as far as the message shows.
func TestShapeViolationsListAdditionalPropertiesSorted(t *testing.T) {
	sch := compileForTest(t, `{"type":"object","properties":{"a":{}},"additionalProperties":false}`)
	got := validateViolations(t, sch, `{"c":1,"a":1,"b":1,"d":{}}`)
	want := []Violation{{Message: "additional properties 'b', 'c', 'd' not allowed"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("violations (-want +got):\n%s", diff)
	}
	var b strings.Builder
	b.WriteString(`{"a":1`)
	for i := range 5000 {
		b.WriteString(`,"` + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + strconv.Itoa(i) + `":1`)
	}
	b.WriteString(`}`)
	got = validateViolations(t, sch, b.String())
	lib := libraryViolations(t, sch, b.String())
	if len(got) != 1 || len(got[0].Message) != len(lib[0].Message) || !strings.HasSuffix(got[0].Message, "…") {
		t.Errorf("violations of 5000 additional properties = %q, want one cut like the library's %q", got, lib)
	}
}

// A failing document costs about what a valid one does: its violations are found by
// the shape, stopping at those it reports, not built by the library one per failure.
// A megabyte of wrong-typed numbers made the library allocate ~262 MB (a 60-level
// nested array of them 724 MB).
func TestShapeViolationsAllocationIsBounded(t *testing.T) {
	var nestedSchema, nestedDoc strings.Builder
	for range 60 {
		nestedSchema.WriteString(`{"type":"array","items":`)
		nestedDoc.WriteString(`[`)
	}
	nestedSchema.WriteString(`{"type":"string"}` + strings.Repeat("}", 60))
	numbers := strings.Repeat(`1,`, 500_000) + `1`
	nestedDoc.WriteString(numbers + strings.Repeat("]", 60))
	tests := map[string]struct{ schema, doc string }{
		"array of strings": {
			`{"type":"object","properties":{"a":{"type":"array","items":{"type":"string"}}}}`,
			`{"a":[` + numbers + `]}`,
		},
		"nested items": {nestedSchema.String(), nestedDoc.String()},
		"false items": {
			`{"type":"array","prefixItems":[true],"items":false}`,
			`[` + numbers + `]`,
		},
		"dependentRequired": {
			`{"type":"array","items":{"type":"object","dependentRequired":{"a":["b","c"]}}}`,
			`[` + strings.Repeat(`{"a":1},`, 120_000) + `{"a":1}]`,
		},
		"patternProperties": {
			`{"type":"array","items":{"type":"object","patternProperties":{"^a":{"type":"string"},"b$":{"type":"integer"}},"additionalProperties":false}}`,
			`[` + strings.Repeat(`{"ab":1},`, 110_000) + `{"ab":1}]`,
		},
		"if": {
			`{"type":"array","items":{"if":{"type":"integer"},"then":{"type":"string"}}}`,
			`[` + numbers + `]`,
		},
		"oneOf": {
			`{"type":"array","items":{"oneOf":[{"type":"string"},{"type":"integer","minimum":0},{"type":"number"}]}}`,
			`[` + numbers + `]`,
		},
		"not": {
			`{"type":"array","items":{"not":{"type":"integer"}}}`,
			`[` + numbers + `]`,
		},
		"anyOf holding for its second branch": {
			`{"type":"array","items":{"anyOf":[{"type":"integer"},{"type":"string"}]}}`,
			`[` + strings.Repeat(`"a",`, 250_000) + `true]`,
		},
		// Two subschemas apply at each place: checkWork refuses a million values.
		"recursive reference": {
			`{"type":"array","items":{"$ref":"#/$defs/l"},"$defs":{"l":{"type":["array","string"],"items":{"$ref":"#/$defs/l"}}}}`,
			strings.Repeat("[", 60) + strings.Repeat(`1,`, 300_000) + `1` + strings.Repeat("]", 60),
		},
		"objects missing properties": {
			`{"type":"array","items":{"type":"object","required":["a","b"],"additionalProperties":false}}`,
			`[` + strings.Repeat(`{"c":1},`, 120_000) + `{}]`,
		},
	}
	lim := jsonx.Limits{MaxBytes: 2 << 20, MaxDepth: 64}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			sch := compileForTest(t, tc.schema)
			if sch.shape == nil {
				t.Fatal("no shape for the test schema")
			}
			if raceEnabled && sch.costs.patternSize > 0 {
				t.Skip("a pattern's matcher comes from a sync.Pool, which drops items under -race")
			}
			raw := []byte(tc.doc)
			decoded := allocated(func() {
				if _, err := jsonx.Decode(raw, lim); err != nil {
					t.Fatal(err)
				}
			})
			var err error
			total := allocated(func() { err = validate(sch, raw, lim, "arguments") })
			if err == nil {
				t.Fatal("validate = nil, want a violation")
			}
			t.Logf("validate(%d bytes) allocated %d bytes past decoding (%d)", len(raw), total-decoded, decoded)
			if extra, bound := total-decoded, 8*uint64(len(raw)); extra > bound {
				t.Errorf("validate(%d bytes) allocated %d bytes past decoding, want under %d", len(raw), extra, bound)
			}
		})
	}
}

// A failing document under a schema with a shape is reported by the shape, whose work
// is a lookup per value, not priced for the library's comparisons, which it never
// makes: such documents were refused as "too many values" or "numbers too large"
// instead of being told their violations, while valid ones as large were accepted.
func TestShapeViolationsAreNotPricedForTheLibrary(t *testing.T) {
	var ints, names strings.Builder
	for i := range 2000 {
		ints.WriteString(strconv.Itoa(i+1) + ",")
		names.WriteString(`"k` + strconv.Itoa(i) + `",`)
	}
	items := func(n int, v string) string {
		return `{"a":[` + strings.TrimSuffix(strings.Repeat(v+",", n), ",") + `]}`
	}
	tests := map[string]struct{ schema, item string }{
		"numbers against an enum": {`{"type":"object","properties":{"a":{"type":"array","items":{"enum":[` + ints.String() + `0]}}}}`, `1234567e-400`},
		"required":                {`{"type":"object","properties":{"a":{"type":"array","items":{"type":"object","required":[` + names.String() + `"z"]}}}}`, `{}`},
		"huge exponents":          {`{"type":"object","properties":{"a":{"type":"array","items":{"type":"number","multipleOf":0.7}}}}`, `1e400`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			sch := compileForTest(t, tc.schema)
			if sch.shape == nil {
				t.Fatal("no shape for the test schema")
			}
			want := libraryViolations(t, sch, items(2, tc.item))
			got := validateViolations(t, sch, items(80_000, tc.item))
			if len(got) == 0 || got[0] != want[0] {
				t.Errorf("validate(80,000 items) = %.300v, want first %v, as of 2 items", got, want[0])
			}
		})
	}
}

// allocated is the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// FuzzShapeViolationsAreTheLibrarys holds a schema with a shape to the library's report
// of any document: valid or not alike, the same violations. Additional properties are
// compared by count: the library lists them in map order.
func FuzzShapeViolationsAreTheLibrarys(f *testing.F) {
	for _, seed := range [][2]string{
		{`{"type":"object","properties":{"a":{"type":"string","minLength":1}},"required":["a"],"additionalProperties":false}`, `{"b":"x","a":""}`},
		{`{"type":"object","properties":{"n":{"type":"integer","minimum":0,"maximum":5}}}`, `{"n":5.5}`},
		{`{"type":"object","properties":{"n":{"type":["number","null"],"exclusiveMinimum":-3}}}`, `{"n":-3e0}`},
		{`{"type":"object","properties":{"e":{"enum":["a","b"]},"l":{"type":"array","items":{"type":"boolean"},"maxItems":3}}}`, `{"e":"c","l":[true,1,null,false]}`},
		{`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","additionalProperties":{"type":"string","maxLength":2}}`, `{"k":"abc","/":1}`},
		{`{"type":"object","properties":{"o":{"type":"object","properties":{"p":{"type":"integer"}},"required":["p","q"]}}}`, `{"o":{"p":1.0}}`},
		{`{"type":"array","items":{"type":"array","items":{"type":"integer","exclusiveMaximum":-9223372036854775808}}}`, `[[1,-9223372036854775809,-9223372036854775808.5],[]]`},
		{`{"type":"object","properties":{"w":{"type":"string","format":"date-time","maxLength":4},"b":{"format":"email","contentMediaType":"text/plain"}}}`, `{"w":"never","b":1}`},
		{`{"type":"object","properties":{"t":{"type":"number","minimum":0,"maximum":1.5},"p":{"exclusiveMinimum":-0.25,"exclusiveMaximum":1e2}}}`, `{"t":1.50000001,"p":-0.25}`},
		{`{"type":"array","items":{"minimum":-1.5e-3,"exclusiveMaximum":0.00}}`, `[-0.0015,-15e-4,-0.0,0.0001,-1.50001e-3]`},
		{`{"type":"array","items":{"enum":[1,"1",true,null,-0.5]}}`, `[1.0,"1",1,false,null,-5e-1,0,"x"]`},
		{`{"type":"object","properties":{"c":{"const":"fixed"},"n":{"const":0,"minimum":1}}}`, `{"c":"other","n":-0.0}`},
		{`{"type":"object","minProperties":2,"maxProperties":1,"properties":{"o":{"maxProperties":0,"required":["x"]}}}`, `{"o":{"y":1}}`},
		{`{"type":"object","properties":{"t":{"$ref":"#/$defs/n"}},"$defs":{"n":{"type":"object","properties":{"v":{"type":"integer"},"k":{"type":"array","items":{"$ref":"#/$defs/n"}}},"required":["v"]}}}`, `{"t":{"v":1,"k":[{"v":"x"},{}]}}`},
		{`{"type":"object","allOf":[{"$ref":"#/definitions/a"},{"required":["x"]}],"definitions":{"a":{"properties":{"x":{"enum":[1,2]}}}}}`, `{"x":3}`},
		{`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"a":{"$ref":"#/definitions/n","maxLength":1}},"definitions":{"n":{"type":"string","minLength":2}}}`, `{"a":"x"}`},
		{`{"type":"array","uniqueItems":true,"items":{"type":"array","uniqueItems":true}}`, `[[1,1.0],[{"a":1},{"a":1e0}],[1,1.0],[]]`},
		{`{"type":"array","uniqueItems":true}`, `[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,{"b":[2]},{"b":[2e0]},20]`},
		{`{"type":"object","properties":{"p":{"type":"string","pattern":"^[a-z]+$","minLength":3},"q":{"pattern":"(?i)x\\b"}}}`, `{"p":"AB","q":"aX y"}`},
		{`{"type":"array","prefixItems":[{"type":"string"},{"enum":[1,2]}],"items":{"type":"null"}}`, `[1,3,null,0]`},
		{`{"type":"array","items":{"anyOf":[{"type":"object","required":["a"]},{"type":"integer","anyOf":[{"minimum":3},{"maximum":-3}]}]}}`, `[{"a":1},{},0,3,-3.0,"x"]`},
		{`{"type":"array","items":{"type":"number","multipleOf":0.7}}`, `[1.4,2.1,0.07,-7e1,1e-400,123456789012345678901.4]`},
		{`{"type":"object","propertyNames":{"pattern":"^-?[0-9]+$","maxLength":3},"required":["1"],"additionalProperties":{"type":"object","propertyNames":{"enum":["a"],"const":"b"}}}`, `{"12":{"a":1},"x1":{"b":2,"c":3},"1234":5}`},
		{`{"type":"array","items":{"type":"object","minProperties":1,"propertyNames":false,"additionalProperties":false}}`, `[{},{"a":1},{"b":{"c":1}}]`},
		{`{"type":"object","properties":{"a":false,"b":{"type":"array","prefixItems":[{"type":"string"},false],"items":false},"c":{"oneOf":[true,false,{"not":false}]}},"additionalProperties":false}`, `{"a":1,"b":["x",2,3],"c":0}`},
		{`{"$schema":"http://json-schema.org/draft-07/schema#","type":"array","items":false}`, `[1]`},
		{`{"type":"object","dependentRequired":{"a":["b","c"],"b":["a"],"~/":["a/b"]},"properties":{"o":{"type":"array","items":{"dependentRequired":{"x":["y"]},"minProperties":2}}}}`, `{"a":1,"b":2,"~/":3,"o":[{"x":1},{"y":1,"x":2},{}]}`},
		{`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","dependentRequired":{"a":["b"]}}`, `{"a":1}`},
		{`{"type":"object","properties":{"id":{"type":"string"}},"patternProperties":{"^x-":{"type":"integer"},"-n$":{"minimum":0},"":{"maxProperties":1}},"additionalProperties":false}`, `{"id":1,"x-a":"s","x-a-n":-2,"b-n":0,"c":1,"y":{"a":1,"b":2}}`},
		{`{"$schema":"http://json-schema.org/draft-07/schema#","type":"array","items":{"type":"object","patternProperties":{"^[0-9]+$":{"$ref":"#/definitions/n"}},"additionalProperties":{"type":"string"}},"definitions":{"n":{"type":"integer"}}}`, `[{"1":1,"a":"b"},{"12":"x","b":2},{"":null}]`},
		{`{"type":"array","items":{"if":{"type":"integer"},"then":{"minimum":2,"if":{"maximum":5},"else":{"multipleOf":2}},"else":{"type":"string","minLength":2}}}`, `[1,2.0,6,7,"a","ab",null]`},
		{`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","if":{"required":["a"]},"then":{"required":["b"]},"else":{"required":["c"]}}`, `{"a":1}`},
		{`{"type":"array","items":{"oneOf":[{"type":"integer"},{"minimum":2},{"oneOf":[{"type":"string"},{"maxLength":1}]}]}}`, `[1,2.5,3,"a","ab",true,null,[]]`},
		{`{"type":"array","items":{"not":{"type":"integer","not":{"minimum":3}},"anyOf":[{"not":{"type":"string"}},{"maxLength":1}]}}`, `[1,3,4.0,"ab","a",[],null]`},
		{`{"type":"object","not":{"required":["a"],"properties":{"a":{"not":{"type":"array","items":{"not":{"const":1}}}}}}}`, `{"a":[1,2],"b":[]}`},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, rawSchema, doc string) {
		sch, v, ok := fuzzedShape(rawSchema, doc)
		if !ok || sch.checkWork(v, "arguments") != nil {
			return
		}
		want, got := libraryViolations(t, sch, doc), validateViolations(t, sch, doc)
		for _, vs := range [][]Violation{want, got} {
			for i, v := range vs {
				if strings.HasPrefix(v.Message, "additional properties ") {
					vs[i].Message = "additional properties: " + strconv.Itoa(strings.Count(v.Message, "', '"))
				}
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("validate(%s) under %s: violations (-library +got):\n%s", doc, rawSchema, diff)
		}
	})
}
