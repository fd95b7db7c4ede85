package registry_test

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/toolsd/toolsd/internal/jsonx"
	"github.com/toolsd/toolsd/internal/registry"
	"github.com/toolsd/toolsd/internal/tool"
)

func TestSchemaOutsideReferencesRejected(t *testing.T) {
	tests := map[string]struct {
		params  string
		pointer string
	}{
		"http":          {params: `{"type":"object","properties":{"a":{"$ref":"http://example.com/s.json"}}}`, pointer: "/properties/a/$ref"},
		"https":         {params: `{"type":"object","properties":{"a":{"$ref":"https://example.com/s.json#/x"}}}`, pointer: "/properties/a/$ref"},
		"file":          {params: `{"type":"object","properties":{"a":{"$ref":"file:///etc/passwd"}}}`, pointer: "/properties/a/$ref"},
		"relative":      {params: `{"type":"object","properties":{"a":{"$ref":"other.json"}}}`, pointer: "/properties/a/$ref"},
		"parent path":   {params: `{"type":"object","properties":{"a":{"$ref":"../../etc/passwd"}}}`, pointer: "/properties/a/$ref"},
		"relative $id":  {params: `{"$id":"https://example.com/root.json","type":"object","properties":{"a":{"$ref":"item.json"}}}`, pointer: "/properties/a/$ref"},
		"urn":           {params: `{"type":"object","properties":{"a":{"$ref":"urn:example:thing"}}}`, pointer: "/properties/a/$ref"},
		"in $defs":      {params: `{"type":"object","$defs":{"x":{"items":{"$ref":"http://e.com/a"}}},"properties":{"a":{"$ref":"#/$defs/x"}}}`, pointer: "/$defs/x/items/$ref"},
		"in array":      {params: `{"type":"object","anyOf":[{"type":"object"},{"$ref":"https://e.com/b"}]}`, pointer: "/anyOf/1/$ref"},
		"dynamic ref":   {params: `{"type":"object","properties":{"a":{"$dynamicRef":"https://e.com/c#meta"}}}`, pointer: "/properties/a/$dynamicRef"},
		"custom schema": {params: `{"$schema":"https://example.com/my-meta","type":"object"}`, pointer: "/$schema"},
		// The library reads $schema as written, not resolved against the document's URL.
		"relative schema": {params: `{"$schema":"meta.json","type":"object"}`, pointer: "/$schema"},
		"empty schema":    {params: `{"$schema":"#","type":"object"}`, pointer: "/$schema"},
		"nested schema":   {params: `{"type":"object","$defs":{"x":{"$id":"https://e.com/x","$schema":"m.json"}}}`, pointer: "/$defs/x/$schema"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := newRegistry(t)
			_, err := r.Register("", withParams("t", tc.params), "")
			if !errors.Is(err, registry.ErrInvalidSchema) {
				t.Fatalf("Register(%s) = %v, want ErrInvalidSchema", tc.params, err)
			}
			if !strings.Contains(err.Error(), " at "+tc.pointer+" ") {
				t.Errorf("Register(%s) = %q, want the pointer %s named", tc.params, err, tc.pointer)
			}
			// The output schema gets the same treatment.
			d := def("u")
			d.OutputSchema = []byte(tc.params)
			if _, err := r.Register("", d, ""); !errors.Is(err, registry.ErrInvalidSchema) {
				t.Errorf("Register(output %s) = %v, want ErrInvalidSchema", tc.params, err)
			}
		})
	}
}

// A $schema naming the document itself is refused at its pointer; the library's own
// message, with the document's internal URL cut out, read `draft "" is not supported`.
func TestSchemaNamingItselfAsDraftRefused(t *testing.T) {
	r := newRegistry(t)
	_, err := r.Register("", withParams("t", `{"$schema":"toolsd://schema/root.json","type":"object"}`), "")
	if !errors.Is(err, registry.ErrInvalidSchema) || !strings.Contains(err.Error(), `tool "t" parameters`) ||
		!strings.Contains(err.Error(), " at /$schema ") || strings.Contains(err.Error(), `draft ""`) {
		t.Errorf("Register($schema naming itself) = %v, want ErrInvalidSchema naming the tool and /$schema", err)
	}
}

func TestSchemaInternalReferences(t *testing.T) {
	tests := map[string]struct {
		params       string
		valid, wrong string
		wantInWrong  string
	}{
		"$defs": {
			params: `{"type":"object","$defs":{"path":{"type":"string"}},"properties":{"p":{"$ref":"#/$defs/path"}}}`,
			valid:  `{"p":"x"}`, wrong: `{"p":1}`, wantInWrong: "/p: expected string, got number",
		},
		"recursive tree": {
			params: `{"type":"object","$defs":{"node":{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}}}},"properties":{"t":{"$ref":"#/$defs/node"}}}`,
			valid:  `{"t":{"kids":[{"kids":[]},{}]}}`, wrong: `{"t":{"kids":[{"kids":[7]}]}}`, wantInWrong: "/t/kids/0/kids/0: expected object, got number",
		},
		"root recursion": {
			params: `{"type":"object","properties":{"child":{"$ref":"#"},"n":{"type":"integer"}}}`,
			valid:  `{"child":{"child":{"n":1}}}`, wrong: `{"child":{"child":{"n":"x"}}}`, wantInWrong: "/child/child/n: expected integer, got string",
		},
		"binary tree": {
			params: `{"type":"object","$defs":{"n":{"type":"object","properties":{"l":{"$ref":"#/$defs/n"},"r":{"$ref":"#/$defs/n"},"v":{"type":"integer"}}}},"properties":{"t":{"$ref":"#/$defs/n"}}}`,
			valid:  `{"t":{"l":{"r":{"v":1}},"r":{}}}`, wrong: `{"t":{"l":{"r":{"v":"x"}}}}`, wantInWrong: "/t/l/r/v: expected integer, got string",
		},
		"named and other keys recurse": {
			params: `{"type":"object","properties":{"child":{"$ref":"#"}},"patternProperties":{"^p":{"$ref":"#"}},"additionalProperties":{"$ref":"#"}}`,
			valid:  `{"child":{"pa":{"z":{}}}}`, wrong: `{"child":{"pa":{"z":1}}}`, wantInWrong: "/child/pa/z: expected object, got number",
		},
		"dynamic tree": {
			params: `{"$id":"https://example.com/tree","$dynamicAnchor":"node","type":"object","properties":{"kids":{"type":"array","items":{"$dynamicRef":"#node"}}}}`,
			valid:  `{"kids":[{"kids":[]}]}`, wrong: `{"kids":[{"kids":[1]}]}`, wantInWrong: "/kids/0/kids/0: expected object, got number",
		},
		"embedded $id": {
			params: `{"$id":"https://example.com/root.json","type":"object","$defs":{"item":{"$id":"item.json","type":"string"}},"properties":{"i":{"$ref":"item.json"}}}`,
			valid:  `{"i":"ok"}`, wrong: `{"i":[]}`, wantInWrong: "/i: expected string, got array",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := newRegistry(t)
			e := mustRegister(t, r, "", withParams("t", tc.params), "")
			if err := e.ValidateArguments(tc.valid); err != nil {
				t.Errorf("ValidateArguments(%s) = %v, want nil", tc.valid, err)
			}
			err := e.ValidateArguments(tc.wrong)
			if err == nil || !strings.Contains(err.Error(), tc.wantInWrong) {
				t.Errorf("ValidateArguments(%s) = %v, want an error containing %q", tc.wrong, err, tc.wantInWrong)
			}
		})
	}
}

func TestSchemaRootMustBeObject(t *testing.T) {
	tests := map[string]string{
		"no type":       `{"properties":{"a":{}}}`,
		"string type":   `{"type":"string"}`,
		"type list":     `{"type":["object","null"]}`,
		"array root":    `[]`,
		"boolean root":  `true`,
		"not json":      `{type: object}`,
		"trailing data": `{"type":"object"} {}`,
		"bad utf-8":     "{\"type\":\"object\",\"description\":\"\xff\"}",
		"invalid draft": `{"type":"object","properties":{"a":{"type":"strin"}}}`,
		"missing $defs": `{"type":"object","properties":{"a":{"$ref":"#/$defs/missing"}}}`,
	}
	for name, params := range tests {
		t.Run(name, func(t *testing.T) {
			r := newRegistry(t)
			if _, err := r.Register("", withParams("t", params), ""); !errors.Is(err, registry.ErrInvalidSchema) {
				t.Fatalf("Register(%s) = %v, want ErrInvalidSchema", params, err)
			}
		})
	}
}

// In draft-07 and earlier a "$ref" replaces every keyword beside it, "type" included: a
// root of "type": "object" beside a "$ref" passed the root check but asserted nothing,
// and a string or an array was valid arguments. Such a root is refused, saying why; the
// same reference under "allOf" (or beside "type" in 2020-12) is fine.
func TestSchemaRootObjectBesideDraft7RefRefused(t *testing.T) {
	r := newRegistry(t)
	for _, draft := range []string{"http://json-schema.org/draft-07/schema#", "http://json-schema.org/draft-04/schema#"} {
		params := `{"$schema":"` + draft + `","type":"object","$ref":"#/definitions/any","definitions":{"any":{}}}`
		e, err := r.Register("", withParams("t", params), "")
		if err == nil {
			t.Errorf("Register(%s) = nil (arguments \"hello\": %v), want ErrInvalidSchema", params, e.ValidateArguments(`"hello"`))
			if err := r.Unregister("", "t", ""); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if !errors.Is(err, registry.ErrInvalidSchema) || !strings.Contains(err.Error(), `tool "t" parameters`) || !strings.Contains(err.Error(), "$ref") {
			t.Errorf("Register(%s) = %v, want ErrInvalidSchema naming the tool and $ref", params, err)
		}
	}
	for _, params := range []string{
		`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","allOf":[{"$ref":"#/definitions/any"}],"definitions":{"any":{}}}`,
		`{"type":"object","$ref":"#/$defs/any","$defs":{"any":{}}}`,
	} {
		e := mustRegister(t, r, "", withParams("t", params), "")
		if err := e.ValidateArguments(`"hello"`); !errors.Is(err, registry.ErrInvalidArguments) {
			t.Errorf("%s: ValidateArguments(\"hello\") = %v, want ErrInvalidArguments", params, err)
		}
		if err := r.Unregister("", "t", ""); err != nil {
			t.Fatal(err)
		}
	}
	// An output schema's root may be anything, $ref included.
	d := def("out")
	d.OutputSchema = []byte(`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","$ref":"#/definitions/any","definitions":{"any":{}}}`)
	mustRegister(t, r, "", d, "")
}

// TestSchemaDrafts pins the draft selection: 2020-12 by default, draft-07 when $schema
// says so. In draft-07 keywords beside $ref are ignored; in 2020-12 they apply.
func TestSchemaDrafts(t *testing.T) {
	const body = `"type":"object","definitions":{"s":{"type":"string"}},"properties":{"a":{"$ref":"#/definitions/s","maxLength":2}}`
	tests := map[string]struct {
		params    string
		longValid bool
	}{
		"default is 2020-12": {params: `{` + body + `}`, longValid: false},
		"explicit 2020-12":   {params: `{"$schema":"https://json-schema.org/draft/2020-12/schema",` + body + `}`, longValid: false},
		"draft-07":           {params: `{"$schema":"http://json-schema.org/draft-07/schema#",` + body + `}`, longValid: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := newRegistry(t)
			e := mustRegister(t, r, "", withParams("t", tc.params), "")
			err := e.ValidateArguments(`{"a":"long"}`)
			if (err == nil) != tc.longValid {
				t.Errorf("ValidateArguments({a: long}) = %v, want valid=%v", err, tc.longValid)
			}
			if err := e.ValidateArguments(`{"a":1}`); err == nil {
				t.Errorf("ValidateArguments({a: 1}) = nil, want a type error under every draft")
			}
		})
	}
}

func TestSchemaPrefixItemsOnlyIn2020(t *testing.T) {
	r := newRegistry(t)
	_, err := r.Register("", withParams("old", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"a":{"items":[{"type":"string"}]}}}`), "")
	if err != nil {
		t.Fatalf("Register(draft-07 tuple items) = %v, want nil", err)
	}
	if _, err := r.Register("", withParams("new", `{"type":"object","properties":{"a":{"items":[{"type":"string"}]}}}`), ""); !errors.Is(err, registry.ErrInvalidSchema) {
		t.Fatalf("Register(2020-12 tuple items) = %v, want ErrInvalidSchema (items must be a schema)", err)
	}
}

// TestSchemaRegexIsLinear registers a pattern that backtracks catastrophically in
// ECMA-262 engines; with RE2 matching it stays linear, so this test finishes at once
// rather than running into the test timeout.
func TestSchemaRegexIsLinear(t *testing.T) {
	r := newRegistry(t)
	e := mustRegister(t, r, "", withParams("t", `{"type":"object","properties":{"s":{"type":"string","pattern":"^(a+)+$"}},"patternProperties":{"^(x+x+)+y$":{"type":"number"}}}`), "")
	evil := strings.Repeat("a", 100000) + "!"
	err := e.ValidateArguments(`{"s":"` + evil + `"}`)
	if err == nil || !strings.Contains(err.Error(), "does not match pattern") {
		t.Errorf("ValidateArguments(evil) = %v, want a pattern mismatch", err)
	}
	if len(err.Error()) > 1000 {
		t.Errorf("ValidateArguments(evil) message is %d bytes, want it truncated", len(err.Error()))
	}
	key := strings.Repeat("x", 50000)
	if err := e.ValidateArguments(`{"` + key + `":"s"}`); err != nil {
		t.Errorf("ValidateArguments(evil key) = %v, want nil (no patternProperties match)", err)
	}
}

func TestSchemaRegexFeaturesRE2Lacks(t *testing.T) {
	tests := map[string]string{
		"lookahead":      `(?=x)`,
		"backreference":  `(a)\\1`,
		"huge repeat":    `a{2000}`,
		"pattern length": strings.Repeat("a", 5000),
	}
	for name, pattern := range tests {
		t.Run(name, func(t *testing.T) {
			r := newRegistry(t)
			params := `{"type":"object","properties":{"s":{"type":"string","pattern":"` + pattern + `"}}}`
			if _, err := r.Register("", withParams("t", params), ""); !errors.Is(err, registry.ErrInvalidSchema) {
				t.Fatalf("Register(pattern %q) = %v, want ErrInvalidSchema", pattern, err)
			}
		})
	}
}

// A refused pattern's error says why, at the pattern: "is not a valid regex" alone left a
// provider to guess between syntax RE2 lacks and a valid pattern over the size bounds.
func TestSchemaPatternErrorSaysWhy(t *testing.T) {
	r := newRegistry(t)
	for pattern, why := range map[string]string{
		`(?=x)`:                         "invalid or unsupported Perl syntax",
		`(a)\\1`:                        "invalid escape sequence",
		`a{2000}`:                       "invalid repeat count",
		strings.Repeat(".{0,1000}", 40): "more than 10000 regex instructions",
		strings.Repeat("a", 5000):       "longer than 4096 bytes",
	} {
		for _, draft := range []string{"", `"$schema":"http://json-schema.org/draft-07/schema#",`} {
			params := `{` + draft + `"type":"object","properties":{"s":{"type":"string","pattern":"` + pattern + `"}}}`
			_, err := r.Register("", withParams("t", params), "")
			if !errors.Is(err, registry.ErrInvalidSchema) || !strings.Contains(err.Error(), "/properties/s/pattern") || !strings.Contains(err.Error(), why) {
				t.Errorf("Register(%s pattern %.30q) = %v, want ErrInvalidSchema at /properties/s/pattern saying %q", draft, pattern, err, why)
			}
		}
	}
}

func TestOutputSchema(t *testing.T) {
	r := newRegistry(t)
	d := def("t")
	d.OutputSchema = []byte(`{"type":"array","items":{"type":"integer"}}`)
	e := mustRegister(t, r, "", d, "")
	if err := e.ValidateOutput([]byte(`[1,2]`)); err != nil {
		t.Errorf("ValidateOutput([1,2]) = %v, want nil", err)
	}
	err := e.ValidateOutput([]byte(`[1,"x"]`))
	var verr *registry.ValidationError
	if !errors.As(err, &verr) || !errors.Is(err, registry.ErrInvalidOutput) || errors.Is(err, registry.ErrInvalidArguments) {
		t.Fatalf("ValidateOutput([1,\"x\"]) = %v, want a *ValidationError wrapping only ErrInvalidOutput", err)
	}
	if want := "invalid output: /1: expected integer, got string"; err.Error() != want {
		t.Errorf("ValidateOutput error = %q, want %q", err, want)
	}
	plain := mustRegister(t, r, "", def("plain"), "")
	if err := plain.ValidateOutput([]byte(`not even json`)); err != nil {
		t.Errorf("ValidateOutput without output schema = %v, want nil", err)
	}
}

func TestOutputSchemaAnyRoot(t *testing.T) {
	r := newRegistry(t)
	d := tool.Definition{Name: "t", Parameters: []byte(objectSchema), OutputSchema: []byte(`{"type":"string"}`)}
	e := mustRegister(t, r, "", d, "")
	if err := e.ValidateOutput([]byte(`"ok"`)); err != nil {
		t.Errorf("ValidateOutput(\"ok\") = %v, want nil", err)
	}
}

// A pattern whose counted repetitions multiply into a huge program is refused at
// registration: RE2 is linear in the input but proportional to the program, and this one
// took seconds per kilobyte of argument (and seconds to compile).
func TestPatternSizeIsBounded(t *testing.T) {
	r := newRegistry(t)
	huge := strings.Repeat(".{0,1000}", 40) + "x"
	_, err := r.Register("", withParams("huge", `{"type":"object","properties":{"s":{"type":"string","pattern":`+strconv.Quote(huge)+`}}}`), "p1")
	if !errors.Is(err, registry.ErrInvalidSchema) || !strings.Contains(err.Error(), "/properties/s/pattern") {
		t.Errorf("Register(pattern %.30s…) = %v, want ErrInvalidSchema naming the pattern", huge, err)
	}
	for _, ok := range []string{`^[a-z0-9_]{1,64}$`, `.{0,1000}`, `^(\+|-)?[0-9]{1,20}(\.[0-9]{1,10})?$`} {
		if _, err := r.Register("", withParams("fine", `{"type":"object","properties":{"s":{"type":"string","pattern":`+strconv.Quote(ok)+`}}}`), "p1"); err != nil {
			t.Errorf("Register(pattern %s) = %v, want it accepted", ok, err)
		}
		r.RemoveOwner("p1")
	}
}

// A schema's patterns are bounded together, not only one by one: each is compiled and
// kept for as long as the tool is registered, and 64 KiB of ".{0,1000}" patterns took
// seconds to compile and held 166 MB. The same pattern written many times counts once.
func TestSchemaPatternsAreBoundedTogether(t *testing.T) {
	r := newRegistry(t)
	props := func(n int, pattern func(i int) string) string {
		var b strings.Builder
		b.WriteString(`{"type":"object","properties":{`)
		for i := range n {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `"p%d":{"type":"string","pattern":%s}`, i, strconv.Quote(pattern(i)))
		}
		b.WriteString(`}}`)
		return b.String()
	}
	many := props(40, func(i int) string { return fmt.Sprintf(".{0,1000}x%d", i) })
	_, err := r.Register("", withParams("many", many), "p1")
	if !errors.Is(err, registry.ErrLimit) || !strings.Contains(err.Error(), "patterns together") {
		t.Errorf("Register(40 distinct .{0,1000} patterns) = %v, want ErrLimit for the patterns together", err)
	}
	d := def("out")
	d.OutputSchema = []byte(many)
	if _, err := r.Register("", d, "p1"); !errors.Is(err, registry.ErrLimit) || !strings.Contains(err.Error(), "output schema") {
		t.Errorf("Register(output schema with 40 distinct .{0,1000} patterns) = %v, want ErrLimit naming the output schema", err)
	}
	repeated := props(40, func(int) string { return ".{0,1000}x" })
	e, err := r.Register("", withParams("repeated", repeated), "p1")
	if err != nil {
		t.Fatalf("Register(one .{0,1000} pattern 40 times) = %v, want it accepted", err)
	}
	if err := e.ValidateArguments(`{"p0":"ax","p39":"bx"}`); err != nil {
		t.Errorf("ValidateArguments(matching) = %v, want nil", err)
	}
	if err := e.ValidateArguments(`{"p7":"a"}`); err == nil || !strings.Contains(err.Error(), "/p7") {
		t.Errorf("ValidateArguments(p7 not matching) = %v, want a mismatch at /p7", err)
	}
	// An asserted "format": "regex" checks argument strings with the same engine after
	// registration, concurrently, and without the registration's budget.
	rx, err := r.Register("", withParams("rx", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"re":{"type":"string","format":"regex"}}}`), "p1")
	if err != nil {
		t.Fatalf("Register(format regex) = %v", err)
	}
	if err := rx.ValidateArguments(`{"re":"(?=x)"}`); err == nil {
		t.Error(`ValidateArguments({"re":"(?=x)"}) = nil, want a format error`)
	}
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			args := fmt.Sprintf(`{"re":".{0,1000}x%d"}`, i)
			if err := rx.ValidateArguments(args); err != nil {
				t.Errorf("ValidateArguments(%s) = %v, want nil", args, err)
			}
		})
	}
	wg.Wait()
}

// A schema that refers back to itself at the same place would fail every document that
// reaches the place ("reference cycle"); it is refused at registration, naming the place.
func TestSchemaReferenceCyclesRefused(t *testing.T) {
	tests := map[string]struct{ params, pointer string }{
		"self":      {params: `{"type":"object","$defs":{"a":{"$ref":"#/$defs/a"}},"properties":{"x":{"$ref":"#/$defs/a"}}}`, pointer: "#/$defs/a"},
		"mutual":    {params: `{"type":"object","$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"properties":{"x":{"$ref":"#/$defs/a"}}}`, pointer: "#/$defs/a"},
		"root":      {params: `{"type":"object","allOf":[{"$ref":"#"}]}`, pointer: "the root"},
		"via anyOf": {params: `{"type":"object","properties":{"x":{"$ref":"#/$defs/a"}},"$defs":{"a":{"anyOf":[{"type":"string"},{"not":{"$ref":"#/$defs/a"}}]}}}`, pointer: "#/$defs/a"},
		"via if":    {params: `{"type":"object","properties":{"x":{"$ref":"#/$defs/a"}},"$defs":{"a":{"if":{"$ref":"#/$defs/a"}}}}`, pointer: "#/$defs/a"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := newRegistry(t)
			_, err := r.Register("", withParams("t", tc.params), "")
			if !errors.Is(err, registry.ErrInvalidSchema) || !strings.Contains(err.Error(), tc.pointer+" refers back to itself") {
				t.Errorf("Register(%s) = %v, want ErrInvalidSchema naming %s", tc.params, err, tc.pointer)
			}
			d := def("u")
			d.OutputSchema = []byte(tc.params)
			if _, err := r.Register("", d, ""); !errors.Is(err, registry.ErrInvalidSchema) {
				t.Errorf("Register(output %s) = %v, want ErrInvalidSchema", tc.params, err)
			}
		})
	}
}

// anyOfChain is a schema whose $defs a0…a(n-1) each apply the next one twice, so that
// 2^(n+1)-1 subschemas apply where a0 is used.
func anyOfChain(n int) string {
	var b strings.Builder
	b.WriteString(`{"type":"object","properties":{"x":{"$ref":"#/$defs/a0"}},"$defs":{`)
	for i := range n {
		next := `{"$ref":"#/$defs/a` + strconv.Itoa(i+1) + `"}`
		b.WriteString(`"a` + strconv.Itoa(i) + `":{"anyOf":[` + next + `,` + next + `]},`)
	}
	b.WriteString(`"a` + strconv.Itoa(n) + `":{"type":"integer"}}}`)
	return b.String()
}

// References and combinators that multiply the subschemas applied at one place are
// refused: a chain of anyOf pairs doubles the work at each link, and a definition that
// applies itself twice one level down doubles it at each level of the document. Before
// this check, each schema below was accepted and one call's validation of a small
// document took time exponential in the chain's length or the document's depth.
func TestSchemaFanoutIsBounded(t *testing.T) {
	refused := map[string]struct{ params, where string }{
		"anyOf chain":                     {params: anyOfChain(9), where: "at #/$defs/a"},
		"allOf of $defs":                  {params: `{"type":"object","allOf":[` + strings.Repeat(`{"$ref":"#/$defs/w"},`, 30) + `{}],"$defs":{"w":{"allOf":[` + strings.Repeat(`{"$ref":"#/$defs/v"},`, 30) + `{}]},"v":{}}}`, where: "at the root"},
		"doubling per level":              {params: `{"type":"object","properties":{"x":{"anyOf":[{"$ref":"#"},{"$ref":"#"}]}}}`, where: "levels below the root"},
		"doubling per item":               {params: `{"type":"object","properties":{"l":{"$ref":"#/$defs/l"}},"$defs":{"l":{"type":"array","items":{"oneOf":[{"$ref":"#/$defs/l"},{"$ref":"#/$defs/l"}]}}}}`, where: "levels below the root"},
		"property and pattern both apply": {params: `{"type":"object","properties":{"a":{"$ref":"#"}},"patternProperties":{"^a$":{"$ref":"#"}}}`, where: "levels below the root"},
		"doubling in one branch":          {params: `{"type":"object","if":{"required":["a"]},"then":{"properties":{"x":{"anyOf":[{"$ref":"#"},{"$ref":"#"}]}}},"else":{}}`, where: "levels below the root"},
		"doubling through additional":     {params: `{"type":"object","additionalProperties":{"allOf":[{"$ref":"#"},{"$ref":"#"}]}}`, where: "levels below the root"},
	}
	for name, tc := range refused {
		t.Run(name, func(t *testing.T) {
			r := newRegistry(t)
			_, err := r.Register("", withParams("t", tc.params), "")
			if !errors.Is(err, registry.ErrLimit) || !strings.Contains(err.Error(), tc.where) || !strings.Contains(err.Error(), "the limit is 500") {
				t.Errorf("Register(%.80s…) = %v, want ErrLimit naming %q", tc.params, err, tc.where)
			}
		})
	}
	// Under the limit: 253 subschemas where a0 applies, accepted and validating.
	r := newRegistry(t)
	e := mustRegister(t, r, "", withParams("t", anyOfChain(6)), "")
	if err := e.ValidateArguments(`{"x":1}`); err != nil {
		t.Errorf("ValidateArguments(chain of 6) = %v, want nil", err)
	}
	if err := e.ValidateArguments(`{"x":"no"}`); !errors.Is(err, registry.ErrInvalidArguments) {
		t.Errorf("ValidateArguments(chain of 6, wrong) = %v, want ErrInvalidArguments", err)
	}
	// Of then and else one applies: ~400 subschemas in each are ~400 at that place, not ~800.
	branch := `{"allOf":[` + strings.Repeat(`{"$ref":"#/$defs/v"},`, 199) + `{}]}`
	e = mustRegister(t, r, "", withParams("u", `{"type":"object","if":{"required":["a"]},"then":`+branch+`,"else":`+branch+`,"$defs":{"v":{}}}`), "")
	if err := e.ValidateArguments(`{"a":1}`); err != nil {
		t.Errorf("ValidateArguments(then/else) = %v, want nil", err)
	}
	// A definition that doubles per level is fine when documents cannot nest that deep.
	shallow := newRegistry(t, registry.WithLimits(registry.Limits{Args: jsonx.Limits{MaxDepth: 4}}))
	mustRegister(t, shallow, "", withParams("t", `{"type":"object","properties":{"x":{"anyOf":[{"$ref":"#"},{"$ref":"#"}]}}}`), "")
}

// A schema applying many subschemas at each place accepts documents of thousands of
// values, not a megabyte of them: 498 anyOf branches per array item would have made a
// 40 KB array take seconds to validate.
func TestValidationWorkIsBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"type":"object","properties":{"a":{"type":"array","items":{"anyOf":[`)
	for i := range 497 {
		b.WriteString(`{"type":"string","minLength":` + strconv.Itoa(i) + `},`)
	}
	b.WriteString(`{"type":"integer"}]}}}}`)
	e := mustRegister(t, newRegistry(t), "", withParams("t", b.String()), "")
	if err := e.ValidateArguments(`{"a":[1,2,"x"]}`); err != nil {
		t.Errorf("ValidateArguments(3 items) = %v, want nil", err)
	}
	doc := `{"a":[` + strings.Repeat(`0,`, 4999) + `0]}`
	err := e.ValidateArguments(doc)
	if !errors.Is(err, registry.ErrInvalidArguments) || !strings.Contains(err.Error(), "too many values for this tool's schema") {
		t.Errorf("ValidateArguments(5000 items) = %v, want ErrInvalidArguments: too many values", err)
	}
	// A schema applying one subschema per place is not limited.
	plain := mustRegister(t, newRegistry(t), "", withParams("t", `{"type":"object","properties":{"a":{"type":"array","items":{"type":"integer"}}}}`), "")
	if err := plain.ValidateArguments(doc); err != nil {
		t.Errorf("ValidateArguments(5000 items, plain schema) = %v, want nil", err)
	}
}

// workCase is a schema whose validation work is bounded: small stays within the
// bound, large is refused with want.
type workCase struct {
	params, small, large, want string
}

// checkWorkBounds registers each case's schema and checks that its small document
// validates and its large one is refused for the work it would take.
func checkWorkBounds(t *testing.T, tests map[string]workCase) {
	t.Helper()
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := mustRegister(t, newRegistry(t), "", withParams("t", tc.params), "")
			if err := e.ValidateArguments(tc.small); err != nil && strings.Contains(err.Error(), "for this tool's schema") {
				t.Errorf("ValidateArguments(small) = %v, want it validated", err)
			}
			err := e.ValidateArguments(tc.large)
			if !errors.Is(err, registry.ErrInvalidArguments) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ValidateArguments(large) = %.200v, want ErrInvalidArguments: %s", err, tc.want)
			}
		})
	}
}

// Each subschema applied at a place may carry a costly keyword, so the work of a
// document is priced per subschema applied, not once per value: an enum, a pattern or a
// minimum behind a few hundred references was checked once per reference, and a 47-byte
// document took 8 s, a 10 KB string 17 s. A format reads its string at each subschema
// too (2 s for a 900 KB JSON pointer behind 240 references). A number is parsed at each comparison, so its
// exponent counts each time (an enum of 2,000 integers took 2.4 s for 450 numbers
// written 1234567e-400), and uniqueItems compares a value again for every array above
// it (a 300 KB array of arrays took 4 s). Documents within the work those allow validate
// as before.
func TestValidationWorkCountsEverySubschemaApplied(t *testing.T) {
	var ints strings.Builder
	for i := range 2000 {
		ints.WriteString(strconv.Itoa(i+1) + ",")
	}
	refs := func(n int) string { return strings.TrimSuffix(strings.Repeat(`{"$ref":"#/$defs/e"},`, n), ",") }
	numbers := func(n int) string {
		return `{"a":[` + strings.TrimSuffix(strings.Repeat(`1234567e-400,`, n), ",") + `]}`
	}
	// nested builds arrays of arrays, widths[0] wide at the top, whose items differ only
	// in their last number: every pair of siblings is compared all the way down.
	var nested func(b *strings.Builder, widths []int, last string)
	nested = func(b *strings.Builder, widths []int, last string) {
		if len(widths) == 0 {
			b.WriteString(last)
			return
		}
		b.WriteByte('[')
		for i := range widths[0] {
			tag := strconv.Itoa(1000*len(widths) + i)
			if len(widths) == 1 {
				tag = strconv.Itoa(i + 1)
			}
			if i > 0 {
				b.WriteByte(',')
			}
			if i == widths[0]-1 {
				tag = last
			}
			nested(b, widths[1:], tag)
		}
		b.WriteByte(']')
	}
	var deep strings.Builder
	deep.WriteString(`{"a":`)
	nested(&deep, []int{2, 20, 20, 20}, "999999")
	deep.WriteString(`}`)
	tests := map[string]workCase{
		"enum behind references": {
			params: `{"type":"object","$defs":{"e":{"enum":[` + ints.String() + `0]}},"properties":{"a":{"type":"array","items":{"allOf":[` + refs(60) + `]}}}}`,
			small:  `{"a":[1,2]}`, large: `{"a":[-1,-1,-1,-1,-1]}`,
			want: "too many values for this tool's schema",
		},
		"pattern behind references": {
			params: `{"type":"object","$defs":{"e":{"pattern":"a{0,500}x"}},"properties":{"a":{"allOf":[` + refs(240) + `]}}}`,
			small:  `{"a":"x"}`, large: `{"a":"` + strings.Repeat("a", 1000) + `"}`,
			want: "too much text for this tool's schema",
		},
		"format behind references": {
			params: `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","definitions":{"e":{"format":"json-pointer"}},"properties":{"a":{"allOf":[` +
				strings.ReplaceAll(refs(240), "$defs", "definitions") + `]}}}`,
			small: `{"a":"/a/b"}`, large: `{"a":"` + strings.Repeat("/a", 450_000) + `"}`,
			want: "too much text for this tool's schema",
		},
		"minimum behind references": {
			params: `{"type":"object","$defs":{"e":{"minimum":-1}},"properties":{"a":{"type":"array","items":{"allOf":[` + refs(240) + `]}}}}`,
			small:  numbers(10), large: numbers(400),
			want: "numbers too large for this tool's schema",
		},
		"numbers against an enum": {
			// The empty object keeps the enum from the shape checker, which reports a
			// failing document without the library.
			params: `{"type":"object","properties":{"a":{"type":"array","items":{"enum":[` + ints.String() + `{},0]}}}}`,
			small:  `{"a":[1,2,3]}`, large: numbers(100),
			want: "numbers too large for this tool's schema",
		},
		"uniqueItems in nested arrays": {
			params: `{"type":"object","properties":{"a":{"$ref":"#/$defs/t"}},"$defs":{"t":{"type":["array","integer"],"uniqueItems":true,"items":{"$ref":"#/$defs/t"}}}}`,
			small:  `{"a":[[1,2],[1,3],[[4],[5]]]}`, large: deep.String(),
			want: "too many values for this tool's schema",
		},
	}
	checkWorkBounds(t, tests)
}

// Enums, patterns, required lists, uniqueItems, format "regex" and exact number checks
// cost per value, byte or object: a 12,000-number enum made each array item cost 30 ms, ".{0,1000}x" took 29 s
// against a 1 MB string, an 8,000-name required list 28 s for 100 KB of empty objects,
// 20 near-identical 50 KB uniqueItems 10 s, 33,000 format-regex strings 20 s, and a
// megabyte of 1e400 against multipleOf ~2 s.
// Documents within the work those allow validate as before; larger ones are refused
// before the library runs.
func TestValidationWorkCountsCostlyKeywords(t *testing.T) {
	var enum, names, emptyLists strings.Builder
	for i := range 2000 {
		enum.WriteString(strconv.Itoa(i) + ",")
		names.WriteString(`"k` + strconv.Itoa(i) + `",`)
		emptyLists.WriteString(`"k` + strconv.Itoa(i) + `":[],`)
	}
	tests := map[string]workCase{
		// The empty object keeps the enum from the shape checker, which finds a number
		// among the members in one lookup: the library compares it with each. An
		// unknown keyword keeps the others from it too: the shape reports a failing
		// document without the library.
		"numeric enum": {
			params: `{"type":"object","properties":{"a":{"type":"array","items":{"enum":[` + enum.String() + `{},-1]}}}}`,
			small:  `{"a":[1,2,3]}`, large: `{"a":[` + strings.Repeat(`1,`, 999) + `1]}`,
			want: "too many values for this tool's schema",
		},
		"pattern": {
			params: `{"type":"object","properties":{"s":{"type":"string","pattern":".{0,1000}x"}}}`,
			small:  `{"s":"` + strings.Repeat("a", 1000) + `x"}`, large: `{"s":"` + strings.Repeat("a", 100_000) + `x"}`,
			want: "too much text for this tool's schema",
		},
		"required": {
			params: `{"type":"object","properties":{"a":{"type":"array","items":{"type":"object","x-no-shape":true,"required":[` + names.String() + `"z"]}}}}`,
			small:  `{"a":[{},{}]}`, large: `{"a":[` + strings.Repeat(`{},`, 999) + `{}]}`,
			want: "too many objects for this tool's schema",
		},
		"dependentRequired": {
			params: `{"type":"object","properties":{"a":{"type":"array","items":{"type":"object","x-no-shape":true,"dependentRequired":{"x":[` + names.String() + `"z"]}}}}}`,
			small:  `{"a":[{"x":1}]}`, large: `{"a":[` + strings.Repeat(`{"x":1},`, 999) + `{"x":1}]}`,
			want: "too many objects for this tool's schema",
		},
		"uniqueItems": {
			params: `{"type":"object","properties":{"a":{"type":"array","uniqueItems":true}}}`,
			small:  `{"a":[[1,2],[1,3]]}`, large: `{"a":[` + strings.Repeat(`[`+strings.Repeat(`1,`, 2999)+`1],`, 19) + `[2]]}`,
			want: "too many values for this tool's schema",
		},
		"format regex": {
			params: `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"a":{"type":"array","items":{"type":"string","format":"regex"}}}}`,
			small:  `{"a":["^a+$"]}`, large: `{"a":[` + strings.Repeat(`"a",`, 1999) + `"a"]}`,
			want: "too many values for this tool's schema",
		},
		"huge exponents": {
			params: `{"type":"object","properties":{"a":{"type":"array","items":{"type":"number","x-no-shape":true,"multipleOf":0.7}}}}`,
			small:  `{"a":[1.4,2.1]}`, large: `{"a":[` + strings.Repeat(`1e400,`, 79_999) + `1e400]}`,
			want: "numbers too large for this tool's schema",
		},
		"pattern on keys": {
			params: `{"type":"object","patternProperties":{"^[a-z]{0,1000}$":{"type":"integer"}}}`,
			small:  `{"abc":1}`, large: `{"` + strings.Repeat("a", 100_000) + `":1}`,
			want: "too much text for this tool's schema",
		},
		// Every name of dependentRequired (or dependencies) is looked up in every object,
		// whatever its list: 6,000 names with empty lists took 11 s (the shape) to 18 s
		// (the library) for 800 KB of one-member objects.
		"dependentRequired names": {
			params: `{"type":"object","properties":{"a":{"type":"array","items":{"type":"object","dependentRequired":{` + emptyLists.String() + `"z":[]}}}}}`,
			small:  `{"a":[{"x":1}]}`, large: `{"a":[` + strings.Repeat(`{"x":1},`, 999) + `{"x":1}]}`,
			want: "too many objects for this tool's schema",
		},
		"dependentRequired names, no shape": {
			params: `{"type":"object","properties":{"a":{"type":"array","items":{"type":"object","x-no-shape":true,"dependentRequired":{` + emptyLists.String() + `"z":[]}}}}}`,
			small:  `{"a":[{"x":1}]}`, large: `{"a":[` + strings.Repeat(`{"x":1},`, 999) + `{"x":1}]}`,
			want: "too many objects for this tool's schema",
		},
		"dependencies names": {
			params: `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"a":{"type":"array","items":{"type":"object","dependencies":{` + emptyLists.String() + `"z":[]}}}}}`,
			small:  `{"a":[{"x":1}]}`, large: `{"a":[` + strings.Repeat(`{"x":1},`, 999) + `{"x":1}]}`,
			want: "too many objects for this tool's schema",
		},
	}
	checkWorkBounds(t, tests)
}

// A const or enum member that is an array or object is compared with a value at every
// place it applies, walking the value down as deep as the member goes: with a recursive
// schema, each value is walked again for every array or object above it. A 58-level
// const behind "not" under "items" made a 580 KB document of 290,000 values take 5 s,
// priced as 870,000 comparisons rather than the 26 million it takes. Such a value is
// priced once per enclosing array or object the member reaches; a member that is flat
// costs as before.
func TestValidationWorkCountsDeepComparisons(t *testing.T) {
	// nest is k arrays, each m zeros followed by the next, around m zeros.
	nest := func(k, m int) string {
		zeros := strings.TrimSuffix(strings.Repeat("0,", m), ",")
		s := "[" + zeros + "]"
		for range k {
			s = "[" + zeros + "," + s + "]"
		}
		return s
	}
	// copies is an object of n values.
	copies := func(n int, v string) string {
		var b strings.Builder
		for i := range n {
			b.WriteString(`,"k` + strconv.Itoa(i) + `":` + v)
		}
		return "{" + b.String()[1:] + "}"
	}
	recursive := func(keyword string) string {
		return `{"type":"object","additionalProperties":{"$ref":"#/$defs/n"},"$defs":{"n":{"not":{` + keyword +
			`},"items":{"$ref":"#/$defs/n"}}}}`
	}
	member := nest(58, 500)
	tests := map[string]workCase{
		"deep const": {
			params: recursive(`"const":` + member),
			small:  copies(10, nest(57, 2)), large: copies(10, nest(57, 500)),
			want: "too many values for this tool's schema",
		},
		"deep enum member": {
			params: recursive(`"enum":[1,` + member + `]`),
			small:  copies(10, nest(57, 2)), large: copies(3, nest(57, 500)),
			want: "too many values for this tool's schema",
		},
		"flat const": {
			params: recursive(`"const":[0,0]`),
			small:  copies(3, nest(57, 500)), large: copies(10, nest(57, 500)),
			want: "too many values for this tool's schema",
		},
	}
	checkWorkBounds(t, tests)
}

// A $dynamicRef (or a $recursiveRef) to a dynamic anchor is resolved by walking every
// subschema applied on the way from the document's root to the value: half a million
// numbers 62 arrays deep took 1.9 s (15 s at a depth limit of 1,000) to check against
// a recursive schema applying 2 subschemas per place. The walks are priced by depth.
func TestValidationWorkCountsDynamicScopes(t *testing.T) {
	deep := func(depth, n int) string {
		return `{"a":` + strings.Repeat("[", depth) + strings.TrimSuffix(strings.Repeat("0,", n), ",") + strings.Repeat("]", depth) + `}`
	}
	tests := map[string]workCase{
		"dynamicRef": {
			params: `{"type":"object","additionalProperties":{"$ref":"#/$defs/n"},"$defs":{"n":{"$dynamicAnchor":"node","items":{"$dynamicRef":"#node"}}}}`,
			small:  deep(62, 10_000), large: deep(62, 490_000),
			want: "too deep for this tool's schema",
		},
		"recursiveRef": {
			params: `{"$schema":"https://json-schema.org/draft/2019-09/schema","type":"object","additionalProperties":{"$ref":"#/$defs/n"},` +
				`"$defs":{"n":{"$id":"n.json","$recursiveAnchor":true,"items":{"$recursiveRef":"#"}}}}`,
			small: deep(62, 10_000), large: deep(62, 490_000),
			want: "too deep for this tool's schema",
		},
	}
	checkWorkBounds(t, tests)
}

// The library reads a count keyword (minLength, maxItems, …) as a machine int: a count
// too large for one wrapped around (1e19 read as negative, 2^64 as 0), so the tool
// accepted arguments its schema refuses, or refused every one. Such a count is refused
// at registration, naming the keyword and where it is; the largest int is still fine.
func TestSchemaCountsBeyondIntRefused(t *testing.T) {
	r := newRegistry(t)
	for _, c := range []struct{ keyword, place, value string }{
		{"maxLength", `"s":{"type":"string",%s}`, "10000000000000000000"},
		{"minLength", `"s":{"type":"string",%s}`, "1e19"},
		{"minLength", `"s":{"type":"string",%s}`, "18446744073709551616"},
		{"minItems", `"s":{"type":"array",%s}`, "18446744073709551616.0"},
		{"maxItems", `"s":{"type":"array",%s}`, "1e300"},
		{"minProperties", `"s":{"type":"object",%s}`, "1e19"},
		{"maxProperties", `"s":{"type":"object",%s}`, "1e19"},
		{"minContains", `"s":{"type":"array","contains":{},%s}`, "1e19"},
		{"maxContains", `"s":{"type":"array","contains":{},%s}`, "1e19"},
	} {
		prop := fmt.Sprintf(c.place, `"`+c.keyword+`":`+c.value)
		schema := `{"type":"object","properties":{` + prop + `}}`
		_, err := r.Register("", withParams("counts", schema), "p1")
		if !errors.Is(err, registry.ErrLimit) || !strings.Contains(err.Error(), `tool "counts" parameters`) ||
			!strings.Contains(err.Error(), c.keyword) || !strings.Contains(err.Error(), "/properties/s") {
			t.Errorf("Register(%s) = %v, want ErrLimit naming the tool, %s and /properties/s", schema, err, c.keyword)
		}
		r.RemoveOwner("p1")
	}
	// Reached through a $ref into a keyword the library does not know: still a schema.
	_, err := r.Register("", withParams("counts", `{"type":"object","x":{"maxLength":1e19},"properties":{"s":{"$ref":"#/x"}}}`), "p1")
	if !errors.Is(err, registry.ErrLimit) || !strings.Contains(err.Error(), "#/x") {
		t.Errorf("Register($ref to a count beyond int) = %v, want ErrLimit naming #/x", err)
	}
	// An enum or const member is a value, not a schema: its numbers are not counts.
	e := mustRegister(t, r, "", withParams("values", `{"type":"object","properties":{"s":{"type":"string","maxLength":9223372036854775807},"e":{"enum":[{"minLength":1e19}]}}}`), "p1")
	if err := e.ValidateArguments(`{"s":"x","e":{"minLength":1e19}}`); err != nil {
		t.Errorf("ValidateArguments(within maxLength 2^63-1, enum member) = %v, want nil", err)
	}
}

// A refused schema's message is logged and answered for every tool of a register
// message: it names the offending reference or place, cut, never the whole key or
// reference the provider wrote. A 60 KB key was repeated whole, and three times over
// when percent-encoded (a 28 KB key of emoji made an 85 KB message).
func TestSchemaErrorsAreBounded(t *testing.T) {
	long := strings.Repeat("k", 60_000)
	emoji := strings.Repeat("😀", 7_000)
	tests := map[string]string{
		"remote ref":        `{"type":"object","properties":{"a":{"$ref":"http://x/` + long + `"}}}`,
		"remote ref at key": `{"type":"object","properties":{"` + long + `":{"$ref":"http://x/"}}}`,
		"missing $defs":     `{"type":"object","properties":{"a":{"$ref":"#/$defs/` + long + `"}}}`,
		"missing anchor":    `{"type":"object","properties":{"a":{"$ref":"#` + long + `"}}}`,
		"bad json pointer":  `{"type":"object","properties":{"a":{"$ref":"#/` + strings.Repeat("~2", 30_000) + `"}}}`,
		"$schema of itself": `{"type":"object","$schema":"toolsd://schema/root.json#` + long + `"}`,
		"unknown $schema":   `{"type":"object","$schema":"http://x/` + long + `"}`,
		"ref cycle":         `{"type":"object","properties":{"` + long[:30_000] + `":{"$ref":"#/properties/` + long[:30_000] + `"}}}`,
		"ref cycle, emoji":  `{"type":"object","properties":{"` + emoji + `":{"$ref":"#/properties/` + emoji + `"}}}`,
		"count over int":    `{"type":"object","properties":{"` + long + `":{"minLength":1e30}}}`,
		"fanout":            `{"type":"object","properties":{"` + long[:30_000] + `":{"anyOf":[` + strings.TrimSuffix(strings.Repeat(`{"$ref":"#/$defs/e"},`, 501), ",") + `]}},"$defs":{"e":{}}}`,
	}
	for name, params := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := newRegistry(t).Register("", withParams("t", params), "p1")
			if !errors.Is(err, registry.ErrInvalidSchema) && !errors.Is(err, registry.ErrLimit) {
				t.Fatalf("Register(%s) = %.300v, want ErrInvalidSchema or ErrLimit", name, err)
			}
			if n := len(err.Error()); n > 1024 {
				t.Errorf("Register(%s) error is %d bytes, want at most 1024: %.300s", name, n, err)
			}
		})
	}
}

// nestedSchema describes objects levels deep, {"a":{"a":…{"a":"x"}}}: each level is a
// schema and its "properties", so the schema nests 2×levels+1 deep (+1 with an
// "examples" array on the innermost schema).
func nestedSchema(levels int, examples bool) (params, args string) {
	params, args = `{"type":"string"}`, `"x"`
	if examples {
		params = `{"type":"string","examples":["x"]}`
	}
	for range levels {
		params = `{"type":"object","properties":{"a":` + params + `}}`
		args = `{"a":` + args + `}`
	}
	return params, args
}

// A schema may nest twice as deep as the documents it validates, plus one, and at least
// as deep as the default 64: a schema describes each level of an object with two
// (the object's schema and its "properties"). Schemas were decoded at depth 64 whatever
// the argument depth, so one describing arguments deeper than 31 levels was refused
// however far limits.max_json_depth was raised.
func TestSchemaDepthFollowsDocumentDepth(t *testing.T) {
	tests := map[string]struct {
		docDepth int
		levels   int
		examples bool
		want     error
	}{
		"raised, as deep as the arguments":  {docDepth: 100, levels: 100},
		"raised, one level deeper":          {docDepth: 100, levels: 100, examples: true, want: registry.ErrLimit},
		"default, as deep as the arguments": {docDepth: 64, levels: 64},
		"default, one level deeper":         {docDepth: 64, levels: 64, examples: true, want: registry.ErrLimit},
		"lowered, 64 levels":                {docDepth: 3, levels: 31, examples: true},
		"lowered, 65 levels":                {docDepth: 3, levels: 32, want: registry.ErrLimit},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			depth := jsonx.Limits{MaxDepth: tc.docDepth}
			r := newRegistry(t, registry.WithLimits(registry.Limits{Args: depth, Output: depth}))
			params, args := nestedSchema(tc.levels, tc.examples)
			d := withParams("t", params)
			d.OutputSchema = []byte(params)
			e, err := r.Register("", d, "")
			if tc.want != nil {
				want := fmt.Sprintf("nests deeper than %d levels", max(64, 2*tc.docDepth+1))
				if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), want) {
					t.Fatalf("Register(%d levels) = %v, want %v saying %q", tc.levels, err, tc.want, want)
				}
				return
			}
			if err != nil {
				t.Fatalf("Register(%d levels) = %v, want nil", tc.levels, err)
			}
			if tc.levels > tc.docDepth {
				return
			}
			if err := e.ValidateArguments(args); err != nil {
				t.Errorf("ValidateArguments(%d levels) = %v, want nil", tc.levels, err)
			}
			if err := e.ValidateOutput([]byte(args)); err != nil {
				t.Errorf("ValidateOutput(%d levels) = %v, want nil", tc.levels, err)
			}
		})
	}
}
