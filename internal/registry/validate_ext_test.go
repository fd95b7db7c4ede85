package registry_test

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolsd/toolsd/internal/jsonx"
	"github.com/toolsd/toolsd/internal/registry"
)

const readFileSchema = `{"type":"object","properties":{` +
	`"path":{"type":"string","minLength":1},` +
	`"offset":{"type":"integer","minimum":0},` +
	`"limit":{"type":"number"},` +
	`"mode":{"enum":["text","binary"]},` +
	`"tags":{"type":"array","items":{"type":"string"}}},` +
	`"required":["path"],"additionalProperties":false}`

func TestValidateArguments(t *testing.T) {
	tests := map[string]struct {
		args       string
		message    string
		violations []registry.Violation
		jsonCause  error
	}{
		"valid":          {args: `{"path":"/tmp/x","offset":0,"limit":1.5,"tags":["a"]}`},
		"big integer ok": {args: `{"path":"p","offset":123456789012345678901234567890}`},
		"type": {
			args:       `{"path":"p","limit":"10"}`,
			message:    "invalid arguments: /limit: expected number, got string",
			violations: []registry.Violation{{Pointer: "/limit", Message: "expected number, got string"}},
		},
		"nested pointer": {
			args:       `{"path":"p","tags":["a",2]}`,
			message:    "invalid arguments: /tags/1: expected string, got number",
			violations: []registry.Violation{{Pointer: "/tags/1", Message: "expected string, got number"}},
		},
		"missing required at root": {
			args:       `{}`,
			message:    "invalid arguments: missing property 'path'",
			violations: []registry.Violation{{Pointer: "", Message: "missing property 'path'"}},
		},
		"several sorted by pointer": {
			args:    `{"offset":-1,"mode":"x","extra":true}`,
			message: "invalid arguments: additional properties 'extra' not allowed; missing property 'path'; /mode: value must be one of 'text', 'binary'; and 1 more",
			violations: []registry.Violation{
				{Pointer: "", Message: "additional properties 'extra' not allowed"},
				{Pointer: "", Message: "missing property 'path'"},
				{Pointer: "/mode", Message: "value must be one of 'text', 'binary'"},
				{Pointer: "/offset", Message: "minimum: got -1, want 0"},
			},
		},
		"not an object": {
			args:       `["path"]`,
			message:    "invalid arguments: expected object, got array",
			violations: []registry.Violation{{Pointer: "", Message: "expected object, got array"}},
		},
		"float where integer": {
			args:       `{"path":"p","offset":1.5}`,
			message:    "invalid arguments: /offset: expected integer, got number",
			violations: []registry.Violation{{Pointer: "/offset", Message: "expected integer, got number"}},
		},
		"duplicate key": {
			args:      `{"path":"a","path":"b"}`,
			message:   `invalid arguments: malformed JSON: duplicate key "path" at offset 12`,
			jsonCause: jsonx.ErrDuplicateKey,
		},
		"truncated": {
			args:      `{"path":"a`,
			message:   "invalid arguments: malformed JSON: unexpected end of input in string literal at offset 10",
			jsonCause: jsonx.ErrSyntax,
		},
		"invalid utf-8": {
			args:      "{\"path\":\"\xff\"}",
			message:   "invalid arguments: malformed JSON: invalid UTF-8 byte 0xff at offset 9",
			jsonCause: jsonx.ErrInvalidUTF8,
		},
		"empty": {
			args:      ``,
			message:   "invalid arguments: malformed JSON: empty input at offset 0",
			jsonCause: jsonx.ErrSyntax,
		},
		"pointer escaping": {
			args:    `{"path":"p","a/b~c":1}`,
			message: "invalid arguments: additional properties 'a/b~c' not allowed",
		},
	}
	r := newRegistry(t)
	e := mustRegister(t, r, "", withParams("read_file", readFileSchema), "")
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := e.ValidateArguments(tc.args)
			if tc.message == "" {
				if err != nil {
					t.Fatalf("ValidateArguments(%s) = %v, want nil", tc.args, err)
				}
				return
			}
			var verr *registry.ValidationError
			if !errors.As(err, &verr) {
				t.Fatalf("ValidateArguments(%s) = %#v, want *ValidationError", tc.args, err)
			}
			if !errors.Is(err, registry.ErrInvalidArguments) {
				t.Errorf("ValidateArguments(%s) does not wrap ErrInvalidArguments", tc.args)
			}
			if err.Error() != tc.message {
				t.Errorf("ValidateArguments(%s) = %q, want %q", tc.args, err, tc.message)
			}
			if tc.violations != nil {
				if diff := cmp.Diff(tc.violations, verr.Violations); diff != "" {
					t.Errorf("Violations mismatch (-want +got):\n%s", diff)
				}
				if verr.Pointer != tc.violations[0].Pointer || verr.Message != tc.violations[0].Message {
					t.Errorf("Pointer, Message = %q, %q, want the first violation", verr.Pointer, verr.Message)
				}
			}
			if tc.jsonCause != nil && !errors.Is(err, tc.jsonCause) {
				t.Errorf("ValidateArguments(%s) does not wrap %v", tc.args, tc.jsonCause)
			}
		})
	}
}

func TestValidateArgumentsLimits(t *testing.T) {
	r := newRegistry(t, registry.WithLimits(registry.Limits{Args: jsonx.Limits{MaxBytes: 32, MaxDepth: 3}}))
	e := mustRegister(t, r, "", def("t"), "")
	tests := map[string]struct {
		args string
		want error
	}{
		"fits":      {args: `{"a":[[1]]}`},
		"too large": {args: `{"a":"0123456789012345678901234567890"}`, want: jsonx.ErrTooLarge},
		"too deep":  {args: `{"a":[[[1]]]}`, want: jsonx.ErrTooDeep},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := e.ValidateArguments(tc.args)
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("ValidateArguments(%s) = %v, want %v", tc.args, err, tc.want)
			}
		})
	}
}

// Numbers no float64 needs are refused before the schema library sees them: it computes
// with exact rationals, where 1e999999 costs seconds and a larger exponent made it panic.
func TestValidateArgumentsNumberRange(t *testing.T) {
	r := newRegistry(t)
	for name, tc := range map[string]struct{ params, args string }{
		"minimum":     {`{"type":"object","properties":{"n":{"type":"number","minimum":0}}}`, `{"n":1e9999999}`},
		"integer":     {`{"type":"object","properties":{"n":{"type":"integer"}}}`, `{"n":1e999999}`},
		"uniqueItems": {`{"type":"object","properties":{"a":{"type":"array","uniqueItems":true}}}`, `{"a":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,1e9999999]}`},
		"long digits": {`{"type":"object","properties":{"n":{"type":"integer"}}}`, `{"n":` + strings.Repeat("7", 200) + `}`},
	} {
		t.Run(name, func(t *testing.T) {
			e := mustRegister(t, r, "", withParams("t_"+strings.ReplaceAll(name, " ", "_"), tc.params), "")
			if err := e.ValidateArguments(tc.args); !errors.Is(err, registry.ErrInvalidArguments) || !strings.Contains(err.Error(), "numeric literal") {
				t.Errorf("ValidateArguments(%.60s…) = %v, want ErrInvalidArguments about the number", tc.args, err)
			}
		})
	}
}

// A document every value of which is in a large string enum was accepted by comparing
// each value with the members one by one, before any bound on validation work: 400,000
// members and a 16 MiB document of two million such values took most of an hour. Each
// value now costs one lookup, so this test finishes at once rather than running into the
// test timeout; a value outside the enum is still refused.
func TestValidateArgumentsLargeStringEnumIsLinear(t *testing.T) {
	const members, values = 400_000, 2_000_000
	r := newRegistry(t, registry.WithLimits(registry.Limits{MaxSchemaBytes: 4 << 20, Args: jsonx.Limits{MaxBytes: 16 << 20}}))
	var enum strings.Builder
	for i := range members {
		enum.WriteString(`"` + strconv.Itoa(i) + `",`)
	}
	enum.WriteString(`"x"`)
	e := mustRegister(t, r, "", withParams("t", `{"type":"object","properties":{"a":{"type":"array","items":{"enum":[`+enum.String()+`]}}}}`), "")
	args := `{"a":[` + strings.Repeat(`"x",`, values-1) + `"x"]}`
	if err := e.ValidateArguments(args); err != nil {
		t.Errorf("ValidateArguments(%d values in the enum) = %v, want nil", values, err)
	}
	if err := e.ValidateArguments(`{"a":["x","y"]}`); !errors.Is(err, registry.ErrInvalidArguments) {
		t.Errorf(`ValidateArguments(["x","y"]) = %v, want ErrInvalidArguments`, err)
	}
}

// A key failing propertyNames is named: the library reports it where no pointer names
// it (the key is validated on its own), so "maxLength: got 7, want 3" did not say which
// key of which object. A schema's patternProperties key is a property name too.
func TestValidationNamesFailingPropertyName(t *testing.T) {
	r := newRegistry(t)
	e := mustRegister(t, r, "", withParams("t", `{"type":"object","properties":{"a":{"type":"object","propertyNames":{"maxLength":3}}}}`), "")
	err := e.ValidateArguments(`{"a":{"toolong":1,"ok":2}}`)
	if !errors.Is(err, registry.ErrInvalidArguments) || !strings.Contains(err.Error(), `property name "toolong"`) {
		t.Errorf("ValidateArguments(key toolong) = %v, want ErrInvalidArguments naming the key", err)
	}
	_, err = r.Register("", withParams("p", `{"type":"object","patternProperties":{"^ok$":{},"(?=x)":{}}}`), "")
	if !errors.Is(err, registry.ErrInvalidSchema) || !strings.Contains(err.Error(), `property name "(?=x)"`) {
		t.Errorf("Register(patternProperties (?=x)) = %v, want ErrInvalidSchema naming the pattern", err)
	}
}

// TestNumberBoundViolationsSayTheBound: a number outside a minimum, maximum,
// exclusiveMinimum or exclusiveMaximum is reported with both numbers as written, however
// large or precise, and an exclusive bound says the value must differ from it. The
// library's words ("exclusiveMinimum: got 0, want 0") told the model that the value it
// sent was the one wanted, and rounded numbers past float64's precision, so that a value
// one over an integer maximum read as equal to it.
func TestNumberBoundViolationsSayTheBound(t *testing.T) {
	for name, tc := range map[string]struct {
		schema, args, want string
	}{
		"exclusive minimum": {
			schema: `{"exclusiveMinimum":0}`, args: `0`,
			want: "exclusiveMinimum: got 0, want more than 0",
		},
		"exclusive maximum": {
			schema: `{"exclusiveMaximum":1.5}`, args: `1.5`,
			want: "exclusiveMaximum: got 1.5, want less than 1.5",
		},
		"minimum": {
			schema: `{"minimum":0}`, args: `-1`,
			want: "minimum: got -1, want 0",
		},
		"maximum past float64's precision": {
			schema: `{"maximum":9007199254740993}`, args: `9007199254740994`,
			want: "maximum: got 9007199254740994, want 9007199254740993",
		},
		"large exponent": {
			schema: `{"maximum":1e21}`, args: `2e21`,
			want: "maximum: got 2000000000000000000000, want 1000000000000000000000",
		},
		"fraction": {
			schema: `{"minimum":0.1}`, args: `0.05`,
			want: "minimum: got 0.05, want 0.1",
		},
		"multipleOf": {
			schema: `{"multipleOf":0.2}`, args: `0.5`,
			want: "multipleOf: got 0.5, want a multiple of 0.2",
		},
		"huge exponent": {
			schema: `{"maximum":1e300}`, args: `15e399`,
			want: "maximum: got 1.5e400, want 1e300",
		},
		"tiny fraction": {
			schema: `{"minimum":1.25e-300}`, args: `1e-300`,
			want: "minimum: got 1e-300, want 1.25e-300",
		},
		"exclusive with a keyword the shape checker leaves to the library": {
			schema: `{"exclusiveMinimum":0.25,"dependentSchemas":{"x":{}}}`, args: `0.25`,
			want: "exclusiveMinimum: got 0.25, want more than 0.25",
		},
	} {
		t.Run(name, func(t *testing.T) {
			err := validateUnderN(t, tc.schema, tc.args)
			var verr *registry.ValidationError
			if !errors.As(err, &verr) {
				t.Fatalf("ValidateArguments(%s) = %v, want *ValidationError", tc.args, err)
			}
			got := make([]string, 0, len(verr.Violations))
			for _, v := range verr.Violations {
				got = append(got, v.Message)
			}
			if !slices.Contains(got, tc.want) {
				t.Errorf("ValidateArguments(%s) violations = %q, want one of %q", tc.args, got, tc.want)
			}
		})
	}
}

// TestFalseAndNotViolationsSayWhatIsWrong: a value where the schema allows none (a
// false subschema: a property, a tuple's extra item, an unevaluated property) and one
// that matches a "not" are reported in words the model can act on. The library's words,
// "false schema" and "'not' failed", name the schema's mechanics, not the mistake.
func TestFalseAndNotViolationsSayWhatIsWrong(t *testing.T) {
	for name, tc := range map[string]struct {
		schema, args, want string
	}{
		"false property":             {schema: `{"type":"object","properties":{"x":false}}`, args: `{"x":1}`, want: "/n/x: no value is allowed here"},
		"item past a tuple":          {schema: `{"type":"array","prefixItems":[{}],"items":false}`, args: `[1,2]`, want: "/n/1: no value is allowed here"},
		"unevaluated property":       {schema: `{"type":"object","unevaluatedProperties":false}`, args: `{"a":1}`, want: "/n/a: no value is allowed here"},
		"false pattern property":     {schema: `{"type":"object","patternProperties":{"^a":false}}`, args: `{"ab":1}`, want: "/n/ab: no value is allowed here"},
		"false property names":       {schema: `{"type":"object","propertyNames":false}`, args: `{"a":1}`, want: `property name "a": no value is allowed here`},
		"not":                        {schema: `{"not":{"type":"string"}}`, args: `"a"`, want: "/n: must not match the schema under \"not\""},
		"not, on the library's path": {schema: `{"not":{"type":"string"},"dependentSchemas":{"x":{}}}`, args: `"a"`, want: "/n: must not match the schema under \"not\""},
	} {
		t.Run(name, func(t *testing.T) { checkViolationSays(t, tc.schema, tc.args, tc.want) })
	}
}

// TestConstAndOneOfViolationsSayWhatIsWanted: a value that is not a "const" or
// an "enum" holding an object or array is told the values wanted, as one of scalars is, and a value matching
// several or none of a "oneOf" is told that it must match exactly one. The library
// said "'const' failed", "'enum' failed" and "'oneOf' failed, subschemas 0, 1 matched".
func TestConstAndOneOfViolationsSayWhatIsWanted(t *testing.T) {
	for name, tc := range map[string]struct {
		schema, args, want string
	}{
		"object const":        {schema: `{"const":{"a":[1,"x"]}}`, args: `{"a":2}`, want: `/n: value must be {"a":[1,"x"]}`},
		"array const":         {schema: `{"const":[1, 2]}`, args: `[2,1]`, want: `/n: value must be [1,2]`},
		"exact numbers":       {schema: `{"const":[12345678901234567890123, 1.50]}`, args: `[1]`, want: `/n: value must be [12345678901234567890123,1.50]`},
		"scalar const":        {schema: `{"const":"x"}`, args: `"y"`, want: `/n: value must be 'x'`},
		"enum with an object": {schema: `{"enum":[{"a":"<&>"},[1.0],"x",null]}`, args: `2`, want: `/n: value must be one of {"a":"<&>"}, [1.0], "x", null`},
		"large enum of objects": {
			schema: `{"enum":[` + strings.Repeat(`{"k":"`+strings.Repeat("v", 100)+`"},`, 400) + `{}]}`, args: `2`,
			want: `/n: value must be one of {"k":"vvvv`,
		},
		"oneOf, several": {schema: `{"oneOf":[{"type":"integer"},{"type":"number"}]}`, args: `1`, want: `/n: matches schemas 0 and 1 under "oneOf"; it must match exactly one`},
		"oneOf, none, on the library's path": {
			schema: `{"oneOf":[{"not":{}},{"not":{}}],"dependentSchemas":{"x":{}}}`, args: `1`,
			want: `/n: must not match the schema under "not"`,
		},
	} {
		t.Run(name, func(t *testing.T) { checkViolationSays(t, tc.schema, tc.args, tc.want) })
	}
}

// TestCountViolationsAreWrittenAsJSONWrites: a length, item or property count is
// written as JSON writes numbers, without the thousands separators the library's
// English printer put in ("maxLength: got 1,234, want 1,000"), which read as two values
// in a message about JSON.
func TestCountViolationsAreWrittenAsJSONWrites(t *testing.T) {
	items := `[` + strings.Repeat(`1,`, 1233) + `1]`
	props := make([]string, 1234)
	for i := range props {
		props[i] = `"p` + strconv.Itoa(i) + `":1`
	}
	for name, tc := range map[string]struct {
		schema, args, want string
	}{
		"maxLength":     {schema: `{"maxLength":1000}`, args: `"` + strings.Repeat("a", 1234) + `"`, want: "maxLength: got 1234, want 1000"},
		"minLength":     {schema: `{"minLength":1000}`, args: `"a"`, want: "minLength: got 1, want 1000"},
		"maxItems":      {schema: `{"maxItems":1000}`, args: items, want: "maxItems: got 1234, want 1000"},
		"minItems":      {schema: `{"minItems":2000}`, args: `[1]`, want: "minItems: got 1, want 2000"},
		"maxProperties": {schema: `{"maxProperties":1000}`, args: `{` + strings.Join(props, ",") + `}`, want: "maxProperties: got 1234, want 1000"},
		"minProperties": {schema: `{"minProperties":1000}`, args: `{}`, want: "minProperties: got 0, want 1000"},
	} {
		t.Run(name, func(t *testing.T) {
			err := validateUnderN(t, tc.schema, tc.args)
			if err == nil || !strings.Contains(err.Error(), "/n: "+tc.want) {
				t.Errorf("ValidateArguments(%.40s…) = %.200v, want it to say %q", tc.args, err, tc.want)
			}
		})
	}
}

// validateUnderN validates {"n": args} against an object whose property n has schema.
func validateUnderN(t *testing.T, schema, args string) error {
	t.Helper()
	e := mustRegister(t, newRegistry(t), "", withParams("n", `{"type":"object","properties":{"n":`+schema+`}}`), "")
	return e.ValidateArguments(`{"n":` + args + `}`)
}

// checkViolationSays checks that {"n": args} fails schema with a message saying want,
// cut short where it lists values.
func checkViolationSays(t *testing.T, schema, args, want string) {
	t.Helper()
	err := validateUnderN(t, schema, args)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("ValidateArguments(%s) = %v, want it to say %q", args, err, want)
	}
	if err != nil && len(err.Error()) > 2<<10 {
		t.Errorf("ValidateArguments(%s) is %d bytes, want the wanted values cut short", args, len(err.Error()))
	}
}
