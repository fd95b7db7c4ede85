package registry_test

import (
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/toolsd/toolsd/internal/registry"
	"github.com/toolsd/toolsd/internal/tool"
)

const objectSchema = `{"type":"object"}`

// def returns a minimal valid definition.
func def(name string) tool.Definition {
	return tool.Definition{Name: name, Description: "the " + name + " tool", Parameters: []byte(objectSchema)}
}

func withParams(name, params string) tool.Definition {
	d := def(name)
	d.Parameters = []byte(params)
	return d
}

func withCondition(name, cond string) tool.Definition {
	d := def(name)
	d.Condition = cond
	return d
}

func newRegistry(tb testing.TB, opts ...registry.Option) *registry.Registry {
	tb.Helper()
	return registry.New(append([]registry.Option{registry.WithLogger(zaptest.NewLogger(tb))}, opts...)...)
}

func mustRegister(tb testing.TB, r *registry.Registry, scope string, d tool.Definition, owner string) *registry.Entry {
	tb.Helper()
	e, err := r.Register(scope, d, owner)
	if err != nil {
		tb.Fatalf("Register(%q, %q, %q) = %v, want nil", scope, d.Name, owner, err)
	}
	return e
}

func mustRestrict(tb testing.TB, r *registry.Registry, scope string, allow, deny []string) string {
	tb.Helper()
	id, err := r.Restrict(scope, allow, deny)
	if err != nil {
		tb.Fatalf("Restrict(%q, %v, %v) = %v, want nil", scope, allow, deny, err)
	}
	return id
}

// schemaNames returns the names Schemas(scope) lists, in order.
func schemaNames(r *registry.Registry, scope string) []string {
	s, _ := r.Schemas(scope)
	names := make([]string, 0, len(s))
	for _, x := range s {
		names = append(names, x.Name)
	}
	return names
}

// fakeClock is a manually advanced clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_700_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// history is a fixed session history.
type history struct{ called, succeeded map[string]bool }

func (h history) Called(name string) bool    { return h.called[name] }
func (h history) Succeeded(name string) bool { return h.succeeded[name] }
