package registry_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/toolsd/toolsd/internal/registry"
)

// validateDoc is a ~200-byte argument document for readFileSchema.
const validateDoc = `{"path":"/home/user/project/src/internal/registry/registry.go","offset":120,` +
	`"limit":400,"mode":"text","tags":["go","registry","scopes","restrictions","schemas"]}`

func registry10k(tb testing.TB) *registry.Registry {
	tb.Helper()
	r := registry.New(registry.WithLimits(registry.Limits{MaxToolsPerScope: 10000}))
	for i := range 10000 {
		mustRegister(tb, r, "", def("tool_"+strconv.Itoa(i)), "")
	}
	mustRegister(tb, r, "preset", def("preset_tool"), "")
	mustRestrict(tb, r, "preset/agent", nil, []string{"tool_7"})
	mustRegister(tb, r, "preset/agent", def("agent_tool"), "")
	return r
}

// TestSchemas10kIsCached pins the cache: after the first call, Schemas over 10,000
// tools returns the same projection without allocating.
func TestSchemas10kIsCached(t *testing.T) {
	r := registry10k(t)
	first, fp := r.Schemas("preset/agent/session")
	if len(first) != 10001 {
		t.Fatalf("Schemas = %d tools, want 10001", len(first))
	}
	allocs := testing.AllocsPerRun(10, func() {
		s, f := r.Schemas("preset/agent/session")
		if &s[0] != &first[0] || f != fp {
			t.Fatal("Schemas recomputed the projection")
		}
	})
	if allocs != 0 {
		t.Errorf("cached Schemas allocs = %v, want 0", allocs)
	}
}

func BenchmarkLookup(b *testing.B) {
	r := registry10k(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Lookup("preset/agent/session", "tool_5000"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLookupParallel(b *testing.B) {
	r := registry10k(b)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := r.Lookup("preset/agent/session", "tool_5000"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkSchemas10k(b *testing.B) {
	r := registry10k(b)
	r.Schemas("preset/agent/session")
	b.ReportAllocs()
	for b.Loop() {
		if s, _ := r.Schemas("preset/agent/session"); len(s) != 10001 {
			b.Fatal(len(s))
		}
	}
}

// BenchmarkSchemas10kRecompute measures the first call after a change.
func BenchmarkSchemas10kRecompute(b *testing.B) {
	r := registry10k(b)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		mustRegister(b, r, "preset/agent", def("churn_"+strconv.Itoa(i)), "")
		if s, _ := r.Schemas("preset/agent/session"); len(s) < 10001 {
			b.Fatal(len(s))
		}
	}
}

func BenchmarkValidateArguments(b *testing.B) {
	r := registry.New()
	e := mustRegister(b, r, "", withParams("read_file", readFileSchema), "")
	doc := validateDoc
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		if err := e.ValidateArguments(doc); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkValidateArguments16KiB validates the 16 KiB arguments of make bench's large
// workload: one string property holding nearly all of it, which validation reads in
// place (B/op stays far below the argument's size).
func BenchmarkValidateArguments16KiB(b *testing.B) {
	r := registry.New()
	e := mustRegister(b, r, "", withParams("read_file", readFileSchema), "")
	doc := `{"path":"` + strings.Repeat("x", 16<<10-len(`{"path":""}`)) + `"}`
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		if err := e.ValidateArguments(doc); err != nil {
			b.Fatal(err)
		}
	}
}

// derivedSchema is what the Go SDK derives for a struct with jsonschema tags (an
// integer enum, fractional bounds, a pattern, a format) and a nested struct behind a
// $ref, as generators that share named types write it.
const derivedSchema = `{"type":"object","properties":{` +
	`"mode":{"type":"string","enum":["fast","slow"],"default":"fast"},` +
	`"level":{"type":"integer","enum":[1,2,3],"minimum":0,"maximum":10},` +
	`"ratio":{"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1.5},` +
	`"name":{"type":"string","minLength":1,"maxLength":64,"pattern":"^[a-z]+$"},` +
	`"when":{"type":"string","format":"date-time"},` +
	`"owner":{"$ref":"#/$defs/user"}},` +
	`"required":["mode","name"],"additionalProperties":false,` +
	`"$defs":{"user":{"type":"object","properties":{"id":{"type":"integer","minimum":0,"maximum":4294967295},"email":{"type":"string","format":"email"}},"required":["id"]}}}`

const derivedDoc = `{"mode":"slow","level":2,"ratio":0.75,"name":"registry",` +
	`"when":"2026-12-01T20:00:00Z","owner":{"id":42,"email":"a@example.com"}}`

func BenchmarkValidateArgumentsDerived(b *testing.B) {
	r := registry.New()
	e := mustRegister(b, r, "", withParams("derived", derivedSchema), "")
	doc := derivedDoc
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		if err := e.ValidateArguments(doc); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkResolveToolSet(b *testing.B) {
	r := registry10k(b)
	for i := range 10 {
		mustRegister(b, r, "preset", withCondition("cond_"+strconv.Itoa(i), `model.provider == "anthropic" && step > 0`), "")
	}
	env := registry.ConditionEnv{Step: 1, Model: registry.ModelSelection{Provider: "anthropic"}}
	b.ReportAllocs()
	for b.Loop() {
		ts, err := r.ResolveToolSet(b.Context(), "preset/agent", env)
		if err != nil {
			b.Fatal(err)
		}
		if err := r.ReleaseToolSet(ts.ID()); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkToolSetLookup(b *testing.B) {
	r := registry10k(b)
	ts, err := r.ResolveToolSet(b.Context(), "preset/agent", registry.ConditionEnv{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ts.Lookup("tool_5000"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRegisterWithLiveToolSets measures one registration and one unregistration
// while 10,000 tool sets of 100 other tenants are live: the change cannot affect any of
// them, so it should not cost time proportional to them under the registry's lock
// ("no live sets" is the same change in an empty registry, for comparison).
func BenchmarkRegisterWithLiveToolSets(b *testing.B) {
	b.Run("no live sets", func(b *testing.B) {
		r := registry.New()
		d := def("fresh")
		b.ReportAllocs()
		for b.Loop() {
			mustRegister(b, r, "quiet/agent", d, "")
			if err := r.Unregister("quiet/agent", "fresh", ""); err != nil {
				b.Fatal(err)
			}
		}
	})
	r := registry.New()
	for i := range 20 {
		mustRegister(b, r, "", def("global_"+strconv.Itoa(i)), "")
	}
	for t := range 100 {
		tenant := "tenant_" + strconv.Itoa(t)
		mustRegister(b, r, tenant, def("own_tool"), "")
		for s := range 100 {
			if _, err := r.ResolveToolSet(b.Context(), tenant+"/agent/s"+strconv.Itoa(s), registry.ConditionEnv{}); err != nil {
				b.Fatal(err)
			}
		}
	}
	for _, bc := range []struct{ name, scope, tool string }{
		{"other tenant", "quiet/agent", "fresh"},
		{"other tenant shadowing a global tool", "quiet/agent", "global_7"},
		{"global scope", "", "fresh"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			d := def(bc.tool)
			b.ReportAllocs()
			for b.Loop() {
				mustRegister(b, r, bc.scope, d, "")
				if err := r.Unregister(bc.scope, bc.tool, ""); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// manyScopes returns n distinct scopes: tenants of ten agents each, so that the scopes
// share tenant roots and parents as a deployment's do.
func manyScopes(n int) []string {
	scopes := make([]string, n)
	for i := range scopes {
		scopes[i] = "tenant_" + strconv.Itoa(i/10) + "/agent_" + strconv.Itoa(i%10)
	}
	return scopes
}

// BenchmarkRegisterManyScopes registers one tool into each of N new scopes and reports
// the cost per scope, which should not grow with the scopes that already exist.
func BenchmarkRegisterManyScopes(b *testing.B) {
	for _, n := range []int{1000, 4000, 16000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			scopes := manyScopes(n)
			d := def("scoped")
			b.ReportAllocs()
			for b.Loop() {
				r := registry.New()
				for _, s := range scopes {
					mustRegister(b, r, s, d, "")
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/scope")
		})
	}
}

// BenchmarkUnregisterManyScopes removes the only tool of each of N scopes, one by one
// (Unregister) and all at once (RemoveOwner: a provider disconnecting), and reports the
// cost per scope, which should not grow with the scopes that remain.
func BenchmarkUnregisterManyScopes(b *testing.B) {
	for _, n := range []int{1000, 4000, 16000} {
		scopes := manyScopes(n)
		d := def("scoped")
		fill := func(b *testing.B, owner string) *registry.Registry {
			b.StopTimer()
			defer b.StartTimer()
			r := registry.New(registry.WithLimits(registry.Limits{MaxToolsPerOwner: n}))
			for _, s := range scopes {
				mustRegister(b, r, s, d, owner)
			}
			return r
		}
		b.Run("Unregister/"+strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r := fill(b, "")
				for _, s := range scopes {
					if err := r.Unregister(s, "scoped", ""); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/scope")
		})
		b.Run("RemoveOwner/"+strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r := fill(b, "provider")
				if got := len(r.RemoveOwner("provider")); got != n {
					b.Fatalf("RemoveOwner removed %d tools, want %d", got, n)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/scope")
		})
	}
}

// BenchmarkPinEvictManyTenants registers (and unregisters) a new name while the pin
// store is full with the pins of N tenants: each new pin evicts one from the largest
// tenant, which should not cost time proportional to the tenants under the registry's
// lock.
func BenchmarkPinEvictManyTenants(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			pins := make([]registry.Pin, 0, registry.MaxPins)
			for i := range registry.MaxPins {
				pins = append(pins, registry.Pin{Scope: "tenant_" + strconv.Itoa(i%n), Name: "tool_" + strconv.Itoa(i), Hash: "h"})
			}
			r := registry.New(registry.WithPinning(registry.PinRefuse), registry.WithPins(pins))
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				scope, name := "tenant_"+strconv.Itoa(i%n), "fresh_"+strconv.Itoa(i)
				mustRegister(b, r, scope, def(name), "")
				if err := r.Unregister(scope, name, ""); err != nil {
					b.Fatal(err)
				}
			}
			if got, _ := r.Pins(); len(got) != registry.MaxPins {
				b.Fatalf("Pins() = %d pins, want %d", len(got), registry.MaxPins)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/pin")
		})
	}
}
