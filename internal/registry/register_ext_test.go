package registry_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolsd/toolsd/internal/jsonx"
	"github.com/toolsd/toolsd/internal/registry"
	"github.com/toolsd/toolsd/internal/tool"
)

func TestRegisterRejects(t *testing.T) {
	tests := map[string]struct {
		scope string
		def   tool.Definition
		owner string
		opts  []registry.Option
		want  error
	}{
		"bad scope":                {scope: "a//b", def: def("t"), want: registry.ErrInvalidScope},
		"deep scope":               {scope: "1/2/3/4/5/6/7/8/9", def: def("t"), want: registry.ErrInvalidScope},
		"empty name":               {def: def(""), want: registry.ErrInvalidName},
		"name with space":          {def: def("read file"), want: registry.ErrInvalidName},
		"long name":                {def: def(strings.Repeat("x", 65)), want: registry.ErrInvalidName},
		"run_code by provider":     {def: def(registry.ReservedRunCode), owner: "prov", want: registry.ErrInvalidName},
		"no parameters":            {def: withParams("t", ""), want: registry.ErrInvalidSchema},
		"description too long":     {def: tool.Definition{Name: "t", Description: strings.Repeat("d", 8<<10+1), Parameters: []byte(objectSchema)}, want: registry.ErrLimit},
		"description limit option": {def: tool.Definition{Name: "t", Description: "0123456789", Parameters: []byte(objectSchema)}, opts: []registry.Option{registry.WithLimits(registry.Limits{MaxDescriptionBytes: 5})}, want: registry.ErrLimit},
		"title too long":           {def: tool.Definition{Name: "t", Annotations: tool.Annotations{Title: strings.Repeat("t", 8<<10+1)}, Parameters: []byte(objectSchema)}, want: registry.ErrLimit},
		"description not utf-8":    {def: tool.Definition{Name: "t", Description: "bad \xff", Parameters: []byte(objectSchema)}, want: registry.ErrInvalidDefinition},
		"schema too long":          {def: withParams("t", `{"type":"object","description":"`+strings.Repeat("x", 100)+`"}`), opts: []registry.Option{registry.WithLimits(registry.Limits{MaxSchemaBytes: 64})}, want: registry.ErrLimit},
		"unknown mode":             {def: tool.Definition{Name: "t", Parameters: []byte(objectSchema), Mode: 7}, want: registry.ErrInvalidDefinition},
		"negative timeout":         {def: tool.Definition{Name: "t", Parameters: []byte(objectSchema), Timeout: -1}, want: registry.ErrInvalidDefinition},
		"condition too long":       {def: withCondition("t", "true || "+strings.Repeat("true || ", 600)+"true"), want: registry.ErrLimit},
		"output schema not json":   {def: tool.Definition{Name: "t", Parameters: []byte(objectSchema), OutputSchema: []byte(`{"type":`)}, want: registry.ErrInvalidSchema},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := newRegistry(t, tc.opts...)
			e, err := r.Register(tc.scope, tc.def, tc.owner)
			if !errors.Is(err, tc.want) || e != nil {
				t.Fatalf("Register(%q, %q) = %v, %v, want nil, %v", tc.scope, tc.def.Name, e, err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "registry: ") {
				t.Errorf("Register error %q lacks the registry: prefix", err)
			}
			if tools, scopes := r.Count(); tools != 0 || scopes != 0 {
				t.Errorf("Count() = %d, %d after a rejected registration, want 0, 0", tools, scopes)
			}
		})
	}
}

func TestRegisterOperatorMayRegisterRunCode(t *testing.T) {
	r := newRegistry(t)
	mustRegister(t, r, "", def(registry.ReservedRunCode), "")
	if _, err := r.Lookup("agent", registry.ReservedRunCode); err != nil {
		t.Fatalf("Lookup(run_code) = %v, want nil", err)
	}
}

func TestRegisterDuplicate(t *testing.T) {
	tests := map[string]struct {
		firstOwner, secondOwner string
		secondDef               tool.Definition
	}{
		"same definition same owner": {firstOwner: "p", secondOwner: "p", secondDef: def("t")},
		"other owner":                {firstOwner: "p", secondOwner: "q", secondDef: def("t")},
		"changed definition":         {firstOwner: "p", secondOwner: "p", secondDef: tool.Definition{Name: "t", Description: "new", Parameters: []byte(objectSchema)}},
		"operator over provider":     {firstOwner: "p", secondOwner: "", secondDef: def("t")},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := newRegistry(t)
			first := mustRegister(t, r, "a", def("t"), tc.firstOwner)
			if _, err := r.Register("a", tc.secondDef, tc.secondOwner); !errors.Is(err, registry.ErrAlreadyExists) {
				t.Fatalf("second Register = %v, want ErrAlreadyExists", err)
			}
			got, err := r.Lookup("a", "t")
			if err != nil || got != first {
				t.Fatalf("Lookup after duplicate = %v, %v, want the first entry (never overwritten)", got, err)
			}
			// The same name in another scope is a different registration.
			mustRegister(t, r, "b", tc.secondDef, tc.secondOwner)
		})
	}
}

func TestEntrySnapshot(t *testing.T) {
	r := newRegistry(t)
	params := []byte(`{"type":"object","properties":{"b":{"type":"string"},"a":{"type":"number"}}}`)
	d := tool.Definition{
		Name: "t", Description: "desc", Parameters: params, Mode: tool.ModeExclusive,
		Annotations: tool.Annotations{Title: "T", ReadOnly: true}, DeferLoading: true,
	}
	e := mustRegister(t, r, "a/b", d, "prov")
	params[2] = 'X' // the registry keeps its own copy
	if got := string(e.Definition().Parameters); got[2] != 't' {
		t.Errorf("Definition().Parameters = %s, changed with the caller's slice", got)
	}
	if e.Scope() != "a/b" || e.Owner() != "prov" || e.Definition().Name != "t" || e.Conditional() {
		t.Errorf("Entry = scope %q owner %q name %q conditional %v, want a/b prov t false", e.Scope(), e.Owner(), e.Definition().Name, e.Conditional())
	}
	if len(e.Hash()) != 64 {
		t.Errorf("Hash() = %q, want 64 hex chars", e.Hash())
	}
}

func TestContentHashCoversDefinedFields(t *testing.T) {
	base := tool.Definition{Name: "t", Description: "d", Parameters: []byte(objectSchema)}
	tests := map[string]struct {
		mutate  func(*tool.Definition)
		changes bool
	}{
		"name":            {mutate: func(d *tool.Definition) { d.Name = "u" }, changes: true},
		"description":     {mutate: func(d *tool.Definition) { d.Description = "e" }, changes: true},
		"parameter bytes": {mutate: func(d *tool.Definition) { d.Parameters = []byte(`{"type": "object"}`) }, changes: true},
		"output schema":   {mutate: func(d *tool.Definition) { d.OutputSchema = []byte(`{}`) }, changes: true},
		"title":           {mutate: func(d *tool.Definition) { d.Annotations.Title = "T" }, changes: true},
		"read only":       {mutate: func(d *tool.Definition) { d.Annotations.ReadOnly = true }, changes: true},
		"destructive":     {mutate: func(d *tool.Definition) { d.Annotations.Destructive = true }, changes: true},
		"idempotent":      {mutate: func(d *tool.Definition) { d.Annotations.Idempotent = true }, changes: true},
		"open world":      {mutate: func(d *tool.Definition) { d.Annotations.OpenWorld = true }, changes: true},
		"mode":            {mutate: func(d *tool.Definition) { d.Mode = tool.ModeParallel }, changes: true},
		"defer":           {mutate: func(d *tool.Definition) { d.DeferLoading = true }, changes: true},
		"condition":       {mutate: func(d *tool.Definition) { d.Condition = "true" }, changes: true},
		"timeout":         {mutate: func(d *tool.Definition) { d.Timeout = 5 }},
		"max content":     {mutate: func(d *tool.Definition) { d.MaxContentBytes = 10 }},
		"field boundary":  {mutate: func(d *tool.Definition) { d.Name, d.Description = "td", "" }, changes: true},
	}
	want := registry.ContentHash(&base)
	if got := registry.ContentHash(&base); got != want {
		t.Fatalf("ContentHash is not deterministic: %s then %s", want, got)
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			d := base
			tc.mutate(&d)
			if got := registry.ContentHash(&d); (got != want) != tc.changes {
				t.Errorf("ContentHash after changing %s = %s (base %s), want changed=%v", name, got, want, tc.changes)
			}
		})
	}
}

func TestUnregister(t *testing.T) {
	tests := map[string]struct {
		owner, by string
		name      string
		want      error
	}{
		"own tool":         {owner: "p", by: "p", name: "t"},
		"operator removes": {owner: "p", by: "", name: "t"},
		"other owner":      {owner: "p", by: "q", name: "t", want: registry.ErrNotOwner},
		"unknown name":     {owner: "p", by: "p", name: "nope", want: tool.ErrUnknownTool},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := newRegistry(t)
			mustRegister(t, r, "a", def("t"), tc.owner)
			err := r.Unregister("a", tc.name, tc.by)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Unregister(a, %q, %q) = %v, want %v", tc.name, tc.by, err, tc.want)
			}
			_, lookErr := r.Lookup("a", "t")
			if removed := errors.Is(lookErr, tool.ErrUnknownTool); removed != (tc.want == nil) {
				t.Errorf("Lookup after Unregister = %v, want removed=%v", lookErr, tc.want == nil)
			}
		})
	}
}

func TestUnregisterWrongScope(t *testing.T) {
	r := newRegistry(t)
	mustRegister(t, r, "", def("t"), "")
	err := r.Unregister("a", "t", "")
	if !errors.Is(err, tool.ErrUnknownTool) {
		t.Fatalf("Unregister(a, t) of a global tool = %v, want ErrUnknownTool", err)
	}
	if want := `registry: unknown tool "t" in scope "a"`; err.Error() != want {
		t.Errorf("Unregister error = %q, want %q", err, want)
	}
}

func TestRemoveOwner(t *testing.T) {
	r := newRegistry(t)
	mustRegister(t, r, "", def("g1"), "p")
	mustRegister(t, r, "a", def("a1"), "p")
	mustRegister(t, r, "a", def("a2"), "q")
	mustRegister(t, r, "", def("op"), "")
	removed := r.RemoveOwner("p")
	var got []string
	for _, e := range removed {
		got = append(got, e.Scope()+":"+e.Definition().Name)
	}
	if diff := cmp.Diff([]string{":g1", "a:a1"}, got); diff != "" {
		t.Errorf("RemoveOwner(p) mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"a2", "op"}, schemaNames(r, "a")); diff != "" {
		t.Errorf("Schemas(a) after RemoveOwner mismatch (-want +got):\n%s", diff)
	}
	if got := r.RemoveOwner("p"); len(got) != 0 {
		t.Errorf("second RemoveOwner(p) = %d entries, want 0", len(got))
	}
	if got := r.RemoveOwner(""); len(got) != 0 {
		t.Errorf("RemoveOwner(\"\") = %d entries, want 0 (operator tools are never removed this way)", len(got))
	}
	if tools, scopes := r.Count(); tools != 2 || scopes != 2 {
		t.Errorf("Count() = %d, %d, want 2, 2", tools, scopes)
	}
	// The owner's quota is free again.
	mustRegister(t, r, "a", def("a1"), "p")
}

func TestLimits(t *testing.T) {
	tests := map[string]struct {
		limits registry.Limits
		setup  func(*registry.Registry) error
	}{
		"tools per scope": {
			limits: registry.Limits{MaxToolsPerScope: 2},
			setup: func(r *registry.Registry) error {
				for _, n := range []string{"a", "b", "c"} {
					if _, err := r.Register("s", def(n), "p"+n); err != nil {
						return err
					}
				}
				return nil
			},
		},
		"tools per owner": {
			limits: registry.Limits{MaxToolsPerOwner: 2},
			setup: func(r *registry.Registry) error {
				for _, s := range []string{"x", "y", "z"} {
					if _, err := r.Register(s, def("t"), "p"); err != nil {
						return err
					}
				}
				return nil
			},
		},
		"schema objects": {
			setup: func(r *registry.Registry) error {
				var b strings.Builder
				b.WriteString(`{"type":"object","properties":{`)
				for i := range registry.MaxSchemaObjects {
					if i > 0 {
						b.WriteString(",")
					}
					b.WriteString(`"p` + strconv.Itoa(i) + `":{}`)
				}
				b.WriteString(`}}`)
				_, err := r.Register("", withParams("t", b.String()), "")
				return err
			},
		},
		// 30 levels of 1 KB keys above 1,900 subschemas: 48 KB, within every other
		// limit, and 58 MB of subschema locations, which took 4 s to compile.
		"schema pointers": {
			setup: func(r *registry.Registry) error {
				_, err := r.Register("", withParams("t", deepKeysSchema(30, 1900)), "")
				return err
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := newRegistry(t, registry.WithLimits(tc.limits))
			if err := tc.setup(r); !errors.Is(err, registry.ErrLimit) {
				t.Fatalf("setup = %v, want ErrLimit", err)
			}
		})
	}
}

func TestOperatorHasNoOwnerLimit(t *testing.T) {
	r := newRegistry(t, registry.WithLimits(registry.Limits{MaxToolsPerOwner: 1}))
	mustRegister(t, r, "a", def("t"), "")
	mustRegister(t, r, "b", def("t"), "")
}

func TestSchemaIsStrictJSON(t *testing.T) {
	r := newRegistry(t)
	_, err := r.Register("", withParams("t", `{"type":"object","type":"string"}`), "")
	if !errors.Is(err, registry.ErrInvalidSchema) || !errors.Is(err, jsonx.ErrDuplicateKey) {
		t.Fatalf("Register(duplicate key schema) = %v, want ErrInvalidSchema and jsonx.ErrDuplicateKey", err)
	}
}

// deepKeysSchema nests levels objects under 1 KB keys of emoji (whose pointer tokens
// the library percent-encodes to 3 KB) above leaves empty subschemas.
func deepKeysSchema(levels, leaves int) string {
	var b strings.Builder
	key := strings.Repeat("\U0001F600", 250)
	b.WriteString(`{"type":"object","properties":{`)
	for range levels {
		b.WriteString(`"` + key + `":{"properties":{`)
	}
	for i := range leaves {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"` + strconv.Itoa(i) + `":{}`)
	}
	b.WriteString(strings.Repeat(`}}`, levels+1))
	return b.String()
}
