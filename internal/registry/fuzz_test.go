package registry_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/toolsd/toolsd/internal/registry"
	"github.com/toolsd/toolsd/internal/tool"
)

// fuzzArguments are validated against every schema the fuzzer gets accepted.
var fuzzArguments = []string{
	`{}`,
	`{"path":"/tmp/x","offset":1,"tags":["a",1,null],"n":{"m":[{}]}}`,
	`{"a":1.5e300,"b":-0,"c":"` + strings.Repeat("x", 300) + `"}`,
	`[]`,
	`"s"`,
}

// FuzzRegisterSchema feeds arbitrary bytes as a parameter schema and as an output schema:
// registration must never panic (including inside the schema compiler, whose panics the
// registry would otherwise convert), must fail only with schema or limit errors, and an
// accepted schema must validate any argument document without panicking. Seeds live in
// testdata/fuzz/FuzzRegisterSchema.
func FuzzRegisterSchema(f *testing.F) {
	f.Fuzz(func(t *testing.T, schema []byte) {
		r := registry.New()
		for _, d := range []tool.Definition{
			{Name: "params", Parameters: schema},
			{Name: "output", Parameters: []byte(`{"type":"object"}`), OutputSchema: schema},
		} {
			e, err := r.Register("", d, "fuzz")
			if err != nil {
				if !errors.Is(err, registry.ErrInvalidSchema) && !errors.Is(err, registry.ErrLimit) {
					t.Fatalf("Register(%q) = %v, want ErrInvalidSchema or ErrLimit", schema, err)
				}
				if strings.Contains(err.Error(), "schema compiler failed") {
					t.Fatalf("Register(%q): the schema compiler panicked: %v", schema, err)
				}
				continue
			}
			for _, a := range fuzzArguments {
				_ = e.ValidateArguments(a)
				_ = e.ValidateOutput([]byte(a))
			}
			schemas, _ := r.Schemas("")
			for _, s := range schemas {
				if s.Name == "params" && string(s.Parameters) != string(schema) {
					t.Fatalf("Schemas changed the parameter bytes: %q became %q", schema, s.Parameters)
				}
			}
		}
	})
}
