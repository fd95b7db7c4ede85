package registry

import (
	"net/url"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolsd/toolsd/internal/jsonx"
)

// TestMeasureDocCountsLocations holds measureDoc's pointer bytes to at least the JSON
// pointers of the subschemas the library compiles (it counts every object, a
// "properties" map or an enum member too), so the bound checked before compiling
// bounds the locations compiling builds, compares and walks.
func TestMeasureDocCountsLocations(t *testing.T) {
	tests := map[string]struct {
		schema string
		want   int // 0: not computed by hand
	}{
		"flat": {
			schema: `{"type":"object","properties":{"a":{},"bc":{"type":"string"}}}`,
			want:   len("/properties") + len("/properties/a") + len("/properties/bc"),
		},
		"non-ASCII keys": {
			schema: `{"type":"object","properties":{"😀é":{"properties":{"ü":{}}}}}`,
			want:   len("/properties") + len("/properties/😀é") + len("/properties/😀é/properties") + len("/properties/😀é/properties/ü"),
		},
		"escaped keys and arrays": {
			schema: `{"type":"object","properties":{"a/b~":{"anyOf":[{},{"items":{}}]}}}`,
			want: len("/properties") + len("/properties/a~1b~0") + len("/properties/a~1b~0/anyOf/0") +
				len("/properties/a~1b~0/anyOf/1") + len("/properties/a~1b~0/anyOf/1/items"),
		},
		"$defs and $ref": {
			schema: `{"type":"object","$defs":{"n":{"type":"integer"}},"properties":{"x":{"$ref":"#/$defs/n"}}}`,
		},
		"values": {
			schema: `{"type":"object","properties":{"e":{"enum":[{"k":1}],"default":{"d":{}}}}}`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			sch, err := compileSchema("t", []byte(tc.schema), parametersSchema, true, schemaLimits{maxBytes: 64 << 10, maxDepth: 64})
			if err != nil {
				t.Fatalf("compileSchema(%s) = %v", tc.schema, err)
			}
			g := &fanout{node: map[*jsonschema.Schema]*fanNode{}}
			g.collect(sch.lib)
			locations := 0
			for _, n := range g.order {
				frag, ok := strings.CutPrefix(n.s.Location, schemaBase+"#")
				if !ok {
					continue
				}
				ptr, err := url.PathUnescape(frag)
				if err != nil {
					t.Fatalf("location %q: %v", n.s.Location, err)
				}
				locations += len(ptr)
			}
			doc, err := jsonx.Decode([]byte(tc.schema), jsonx.Limits{MaxBytes: 1 << 20})
			if err != nil {
				t.Fatal(err)
			}
			got := measureDoc(doc, MaxSchemaObjects+1, MaxSchemaPointerBytes+1).pointerBytes
			if got < locations {
				t.Errorf("measureDoc(%s).pointerBytes = %d, want at least %d, the compiled locations' bytes", tc.schema, got, locations)
			}
			if tc.want != 0 && got != tc.want {
				t.Errorf("measureDoc(%s).pointerBytes = %d, want %d", tc.schema, got, tc.want)
			}
		})
	}
}
