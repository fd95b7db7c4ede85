package provider_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolsd/toolsd/pkg/provider"
)

// schemaOf derives the registered argument schema of a tool taking A.
func schemaOf[A any](opts ...provider.ToolOption) string {
	return provider.NewTool("t", "d", func(context.Context, provider.Call, A) (string, error) { return "", nil }, opts...).Schema()
}

type Inner struct {
	Z int `json:"z"`
}

type Embedded struct {
	E1 string `json:"e1" description:"from the embedded struct"`
}

type everything struct {
	Embedded
	S        string           `json:"s"`
	B        bool             `json:"b"`
	I        int64            `json:"i"`
	U        uint8            `json:"u"`
	F        float32          `json:"f"`
	List     []string         `json:"list"`
	Arr      [2]int           `json:"arr"`
	Map      map[string]Inner `json:"map"`
	AnyMap   map[string]any   `json:"any_map"`
	Nested   Inner            `json:"nested"`
	Ptr      *Inner           `json:"ptr"`
	When     time.Time        `json:"when"`
	Blob     []byte           `json:"blob"`
	Any      any              `json:"any"`
	Raw      json.RawMessage  `json:"raw"`
	NoTag    string
	Skipped  string `json:"-"`
	internal string //nolint:unused // proves unexported fields are skipped
}

type tagged struct {
	Mode    string   `json:"mode" jsonschema:"enum=fast|slow,default=fast,description=How to run\\, roughly."`
	Level   int      `json:"level,omitempty" jsonschema:"minimum=0,maximum=10,enum=1|2|3"`
	Ratio   float64  `json:"ratio" jsonschema:"exclusiveMinimum=0,exclusiveMaximum=1.5,optional"`
	Name    string   `json:"name,omitempty" jsonschema:"required,minLength=1,maxLength=64,pattern=^[a-z]+$,title=Name"`
	Tags    []string `json:"tags,omitzero" jsonschema:"minItems=1,maxItems=3"`
	Email   string   `json:"email" jsonschema:"format=email" description:"ignored when jsonschema says description"`
	On      bool     `json:"on" jsonschema:"default=true"`
	Comment string   `json:"comment" description:"Free text: <b>bold</b> & \"quoted\"."`
}

type strictArgs struct {
	A     string `json:"a"`
	Inner Inner  `json:"inner"`
}

func TestDerivedSchemas(t *testing.T) {
	for name, tc := range map[string]struct {
		schema string
		want   string
	}{
		"empty struct": {schemaOf[struct{}](), `{"type":"object","properties":{}}`},
		"pointer to struct": {schemaOf[*struct {
			Text string `json:"text" description:"The text to echo."`
		}](), `{"type":"object","properties":{"text":{"type":"string","description":"The text to echo."}},"required":["text"]}`},
		"every kind": {schemaOf[everything](), `{"type":"object","properties":{` +
			`"e1":{"type":"string","description":"from the embedded struct"},` +
			`"s":{"type":"string"},"b":{"type":"boolean"},"i":{"type":"integer"},"u":{"type":"integer","minimum":0,"maximum":255},"f":{"type":"number"},` +
			`"list":{"type":"array","items":{"type":"string"}},"arr":{"type":"array","items":{"type":"integer"}},` +
			`"map":{"type":"object","additionalProperties":{"type":"object","properties":{"z":{"type":"integer"}},"required":["z"]}},` +
			`"any_map":{"type":"object"},` +
			`"nested":{"type":"object","properties":{"z":{"type":"integer"}},"required":["z"]},` +
			`"ptr":{"type":"object","properties":{"z":{"type":"integer"}},"required":["z"]},` +
			`"when":{"type":"string","format":"date-time"},"blob":{"type":"string","contentEncoding":"base64"},` +
			`"any":{},"raw":{},"NoTag":{"type":"string"}},` +
			`"required":["e1","s","b","i","u","f","list","arr","map","any_map","nested","when","blob","any","raw","NoTag"]}`},
		"tags": {schemaOf[tagged](), `{"type":"object","properties":{` +
			`"mode":{"type":"string","description":"How to run, roughly.","enum":["fast","slow"],"default":"fast"},` +
			`"level":{"type":"integer","enum":[1,2,3],"minimum":0,"maximum":10},` +
			`"ratio":{"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1.5},` +
			`"name":{"type":"string","title":"Name","minLength":1,"maxLength":64,"pattern":"^[a-z]+$"},` +
			`"tags":{"type":"array","minItems":1,"maxItems":3,"items":{"type":"string"}},` +
			`"email":{"type":"string","format":"email","description":"ignored when jsonschema says description"},` +
			`"on":{"type":"boolean","default":true},` +
			`"comment":{"type":"string","description":"Free text: <b>bold</b> & \"quoted\"."}},` +
			`"required":["mode","name","email","on","comment"]}`},
		"json.Number": {schemaOf[struct {
			N json.Number `json:"n" jsonschema:"enum=1|2.5,default=1,minimum=0"`
		}](), `{"type":"object","properties":{"n":{"type":"number","enum":[1,2.5],"default":1,"minimum":0}},"required":["n"]}`},
		"strict": {schemaOf[strictArgs](provider.StrictArguments()), `{"type":"object","properties":{` +
			`"a":{"type":"string"},"inner":{"type":"object","properties":{"z":{"type":"integer"}},"required":["z"],"additionalProperties":false}},` +
			`"required":["a","inner"],"additionalProperties":false}`},
		"sized integers": {schemaOf[sizedArgs](), `{"type":"object","properties":{` +
			`"u":{"type":"integer","minimum":0},"i8":{"type":"integer","minimum":-128,"maximum":127},` +
			`"u16":{"type":"integer","minimum":0,"maximum":65535},"min":{"type":"integer","minimum":5,"maximum":255}},` +
			`"required":["u","i8","u16"]}`},
		"map root": {schemaOf[map[string]int](), `{"type":"object","additionalProperties":{"type":"integer"}}`},
		"integer keys": {schemaOf[intKeyArgs](), `{"type":"object","properties":{` +
			`"i":{"type":"object","propertyNames":{"pattern":"^[+-]?[0-9]+$"},"additionalProperties":{"type":"string"}},` +
			`"u":{"type":"object","propertyNames":{"pattern":"^0*([0-9]|[1-9][0-9]{1,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-4]|65535)$"},"additionalProperties":{"type":"integer"}}},"required":["i","u"]}`},
		"any root": {schemaOf[any](), `{"type":"object"}`},
		"explicit schema kept byte for byte": {
			schemaOf[struct{}](provider.WithSchema(`{ "type": "object", "properties": {"b":{}, "a":{}} }`)),
			`{ "type": "object", "properties": {"b":{}, "a":{}} }`,
		},
	} {
		t.Run(name, func(t *testing.T) {
			if tc.schema != tc.want {
				t.Errorf("schema =\n%s\nwant\n%s", tc.schema, tc.want)
			}
			if !json.Valid([]byte(tc.schema)) {
				t.Errorf("schema %s is not valid JSON", tc.schema)
			}
		})
	}
}

func TestDerivedSchemaIsStable(t *testing.T) {
	first := schemaOf[tagged]()
	for range 20 {
		if got := schemaOf[tagged](); got != first {
			t.Fatalf("schema changed between derivations:\n%s\n%s", first, got)
		}
	}
}

type recursive struct {
	Children []recursive `json:"children"`
}

type (
	tree        map[string]tree
	list        []list
	selfPointer *selfPointer
)

func TestNewToolPanicsOnProgrammingErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		build func()
		want  string
	}{
		"recursive type": {func() { schemaOf[recursive]() }, "recursive type"},
		// Named maps, slices and pointers can contain themselves too: deriving their schema
		// must not recurse (or loop) forever.
		"recursive map":          {func() { schemaOf[struct{ T tree }]() }, "recursive type provider_test.tree"},
		"recursive slice":        {func() { schemaOf[struct{ L list }]() }, "recursive type provider_test.list"},
		"recursive map root":     {func() { schemaOf[tree]() }, "recursive type provider_test.tree"},
		"recursive pointer":      {func() { schemaOf[struct{ P selfPointer }]() }, "recursive type provider_test.selfPointer"},
		"recursive pointer root": {func() { schemaOf[selfPointer]() }, "recursive type provider_test.selfPointer"},
		"channel field": {func() {
			schemaOf[struct {
				C chan int `json:"c"`
			}]()
		}, "has no JSON Schema"},
		"unknown tag key": {func() {
			schemaOf[struct {
				A int `json:"a" jsonschema:"minimun=1"`
			}]()
		}, `unknown jsonschema tag key "minimun"`},
		"enum of the wrong type": {func() {
			schemaOf[struct {
				A int `json:"a" jsonschema:"enum=one|two"`
			}]()
		}, "is not a JSON number"},
		// An enum or default value the field's Go type cannot hold is a typo: the model
		// would be offered a value every call with it fails to decode.
		"enum value out of the type's range": {func() {
			schemaOf[struct {
				A uint8 `json:"a" jsonschema:"enum=1|300"`
			}]()
		}, `enum value "300": 300 is out of range for uint8`},
		"negative default of an unsigned type": {func() {
			schemaOf[struct {
				A uint `json:"a,omitempty" jsonschema:"default=-1"`
			}]()
		}, `jsonschema default: -1 is out of range for uint`},
		"integer enum value with a fraction": {func() {
			schemaOf[struct {
				A int `json:"a" jsonschema:"enum=1|2.5"`
			}]()
		}, `enum value "2.5": 2.5 is not an integer`},
		"quoted integer default out of range": {func() {
			schemaOf[struct {
				A int8 `json:"a,string,omitempty" jsonschema:"default=128"`
			}]()
		}, `jsonschema default: 128 is out of range for int8`},
		"quoted integer enum value with an exponent": {func() {
			schemaOf[struct {
				A int `json:"a,string" jsonschema:"enum=1e2"`
			}]()
		}, `enum value "1e2": a field tagged json:",string" takes an integer as its digits`},
		// A result type encoding/json refuses whatever its value fails every call.
		"result type that cannot be encoded": {func() {
			provider.NewTool("t", "d", func(context.Context, provider.Call, struct{}) (chan int, error) { return nil, nil })
		}, "result type chan int cannot be JSON-encoded"},
		"result field that cannot be encoded": {func() {
			provider.NewTool("t", "d", func(context.Context, provider.Call, struct{}) (badResult, error) { return badResult{}, nil })
		}, "result type provider_test.badResult: field Inner.Stop: func() cannot be JSON-encoded"},
		"result field with omitempty that cannot be encoded": {func() {
			provider.NewTool("t", "d", func(context.Context, provider.Call, struct{}) (struct {
				C chan int `json:"c,omitempty"`
			}, error) {
				return struct {
					C chan int `json:"c,omitempty"`
				}{}, nil
			})
		}, "field C: chan int cannot be JSON-encoded"},
		"result map with keys that cannot be encoded": {func() {
			provider.NewTool("t", "d", func(context.Context, provider.Call, struct{}) (map[float64]int, error) { return nil, nil })
		}, "result type map[float64]int cannot be JSON-encoded"},
		"keyword without value": {func() {
			schemaOf[struct {
				A int `json:"a" jsonschema:"minimum"`
			}]()
		}, "needs a value"},
		// toolsd compiles patterns with Go's regexp and refuses the tool when one does not.
		"pattern that does not compile": {func() {
			schemaOf[struct {
				A string `json:"a" jsonschema:"pattern=^[a-z+$"`
			}]()
		}, "jsonschema pattern: error parsing regexp: missing closing ]"},
		"pattern with a lookahead": {func() {
			schemaOf[struct {
				A string `json:"a" jsonschema:"pattern=^(?!admin)"`
			}]()
		}, "jsonschema pattern: error parsing regexp: invalid or unsupported Perl syntax"},
		"required and optional": {func() {
			schemaOf[struct {
				A int `json:"a" jsonschema:"required,optional"`
			}]()
		}, "both required and optional"},
		"non-object root":            {func() { schemaOf[string]() }, "must be a struct or a map"},
		"explicit schema not JSON":   {func() { schemaOf[struct{}](provider.WithSchema(`{`)) }, "not valid JSON"},
		"explicit schema not object": {func() { schemaOf[struct{}](provider.WithSchema(`[]`)) }, "not a JSON object"},
		"explicit schema not UTF-8": {func() {
			schemaOf[struct{}](provider.WithSchema("{\"description\":\"caf\xe9\"}"))
		}, "not valid UTF-8"},
		"bad output schema": {func() { schemaOf[struct{}](provider.WithOutputSchema(`"x"`)) }, "output schema"},
		"empty name": {func() {
			provider.NewTool("", "d", func(context.Context, provider.Call, struct{}) (string, error) { return "", nil })
		}, "invalid name: empty name"},
		"name with a space": {func() {
			provider.NewTool("read file", "d", func(context.Context, provider.Call, struct{}) (string, error) { return "", nil })
		}, `invalid name: invalid character ' '`},
		"name not UTF-8": {func() {
			provider.NewTool("caf\xe9", "d", func(context.Context, provider.Call, struct{}) (string, error) { return "", nil })
		}, "invalid name: invalid character"},
		"name too long": {func() {
			provider.NewTool(strings.Repeat("n", 65), "d", func(context.Context, provider.Call, struct{}) (string, error) { return "", nil })
		}, "invalid name: longer than 64 bytes"},
		"reserved name": {func() {
			provider.NewTool("run_code", "d", func(context.Context, provider.Call, struct{}) (string, error) { return "", nil })
		}, "reserved for the operator"},
		"nil handler": {func() {
			provider.NewTool[struct{}, string]("t", "d", nil)
		}, "nil handler"},
		// encoding/json cannot decode into an interface with methods, nor set the fields of
		// an embedded pointer to an unexported struct: a schema admitting them would pass
		// arguments the handler's decoding then refuses.
		"interface with methods": {func() {
			schemaOf[struct {
				R io.Reader `json:"r"`
			}]()
		}, "interface type io.Reader has methods"},
		"interface with methods as map values": {func() {
			schemaOf[struct {
				M map[string]fmt.Stringer `json:"m"`
			}]()
		}, "interface type fmt.Stringer has methods"},
		"interface with methods as the root": {func() { schemaOf[fmt.Stringer]() }, "interface type fmt.Stringer has methods"},
		"embedded pointer to unexported struct": {func() {
			schemaOf[withHiddenEmbed]()
		}, "embedded pointer to unexported struct"},
		"tagged embedded pointer to unexported struct": {func() {
			schemaOf[withHiddenTaggedPtr]()
		}, "withHiddenTaggedPtr.hidden: embedded pointer to unexported struct *provider_test.hidden"},
		// An arguments struct that gets UnmarshalJSON from an embedded field is decoded by
		// it alone: encoding/json hands it the whole object and sets no other field.
		"fields beside an embedded self-decoding struct": {func() {
			schemaOf[defaultedSearch]()
		}, "arguments type provider_test.defaultedSearch: field Query is never decoded: encoding/json decodes the arguments with the UnmarshalJSON of the embedded field defaulted"},
		"fields beside an embedded time": {func() {
			schemaOf[struct {
				time.Time
				Note string `json:"note"`
			}]()
		}, "field Note is never decoded: encoding/json decodes the arguments with the UnmarshalJSON of the embedded field Time"},
		"embedded time alone": {func() {
			schemaOf[struct{ time.Time }]()
		}, "the UnmarshalJSON of the embedded field Time: arguments type time.Time is not a JSON object"},
		// encoding/json calls the promoted method on the embedded pointer, which is nil.
		"embedded pointer to a self-decoding struct": {func() {
			schemaOf[struct{ *defaulted }]()
		}, "the UnmarshalJSON of the embedded field defaulted, a pointer that is nil when encoding/json calls it"},
		"field embedding a pointer to a self-decoding struct": {func() {
			schemaOf[struct {
				D nilDefaults `json:"d"`
			}]()
		}, ".D: type provider_test.nilDefaults decodes with the UnmarshalJSON of the embedded field defaulted, a pointer that is nil when encoding/json calls it"},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				v := recover()
				msg, _ := v.(string)
				if !strings.HasPrefix(msg, "provider: ") || !strings.Contains(msg, tc.want) {
					t.Errorf("NewTool panicked with %v, want a provider: panic containing %q", v, tc.want)
				}
			}()
			tc.build()
		})
	}
}

// badResult has a field encoding/json cannot encode, whatever its value.
type badResult struct {
	OK    int `json:"ok"`
	Inner struct {
		Stop func() `json:"stop"`
	} `json:"inner"`
}

// fineResult has fields of types encoding/json cannot encode, which it need not encode:
// skipped, unexported, omitted when nil (omitzero: omitempty never omits a function),
// or behind a pointer, a slice or a map, which encode as null or empty when nil or
// empty, or in a type that encodes itself.
type fineResult struct {
	Skipped func()            `json:"-"`
	hidden  func()            //nolint:unused // proves unexported fields are not encoded
	Omitted func()            `json:"omitted,omitzero"`
	Ptr     *chan int         `json:"ptr"`
	List    []func()          `json:"list"`
	Map     map[string]func() `json:"map"`
	Own     ownEncoding       `json:"own"`
}

// ownEncoding encodes itself.
type ownEncoding struct{ C chan int }

func (ownEncoding) MarshalJSON() ([]byte, error) { return []byte(`"own"`), nil }

// Result types with fields encoding/json never has to encode are accepted.
func TestResultTypeWithFieldsNotEncoded(t *testing.T) {
	provider.NewTool("t", "d", func(context.Context, provider.Call, struct{}) (fineResult, error) { return fineResult{}, nil })
	provider.NewTool("t", "d", func(context.Context, provider.Call, struct{}) (any, error) { return nil, nil })
	b, err := json.Marshal(fineResult{}) //nolint:staticcheck // deliberate: omitzero leaves the function out
	if err != nil {
		t.Fatalf("json.Marshal(fineResult{}) = %v", err)
	}
	if want := `{"ptr":null,"list":null,"map":null,"own":"own"}`; string(b) != want {
		t.Errorf("json.Marshal(fineResult{}) = %s, want %s", b, want)
	}
}

type hidden struct {
	X int `json:"x"`
}

type withHiddenEmbed struct {
	*hidden
	Y int `json:"y"`
}

// enumArgs has enum and default values on fields whose JSON type is not their Go
// kind's: they are written as the JSON values the field takes.
type enumArgs struct {
	N    int       `json:"n,string" jsonschema:"enum=1|2,default=1"`
	L    level     `json:"l" jsonschema:"enum=debug|warn,default=warn"`
	When time.Time `json:"when" jsonschema:"default=2026-01-01T00:00:00Z"`
}

// level is an integer that decodes from its name.
type level int8

func (l *level) UnmarshalText(b []byte) error {
	switch string(b) {
	case "debug":
		*l = 0
	case "warn":
		*l = 1
	default:
		return fmt.Errorf("unknown level %q", b)
	}
	return nil
}

// quotedTextArgs has a text-decoding field tagged `json:",string"`: encoding/json wants
// a JSON string holding a JSON string ("\"warn\""), whose text the type then decodes.
type quotedTextArgs struct {
	L level  `json:"l,string" jsonschema:"enum=debug|warn,default=warn"`
	M *level `json:"m,string,omitempty"`
}

// hiddenTagged embeds an unexported struct under a json name: encoding/json decodes
// it as the field "h" (the exported fields of an unexported embedded struct are set).
type hiddenTagged struct {
	hidden `json:"h"`
	Y      int `json:"y"`
}

// withHiddenTaggedPtr embeds a pointer to an unexported struct under a json name:
// encoding/json panics when it meets the field, as it cannot allocate it.
type withHiddenTaggedPtr struct {
	*hidden `json:"h,omitempty"`
}

type quotedArgs struct {
	N  int     `json:"n,string"`
	B  *bool   `json:"b,string,omitempty"`
	L  []int   `json:"l,string,omitempty"` //nolint:staticcheck // deliberate: encoding/json ignores the option on arrays, and so must the schema
	S  string  `json:"s,string,omitempty"`
	F  float64 `json:"f,omitempty"`
	Q  float32 `json:"q,string,omitempty"`
	U  uint    `json:"u,string,omitempty"`
	DP **int   `json:"dp,string,omitempty"` //nolint:staticcheck // deliberate: encoding/json ignores the option under two pointers
}

type textArgs struct {
	Addr netip.Addr `json:"addr"`
}

// selfDecoding decodes itself from any JSON value.
type selfDecoding struct{ raw string }

func (s *selfDecoding) UnmarshalJSON(b []byte) error { s.raw = string(b); return nil }

type selfArgs struct {
	V selfDecoding `json:"v"`
}

// The derived schema accepts what encoding/json decodes into the arguments type and
// rejects what it cannot: the json tag's string option, types that decode from a JSON
// string (encoding.TextUnmarshaler) and types that decode themselves.
func TestDerivedSchemaAgreesWithDecoding(t *testing.T) {
	for _, tc := range []struct {
		name, schema, doc string
		decode            func(string) error
	}{
		{"quoted int", schemaOf[quotedArgs](), `{"n":"5"}`, decodeInto[quotedArgs]},
		{"unquoted int", schemaOf[quotedArgs](), `{"n":5}`, decodeInto[quotedArgs]},
		{"quoted bool", schemaOf[quotedArgs](), `{"n":"1","b":"true"}`, decodeInto[quotedArgs]},
		{"quoted string", schemaOf[quotedArgs](), `{"n":"1","s":"\"x\""}`, decodeInto[quotedArgs]},
		{"array keeps its type", schemaOf[quotedArgs](), `{"n":"1","l":[1,2]}`, decodeInto[quotedArgs]},
		// The string holds the JSON text of the value: anything else fails the decoding.
		{"quoted int not a number", schemaOf[quotedArgs](), `{"n":"five"}`, decodeInto[quotedArgs]},
		{"quoted int with a fraction", schemaOf[quotedArgs](), `{"n":"1.0"}`, decodeInto[quotedArgs]},
		{"quoted int with a leading zero", schemaOf[quotedArgs](), `{"n":"05"}`, decodeInto[quotedArgs]},
		{"quoted int with a plus sign", schemaOf[quotedArgs](), `{"n":"+5"}`, decodeInto[quotedArgs]},
		{"quoted int with spaces", schemaOf[quotedArgs](), `{"n":" 5"}`, decodeInto[quotedArgs]},
		{"quoted negative int", schemaOf[quotedArgs](), `{"n":"-5"}`, decodeInto[quotedArgs]},
		{"quoted empty int", schemaOf[quotedArgs](), `{"n":""}`, decodeInto[quotedArgs]},
		{"quoted bool not a bool", schemaOf[quotedArgs](), `{"n":"1","b":"yes"}`, decodeInto[quotedArgs]},
		{"quoted bool false", schemaOf[quotedArgs](), `{"n":"1","b":"false"}`, decodeInto[quotedArgs]},
		{"quoted string unquoted", schemaOf[quotedArgs](), `{"n":"1","s":"x"}`, decodeInto[quotedArgs]},
		{"quoted string with escapes", schemaOf[quotedArgs](), `{"n":"1","s":"\"a\\\"b\\u00e9\\n\""}`, decodeInto[quotedArgs]},
		// encoding/json's string decoding also takes \' (an escaped apostrophe).
		{"quoted string with an escaped apostrophe", schemaOf[quotedArgs](), `{"n":"1","s":"\"it\\'s\""}`, decodeInto[quotedArgs]},
		{"quoted string bad escape", schemaOf[quotedArgs](), `{"n":"1","s":"\"a\\x\""}`, decodeInto[quotedArgs]},
		{"quoted string two strings", schemaOf[quotedArgs](), `{"n":"1","s":"\"a\" \"b\""}`, decodeInto[quotedArgs]},
		{"quoted float", schemaOf[quotedArgs](), `{"n":"1","q":"-1.5e3"}`, decodeInto[quotedArgs]},
		{"quoted float not a number", schemaOf[quotedArgs](), `{"n":"1","q":"1.5.3"}`, decodeInto[quotedArgs]},
		{"quoted float ending in a dot", schemaOf[quotedArgs](), `{"n":"1","q":"1."}`, decodeInto[quotedArgs]},
		{"quoted float starting with a dot", schemaOf[quotedArgs](), `{"n":"1","q":".5"}`, decodeInto[quotedArgs]},
		{"quoted negative float starting with a dot", schemaOf[quotedArgs](), `{"n":"1","q":"-.5E-1"}`, decodeInto[quotedArgs]},
		{"quoted float with a bare exponent", schemaOf[quotedArgs](), `{"n":"1","q":"1e"}`, decodeInto[quotedArgs]},
		{"quoted unsigned", schemaOf[quotedArgs](), `{"n":"1","u":"7"}`, decodeInto[quotedArgs]},
		{"quoted unsigned negative", schemaOf[quotedArgs](), `{"n":"1","u":"-7"}`, decodeInto[quotedArgs]},
		{"option ignored under two pointers", schemaOf[quotedArgs](), `{"n":"1","dp":7}`, decodeInto[quotedArgs]},
		{"text address", schemaOf[textArgs](), `{"addr":"10.0.0.1"}`, decodeInto[textArgs]},
		{"address as object", schemaOf[textArgs](), `{"addr":{}}`, decodeInto[textArgs]},
		{"self-decoding object", schemaOf[selfArgs](), `{"v":{"any":[1]}}`, decodeInto[selfArgs]},
		{"self-decoding number", schemaOf[selfArgs](), `{"v":3}`, decodeInto[selfArgs]},
		{"negative unsigned", schemaOf[sizedArgs](), `{"u":-1,"i8":0,"u16":0}`, decodeInto[sizedArgs]},
		{"unsigned zero", schemaOf[sizedArgs](), `{"u":0,"i8":0,"u16":0}`, decodeInto[sizedArgs]},
		{"int8 overflow", schemaOf[sizedArgs](), `{"u":0,"i8":128,"u16":0}`, decodeInto[sizedArgs]},
		{"int8 underflow", schemaOf[sizedArgs](), `{"u":0,"i8":-129,"u16":0}`, decodeInto[sizedArgs]},
		{"int8 bounds", schemaOf[sizedArgs](), `{"u":0,"i8":-128,"u16":65535}`, decodeInto[sizedArgs]},
		{"uint16 overflow", schemaOf[sizedArgs](), `{"u":0,"i8":0,"u16":65536}`, decodeInto[sizedArgs]},
		{"outer field shadows", schemaOf[shadowArgs](), `{"e1":1,"Tag":"x"}`, decodeInto[shadowArgs]},
		{"outer field's type", schemaOf[shadowArgs](), `{"e1":"x","Tag":"x"}`, decodeInto[shadowArgs]},
		{"tagged field wins", schemaOf[shadowArgs](), `{"e1":1,"Tag":1}`, decodeInto[shadowArgs]},
		{"ambiguous name ignored", schemaOf[shadowArgs](), `{"e1":1,"Tag":"x","Amb":[true]}`, decodeInto[shadowArgs]},
		{"text map key", schemaOf[textKeyArgs](), `{"m":{"10.0.0.1":1}}`, decodeInto[textKeyArgs]},
		{"uintptr map key", schemaOf[textKeyArgs](), `{"m":{},"u":{"7":true}}`, decodeInto[textKeyArgs]},
		{"integer key", schemaOf[intKeyArgs](), `{"i":{"-3":"x","+4":"y","05":"z"},"u":{"7":1}}`, decodeInto[intKeyArgs]},
		{"integer key not a number", schemaOf[intKeyArgs](), `{"i":{"abc":"x"},"u":{}}`, decodeInto[intKeyArgs]},
		{"integer key with a fraction", schemaOf[intKeyArgs](), `{"i":{"1.5":"x"},"u":{}}`, decodeInto[intKeyArgs]},
		{"integer key with spaces", schemaOf[intKeyArgs](), `{"i":{" 1":"x"},"u":{}}`, decodeInto[intKeyArgs]},
		{"unsigned key negative", schemaOf[intKeyArgs](), `{"i":{},"u":{"-7":1}}`, decodeInto[intKeyArgs]},
		{"unsigned key signed", schemaOf[intKeyArgs](), `{"i":{},"u":{"+7":1}}`, decodeInto[intKeyArgs]},
		// A key out of the key type's range fails the decoding as a value out of its does.
		{"unsigned key out of range", schemaOf[intKeyArgs](), `{"i":{},"u":{"65536":1}}`, decodeInto[intKeyArgs]},
		{"unsigned key at its bound", schemaOf[intKeyArgs](), `{"i":{},"u":{"65535":1,"00065535":2,"0":3,"000":4,"9":5,"10000":6}}`, decodeInto[intKeyArgs]},
		{"unsigned key long", schemaOf[intKeyArgs](), `{"i":{},"u":{"100000":1}}`, decodeInto[intKeyArgs]},
		{"int8 keys at their bounds", schemaOf[int8KeyArgs](), `{"m":{"-128":true,"127":true,"+127":true,"-0":true,"+0":true,"099":true,"-0128":true}}`, decodeInto[int8KeyArgs]},
		{"int8 key over", schemaOf[int8KeyArgs](), `{"m":{"128":true}}`, decodeInto[int8KeyArgs]},
		{"int8 key under", schemaOf[int8KeyArgs](), `{"m":{"-129":true}}`, decodeInto[int8KeyArgs]},
		{"int8 key sign alone", schemaOf[int8KeyArgs](), `{"m":{"-":true}}`, decodeInto[int8KeyArgs]},
		{"int8 key two signs", schemaOf[int8KeyArgs](), `{"m":{"+-1":true}}`, decodeInto[int8KeyArgs]},
		{"tagged unexported embedded struct", schemaOf[hiddenTagged](), `{"h":{"x":1},"y":2}`, decodeInto[hiddenTagged]},
		{"tagged unexported embedded struct's type", schemaOf[hiddenTagged](), `{"h":{"x":"1"},"y":2}`, decodeInto[hiddenTagged]},
		{"quoted enum value", schemaOf[enumArgs](), `{"n":"2","l":"warn","when":"2026-01-02T03:04:05Z"}`, decodeInto[enumArgs]},
		{"text enum value", schemaOf[enumArgs](), `{"n":"1","l":"debug","when":"2026-01-02T03:04:05Z"}`, decodeInto[enumArgs]},
		{"quoted text enum value", schemaOf[quotedTextArgs](), `{"l":"\"warn\""}`, decodeInto[quotedTextArgs]},
		{"quoted text enum value unquoted", schemaOf[quotedTextArgs](), `{"l":"warn"}`, decodeInto[quotedTextArgs]},
		{"quoted text value", schemaOf[quotedTextArgs](), `{"l":"\"debug\"","m":"\"warn\""}`, decodeInto[quotedTextArgs]},
		{"quoted text value unquoted", schemaOf[quotedTextArgs](), `{"l":"\"debug\"","m":"warn"}`, decodeInto[quotedTextArgs]},
		{"tag name encoding/json ignores", schemaOf[badTagArgs](), `{"Name":"x","Quote":"y","q":"z"}`, decodeInto[badTagArgs]},
		{"json.Number from a number", schemaOf[numberArgs](), `{"n":5.5}`, decodeInto[numberArgs]},
		// encoding/json uses the methods of a struct type without a name only through a
		// pointer: a field of the type itself is decoded field by field.
		{"unnamed struct embedding a text type", schemaOf[unnamedArgs](), `{"a":"10.0.0.1","b":{}}`, decodeInto[unnamedArgs]},
		{"unnamed struct embedding a text type as object", schemaOf[unnamedArgs](), `{"a":{},"b":{}}`, decodeInto[unnamedArgs]},
		{"unnamed struct embedding a self-decoding struct", schemaOf[unnamedArgs](), `{"a":{},"b":5}`, decodeInto[unnamedArgs]},
		{"unnamed struct embedding a self-decoding struct as object", schemaOf[unnamedArgs](), `{"a":{},"b":{"limit":1,"x":2}}`, decodeInto[unnamedArgs]},
		{"pointer to unnamed struct embedding a text type", schemaOf[unnamedArgs](), `{"a":{},"b":{},"p":"10.0.0.1"}`, decodeInto[unnamedArgs]},
		{"pointer to unnamed struct embedding a text type as object", schemaOf[unnamedArgs](), `{"a":{},"b":{},"p":{}}`, decodeInto[unnamedArgs]},
		{"json.Number from text", schemaOf[numberArgs](), `{"n":"five"}`, decodeInto[numberArgs]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			valid, decodeErr := schemaAccepts(t, tc.schema, tc.doc), tc.decode(tc.doc)
			if valid != (decodeErr == nil) {
				t.Errorf("schema %s accepts %s: %v; encoding/json decodes it: %v", tc.schema, tc.doc, valid, decodeErr)
			}
		})
	}
}

// unnamedArgs has fields of struct types without a name that get decoding methods
// from an embedded field.
type unnamedArgs struct {
	A struct{ netip.Addr } `json:"a"`
	B struct {
		defaulted
		X int `json:"x,omitempty"`
	} `json:"b"`
	P *struct{ netip.Addr } `json:"p,omitempty"`
}

// shadowArgs has fields encoding/json resolves by its dominance rules: e1 is the outer
// field's (shallower), Tag the tagged one's (same depth), Amb nobody's (ambiguous).
type shadowArgs struct {
	Embedded
	E1 int `json:"e1"`
	tagA
	tagB
	ambA
	ambB
}

type (
	tagA struct {
		X string `json:"Tag"`
	}
	tagB struct{ Tag int }
	ambA struct{ Amb string }
	ambB struct{ Amb int }
)

// TestShadowedFieldsSchema checks the names and types jsonFields picks.
func TestShadowedFieldsSchema(t *testing.T) {
	want := `{"type":"object","properties":{"e1":{"type":"integer"},"Tag":{"type":"string"}},"required":["e1","Tag"]}`
	if got := schemaOf[shadowArgs](); got != want {
		t.Errorf("schema = %s, want %s", got, want)
	}
}

// textKeyArgs has maps whose keys encoding/json decodes from text (netip.Addr) and from
// integers (uintptr).
type textKeyArgs struct {
	M map[netip.Addr]int `json:"m"`
	U map[uintptr]bool   `json:"u,omitempty"`
}

// intKeyArgs has maps whose keys encoding/json decodes as integers: only decimal
// integers (signed ones with an optional sign) are keys it accepts.
type int8KeyArgs struct {
	M map[int8]bool `json:"m"`
}

type intKeyArgs struct {
	I map[int64]string `json:"i"`
	U map[uint16]int   `json:"u"`
}

// badTagArgs has json tag names encoding/json does not take (quotes and backslashes are
// reserved): it names those fields by their Go names, keeping the tag's options. A
// schema naming them by the tag would send values the decoding silently drops.
type badTagArgs struct {
	Name  string        `json:"it's"`  //nolint:staticcheck // deliberate: a tag name encoding/json ignores
	Quote string        `json:"say\\"` //nolint:staticcheck // deliberate: as above
	Emb   `json:"a\\b"` //nolint:staticcheck // deliberate: inlined as if untagged
}

type Emb struct {
	Q string `json:"q"`
}

// numberArgs takes a json.Number, which encoding/json fills from a JSON number.
type numberArgs struct {
	N json.Number `json:"n"`
}

type sizedArgs struct {
	U   uint   `json:"u"`
	I8  int8   `json:"i8"`
	U16 uint16 `json:"u16"`
	Min uint8  `json:"min,omitempty" jsonschema:"minimum=5"`
}

func decodeInto[A any](doc string) error {
	var a A
	return json.Unmarshal([]byte(doc), &a)
}

// schemaAccepts compiles schema and reports whether doc is valid against it.
func schemaAccepts(t *testing.T, schema, doc string) bool {
	t.Helper()
	s, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("args.json", s); err != nil {
		t.Fatal(err)
	}
	compiled, err := c.Compile("args.json")
	if err != nil {
		t.Fatal(err)
	}
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	return compiled.Validate(v) == nil
}

// defaulted is an arguments type that decodes itself to fill in a default.
type defaulted struct {
	Limit int `json:"limit,omitempty"`
}

func (d *defaulted) UnmarshalJSON(b []byte) error {
	type plain defaulted
	p := plain{Limit: 10}
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*d = defaulted(p)
	return nil
}

// An arguments struct with its own UnmarshalJSON is still described by its fields.
func TestSelfDecodingArgumentsStruct(t *testing.T) {
	got := schemaOf[defaulted]()
	if want := `{"type":"object","properties":{"limit":{"type":"integer"}}}`; got != want {
		t.Errorf("schema = %s, want %s", got, want)
	}
}

// defaultedSearch gets UnmarshalJSON from defaulted: encoding/json decodes the whole
// arguments object into defaulted and never sets Query.
type defaultedSearch struct {
	defaulted
	Query string `json:"query"`
}

// nilDefaults gets UnmarshalJSON from the pointer it embeds, which encoding/json leaves
// nil when it calls the method.
type nilDefaults struct {
	*defaulted
}

// defaultedOnly gets UnmarshalJSON from defaulted, which holds all its fields.
type defaultedOnly struct {
	defaulted
}

// An arguments struct whose UnmarshalJSON comes from the one embedded field that holds
// all its fields is described by that field's type, which decodes it; one that also
// declares its own is described by its fields.
func TestPromotedSelfDecodingArgumentsStruct(t *testing.T) {
	want := `{"type":"object","properties":{"limit":{"type":"integer"}}}`
	if got := schemaOf[defaultedOnly](); got != want {
		t.Errorf("schema = %s, want %s", got, want)
	}
	want = `{"type":"object","properties":{"limit":{"type":"integer"},"query":{"type":"string"}},"required":["query"]}`
	if got := schemaOf[ownDecoder](); got != want {
		t.Errorf("schema = %s, want %s", got, want)
	}
}

// ownDecoder embeds a self-decoding struct and declares its own UnmarshalJSON, which
// shadows the embedded one's.
type ownDecoder struct {
	defaulted
	Query string `json:"query"`
}

func (o *ownDecoder) UnmarshalJSON(b []byte) error {
	var v struct {
		Limit *int   `json:"limit"`
		Query string `json:"query"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	o.Limit, o.Query = 10, v.Query
	if v.Limit != nil {
		o.Limit = *v.Limit
	}
	return nil
}

// A json tag name encoding/json ignores does not name the property either.
func TestIgnoredTagNameSchema(t *testing.T) {
	want := `{"type":"object","properties":{"Name":{"type":"string"},"Quote":{"type":"string"},"q":{"type":"string"}},"required":["Name","Quote","q"]}`
	if got := schemaOf[badTagArgs](); got != want {
		t.Errorf("schema = %s, want %s", got, want)
	}
}

// An unexported embedded struct with a json name is a property, as encoding/json
// decodes it.
func TestTaggedUnexportedEmbedSchema(t *testing.T) {
	want := `{"type":"object","properties":{"h":{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"],"additionalProperties":false},"y":{"type":"integer"}},"required":["h","y"],"additionalProperties":false}`
	if got := schemaOf[hiddenTagged](provider.StrictArguments()); got != want {
		t.Errorf("schema = %s, want %s", got, want)
	}
}

// Integer enum and default values may be written in any JSON form of an integer, within
// the field's range.
func TestIntegerEnumValues(t *testing.T) {
	got := schemaOf[struct {
		Small uint8 `json:"small" jsonschema:"enum=0|255|1e2|2.0,default=255"`
		Big   int64 `json:"big,string" jsonschema:"enum=-9223372036854775808|9223372036854775807"`
	}]()
	want := `{"type":"object","properties":{` +
		`"small":{"type":"integer","enum":[0,255,1e2,2.0],"default":255,"minimum":0,"maximum":255},` +
		`"big":{"type":"string","enum":["-9223372036854775808","9223372036854775807"],"pattern":"^-?[0-9]+$"}},` +
		`"required":["small","big"]}`
	if got != want {
		t.Errorf("schema = %s, want %s", got, want)
	}
}

// Enum and default values take the JSON type of the property, not the Go kind: a
// quoted integer's are strings, and so are those of a type decoding from text.
func TestEnumFollowsTheJSONType(t *testing.T) {
	want := `{"type":"object","properties":{` +
		`"n":{"type":"string","enum":["1","2"],"default":"1","pattern":"^-?[0-9]+$"},` +
		`"l":{"type":"string","enum":["debug","warn"],"default":"warn"},` +
		`"when":{"type":"string","format":"date-time","default":"2026-01-01T00:00:00Z"}},` +
		`"required":["n","l","when"]}`
	if got := schemaOf[enumArgs](); got != want {
		t.Errorf("schema = %s, want %s", got, want)
	}
}

// A quoted field of a type decoding from text holds a JSON string, and so do its enum
// and default values.
func TestQuotedTextSchema(t *testing.T) {
	want := `{"type":"object","properties":{` +
		`"l":{"type":"string","enum":["\"debug\"","\"warn\""],"default":"\"warn\"","pattern":` + quotedStringPattern + `},` +
		`"m":{"type":"string","pattern":` + quotedStringPattern + `}},` +
		`"required":["l"]}`
	if got := schemaOf[quotedTextArgs](); got != want {
		t.Errorf("schema = %s, want %s", got, want)
	}
}

// quotedStringPattern is the pattern of a quoted string field, as JSON.
var quotedStringPattern = func() string {
	b, _ := json.Marshal(`^"([^"\\\x00-\x1f]|\\(["\\/'bfnrt]|u[0-9a-fA-F]{4}))*"$`)
	return string(b)
}()
