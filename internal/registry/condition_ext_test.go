package registry_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/toolsd/toolsd/internal/registry"
	"github.com/toolsd/toolsd/internal/tool"
)

func TestConditionCompileErrors(t *testing.T) {
	tests := map[string]struct {
		cond string
		want string // substring, including line:column
	}{
		"undeclared":         {cond: `foo == 1`, want: `1:1: undeclared reference to 'foo'`},
		"typo in model":      {cond: `model.provder == "x"`, want: `1:6: undeclared reference to 'model.provder'`},
		"second line":        {cond: "step > 1 &&\n  sesion.called(\"x\")", want: "2:16: undeclared reference to 'sesion.called'"},
		"syntax":             {cond: `step >`, want: "1:7: "},
		"not bool":           {cond: `turn + 1`, want: "must return bool, not int"},
		"string not bool":    {cond: `scope`, want: "must return bool, not string"},
		"wrong argument":     {cond: `session.called(1)`, want: "1:15: found no matching overload for 'session.called'"},
		"type mismatch":      {cond: `turn == "1"`, want: "1:6: found no matching overload for '_==_'"},
		"unknown function":   {cond: `session.forget("x")`, want: "1:15: undeclared reference to 'forget'"},
		"no writes possible": {cond: `scope = "x"`, want: "1:7: "},
		"computed pattern":   {cond: `scope.matches(model.model)`, want: "1:20: the pattern of matches must be a string literal"},
		"computed pattern 2": {cond: `matches(scope, "^" + model.model)`, want: "1:20: the pattern of matches must be a string literal"},
		"huge pattern":       {cond: `scope.matches("` + strings.Repeat(`.{0,1000}`, 20) + `")`, want: "exceeds"},
		// Type-checking nested maps takes time cubic in their depth: seconds at 120.
		"deep macros":       {cond: "step > 0 &&\n  " + strings.Repeat("[1].map(x, ", 120) + "true" + strings.Repeat(")", 120) + " == []", want: "2:"},
		"too deep to parse": {cond: strings.Repeat("(", 300) + "true" + strings.Repeat(")", 300), want: "tool \"t\" condition: 1:1: expression recursion limit exceeded"},
		"nine macros":       {cond: strings.Repeat("[1].all(x, ", 9) + "true" + strings.Repeat(")", 9), want: "macros nest more than 8 deep"},
		// Type-checking nested list and map literals takes time cubic in their depth too:
		// 250 lists (511 bytes) took a second and a half, eight of them in 4 KiB about twelve.
		"deep lists":          {cond: "step > 0 &&\n  " + strings.Repeat("[", 250) + strings.Repeat("]", 250) + ".size() > 0", want: "2:19: list and map literals nest more than 16 deep"},
		"seventeen literals":  {cond: strings.Repeat("{1: [", 8) + "[1]" + strings.Repeat("]}", 8) + ".size() > 0", want: "1:41: list and map literals nest more than 16 deep"},
		"lists built by maps": {cond: strings.Repeat("[1].map(x, ", 8) + strings.Repeat("[", 9) + strings.Repeat("]", 9) + strings.Repeat(")", 8) + " != []", want: "list and map literals nest more than 16 deep"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := newRegistry(t)
			_, err := r.Register("", withCondition("t", tc.cond), "")
			if !errors.Is(err, registry.ErrInvalidCondition) {
				t.Fatalf("Register(condition %q) = %v, want ErrInvalidCondition", tc.cond, err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Register(condition %q) = %q, want it to contain %q", tc.cond, err, tc.want)
			}
		})
	}
}

// Macros nest up to 8 deep.
func TestConditionMacroNesting(t *testing.T) {
	r := newRegistry(t)
	cond := strings.Repeat("[1].map(x, ", 8) + "true" + strings.Repeat(")", 8) + " != []"
	if _, err := r.Register("", withCondition("t", cond), ""); err != nil {
		t.Fatalf("Register(8 nested macros) = %v, want it accepted", err)
	}
}

// List and map literals nest up to 16 deep, the lists the map macro builds included.
func TestConditionLiteralNesting(t *testing.T) {
	r := newRegistry(t)
	for i, cond := range []string{
		strings.Repeat("[", 16) + strings.Repeat("]", 16) + ".size() > 0",
		strings.Repeat("{1: [", 8) + strings.Repeat("]}", 8) + ".size() > 0",
		strings.Repeat("[1].map(x, ", 8) + strings.Repeat("[", 8) + strings.Repeat("]", 8) + strings.Repeat(")", 8) + " != []",
	} {
		if _, err := r.Register("", withCondition("t"+strconv.Itoa(i), cond), ""); err != nil {
			t.Errorf("Register(condition %q) = %v, want it accepted", cond, err)
		}
	}
}

// Literal patterns are what conditions may match with, either call form.
func TestConditionLiteralPatterns(t *testing.T) {
	r := newRegistry(t)
	for i, cond := range []string{`scope.matches("^agents/")`, `matches(model.model, "^claude-")`} {
		if _, err := r.Register("", withCondition("t"+strconv.Itoa(i), cond), ""); err != nil {
			t.Errorf("Register(condition %q) = %v, want it accepted", cond, err)
		}
	}
}

func TestConditionInputs(t *testing.T) {
	env := registry.ConditionEnv{
		SessionID: "s1", Turn: 3, Step: 2,
		Model: registry.ModelSelection{Provider: "anthropic", Model: "claude", ReasoningEffort: "high"},
		History: history{
			called:    map[string]bool{"get_db_schema": true, "run_query": true},
			succeeded: map[string]bool{"get_db_schema": true},
		},
	}
	tests := map[string]struct {
		cond string
		env  *registry.ConditionEnv
		want bool
	}{
		"scope":                    {cond: `scope == "preset/agent"`, want: true},
		"scope other":              {cond: `scope == "preset"`, want: false},
		"scope startsWith":         {cond: `scope.startsWith("preset/")`, want: true},
		"turn":                     {cond: `turn == 3`, want: true},
		"turn other":               {cond: `turn > 3`, want: false},
		"step":                     {cond: `step == 2`, want: true},
		"step other":               {cond: `step == 0`, want: false},
		"model provider":           {cond: `model.provider == "anthropic"`, want: true},
		"model provider other":     {cond: `model.provider == "openai"`, want: false},
		"model model":              {cond: `model.model == "claude"`, want: true},
		"model reasoning effort":   {cond: `model.reasoning_effort in ["high", "max"]`, want: true},
		"model effort other":       {cond: `model.reasoning_effort == "low"`, want: false},
		"called":                   {cond: `session.called("get_db_schema")`, want: true},
		"not called":               {cond: `session.called("drop_table")`, want: false},
		"succeeded":                {cond: `session.succeeded("get_db_schema")`, want: true},
		"called but not succeeded": {cond: `session.succeeded("run_query")`, want: false},
		"combined":                 {cond: `session.called("get_db_schema") && step > 0 && model.provider != ""`, want: true},
		"nil history called":       {cond: `session.called("get_db_schema")`, env: &registry.ConditionEnv{}, want: false},
		"nil history succeeded":    {cond: `!session.succeeded("get_db_schema")`, env: &registry.ConditionEnv{}, want: true},
		"huge turn clamps":         {cond: `turn > 0`, env: &registry.ConditionEnv{Turn: 1 << 63}, want: true},
		"constant true":            {cond: `true`, want: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := newRegistry(t)
			mustRegister(t, r, "", withCondition("cond", tc.cond), "")
			e := env
			if tc.env != nil {
				e = *tc.env
			}
			ts, err := r.ResolveToolSet(t.Context(), "preset/agent", e)
			if err != nil {
				t.Fatalf("ResolveToolSet = %v", err)
			}
			_, err = ts.Lookup("cond")
			if (err == nil) != tc.want {
				t.Errorf("condition %q admitted=%v (%v), want %v", tc.cond, err == nil, err, tc.want)
			}
		})
	}
}

func TestConditionEvaluatedOncePerResolution(t *testing.T) {
	r := newRegistry(t)
	mustRegister(t, r, "", withCondition("a", `session.called("x")`), "")
	mustRegister(t, r, "", withCondition("b", `session.called("x") && session.called("y")`), "")
	h := &countingHistory{}
	if _, err := r.ResolveToolSet(t.Context(), "", registry.ConditionEnv{History: h}); err != nil {
		t.Fatal(err)
	}
	if h.calls != 2 {
		t.Errorf("History.Called calls = %d, want 2 (each condition once, && short-circuits)", h.calls)
	}
}

type countingHistory struct{ calls int }

func (h *countingHistory) Called(string) bool    { h.calls++; return false }
func (h *countingHistory) Succeeded(string) bool { return false }

func TestConditionCostLimit(t *testing.T) {
	list := "[" + strings.TrimSuffix(strings.Repeat("1,", 100), ",") + "]"
	expensive := list + `.all(x, ` + list + `.all(y, x + y > 0))`
	tests := map[string]struct {
		opts []registry.Option
		cond string
		fail bool
	}{
		"default limit stops nested loops": {cond: expensive, fail: true},
		"raised limit lets it run":         {cond: expensive, opts: []registry.Option{registry.WithConditionCostLimit(1 << 30)}},
		"tiny limit stops a cheap one":     {cond: `scope.startsWith("a") && step > 1 && turn > 1`, opts: []registry.Option{registry.WithConditionCostLimit(1)}, fail: true},
		"default limit runs a cheap one":   {cond: `scope.startsWith("a") && step > 1 && turn > 1`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := newRegistry(t, tc.opts...)
			mustRegister(t, r, "", withCondition("heavy", tc.cond), "")
			mustRegister(t, r, "", def("plain"), "")
			ts, err := r.ResolveToolSet(t.Context(), "a", registry.ConditionEnv{Turn: 5, Step: 5})
			if !tc.fail {
				if err != nil {
					t.Fatalf("ResolveToolSet = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, registry.ErrActivationFailed) || ts != nil {
				t.Fatalf("ResolveToolSet = %v, %v, want nil, ErrActivationFailed", ts, err)
			}
			if !strings.Contains(err.Error(), `"heavy"`) || !strings.Contains(err.Error(), "cost limit") {
				t.Errorf("ResolveToolSet error = %q, want it to name the tool and the cost limit", err)
			}
		})
	}
}

func TestConditionRuntimeErrorFailsResolution(t *testing.T) {
	r := newRegistry(t)
	mustRegister(t, r, "", withCondition("divides", `10 / (step - 2) > 1`), "")
	_, err := r.ResolveToolSet(t.Context(), "", registry.ConditionEnv{Step: 2})
	if !errors.Is(err, registry.ErrActivationFailed) || !strings.Contains(err.Error(), `"divides"`) {
		t.Fatalf("ResolveToolSet = %v, want ErrActivationFailed naming the tool", err)
	}
}

func TestConditionHonoursContext(t *testing.T) {
	r := newRegistry(t)
	mustRegister(t, r, "", withCondition("c", "true"), "")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := r.ResolveToolSet(ctx, "", registry.ConditionEnv{})
	if !errors.Is(err, context.Canceled) || errors.Is(err, registry.ErrActivationFailed) {
		t.Fatalf("ResolveToolSet(cancelled) = %v, want context.Canceled (not an activation failure)", err)
	}
}

func TestConditionalToolsNeedAToolSet(t *testing.T) {
	r := newRegistry(t)
	mustRegister(t, r, "", withCondition("cond", "true"), "")
	_, err := r.Lookup("", "cond")
	_, never := r.Lookup("", "never")
	if !errors.Is(err, tool.ErrUnknownTool) {
		t.Fatalf("Lookup(conditional) = %v, want ErrUnknownTool", err)
	}
	if strings.Replace(err.Error(), "cond", "never", 1) != never.Error() {
		t.Errorf("Lookup(conditional) = %q, want the unknown-tool text %q", err, never)
	}
	if got := schemaNames(r, ""); len(got) != 0 {
		t.Errorf("Schemas(\"\") = %v, want conditional tools excluded", got)
	}
	e, _ := r.ResolveToolSet(t.Context(), "", registry.ConditionEnv{})
	if got, err := e.Lookup("cond"); err != nil || !got.Conditional() {
		t.Errorf("ToolSet.Lookup(cond) = %v, %v, want the conditional entry", got, err)
	}
}

// nested wraps seed depth times in f, each level taking the previous as x.
func nested(seed, f string, depth int) string {
	e := seed
	for range depth {
		e = "[" + e + ", 1].map(x, " + f + ")[0]"
	}
	return e
}

// A condition's values are bounded in size, not only its steps: each case is a few
// hundred bytes, cheap by step count, whose value grows fourfold per level (strings and
// lists concatenated as dyn, lists that share their elements), or that concatenates dyn
// strings of kilobytes at a cost of 1 each.
func TestConditionValueSizeLimit(t *testing.T) {
	twenty := "[" + strings.TrimSuffix(strings.Repeat("1,", 20), ",") + "]"
	tests := map[string]struct {
		cond, want string
	}{
		"dyn string doubling":       {cond: `size(string(` + nested("model.model", "x + x + x + x", 7) + `)) > 0`, want: "limit exceeded"},
		"lazily concatenated lists": {cond: `2 in ` + nested("[1]", "x + x + x + x", 8), want: "memory limit"},
		"lists sharing elements":    {cond: nested("[1]", "[x, x, x, x]", 8) + ` == ` + nested("[1]", "[x, x, x, x]", 8), want: "memory limit"},
		"dyn concatenation in a loop": {
			cond: twenty + `.all(i, size(string(` + nested("model.model", "x + x", 5) + `)) > 0)`,
			want: "cost limit",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := newRegistry(t)
			mustRegister(t, r, "", withCondition("big", tc.cond), "")
			ts, err := r.ResolveToolSet(t.Context(), "a", registry.ConditionEnv{Model: registry.ModelSelection{Model: strings.Repeat("m", 256)}})
			if !errors.Is(err, registry.ErrActivationFailed) || ts != nil {
				t.Fatalf("ResolveToolSet = %v, %v, want nil, ErrActivationFailed", ts, err)
			}
			if !strings.Contains(err.Error(), `"big"`) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ResolveToolSet error = %q, want it to name the tool and contain %q", err, tc.want)
			}
		})
	}
}

// Conditions over small lists and strings stay within the size limit.
func TestConditionValueSizeLimitAdmitsOrdinaryConditions(t *testing.T) {
	r := newRegistry(t)
	mustRegister(t, r, "", withCondition("ok", `[model.model, scope, "x"].exists(y, y == scope) && [[1, 2], [3]].all(l, size(l) > 0) && size(model.model + model.model) == 512`), "")
	ts, err := r.ResolveToolSet(t.Context(), "a", registry.ConditionEnv{Model: registry.ModelSelection{Model: strings.Repeat("m", 256)}})
	if err != nil {
		t.Fatalf("ResolveToolSet = %v", err)
	}
	if _, err := ts.Lookup("ok"); err != nil {
		t.Errorf("Lookup(ok) = %v, want the condition to hold", err)
	}
}

// TestConditionMatchesChargedByProgram: a match runs in time proportional to the text
// times the pattern's compiled program, and is charged so. CEL charged it by the text
// and the pattern's length: ".{0,1000}x" is 10 characters and some 3,000 instructions,
// so a condition could spend its cost limit on matches hundreds of times more slowly
// than on anything else.
func TestConditionMatchesChargedByProgram(t *testing.T) {
	long := strings.Repeat("a", 256)
	for name, tc := range map[string]struct {
		cond string
		fail bool
	}{
		"a short pattern stays cheap":      {cond: `model.model.matches("^claude-")`},
		"a pattern of many instructions":   {cond: `model.model.matches(".{0,1000}x")`, fail: true},
		"the same, in the function form":   {cond: `matches(model.model, ".{0,1000}x")`, fail: true},
		"the same pattern on a short text": {cond: `model.provider.matches(".{0,1000}x")`},
	} {
		t.Run(name, func(t *testing.T) {
			r := newRegistry(t, registry.WithConditionCostLimit(1000))
			mustRegister(t, r, "", withCondition("m", tc.cond), "")
			_, err := r.ResolveToolSet(t.Context(), "", registry.ConditionEnv{Model: registry.ModelSelection{Provider: "x", Model: long}})
			if tc.fail != (err != nil) {
				t.Fatalf("ResolveToolSet(%s) = %v, want failure %v", tc.cond, err, tc.fail)
			}
			if tc.fail && (!errors.Is(err, registry.ErrActivationFailed) || !strings.Contains(err.Error(), "cost limit")) {
				t.Errorf("ResolveToolSet(%s) = %v, want ErrActivationFailed for the cost limit", tc.cond, err)
			}
		})
	}
}

// TestConditionZoneLookupsCharged: a timestamp's field in a named time zone loads the
// zone's file (time.LoadLocation reads and parses it at every call; an unknown name
// searches every source first), tens of microseconds, and CEL charged the lookup by the
// name's length: 2 for "America/New_York". A condition spending the default cost limit
// on lookups ran some 70 ms (an unknown name, absorbed by `|| true`, 180 ms), tens of
// times longer than it can spend on other operations. A lookup by name is now charged
// as a zone file's load; an offset ("+01:00") still costs only its text.
func TestConditionZoneLookupsCharged(t *testing.T) {
	steps := "[" + strings.TrimSuffix(strings.Repeat("1,", 100), ",") + "]"
	for name, tc := range map[string]struct {
		cond string
		fail bool
	}{
		"a named zone":              {cond: steps + `.all(x, timestamp(0).getHours("America/New_York") >= 0)`, fail: true},
		"an unknown zone, absorbed": {cond: steps + `.all(x, timestamp(0).getHours("Nowhere/None") >= 0 || true)`, fail: true},
		"an offset":                 {cond: steps + `.all(x, timestamp(0).getHours("+01:00") >= 0)`},
		"one named zone":            {cond: `timestamp(0).getHours("Europe/Paris") == 1`},
	} {
		t.Run(name, func(t *testing.T) {
			r := newRegistry(t) // the default cost limit
			mustRegister(t, r, "", withCondition("z", tc.cond), "")
			_, err := r.ResolveToolSet(t.Context(), "", registry.ConditionEnv{})
			if tc.fail != (err != nil) {
				t.Fatalf("ResolveToolSet(%s) = %v, want failure %v", name, err, tc.fail)
			}
			if tc.fail && (!errors.Is(err, registry.ErrActivationFailed) || !strings.Contains(err.Error(), "cost limit")) {
				t.Errorf("ResolveToolSet(%s) = %v, want ErrActivationFailed for the cost limit", name, err)
			}
		})
	}
}
