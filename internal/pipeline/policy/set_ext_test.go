package policy_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/toolsd/toolsd/internal/pipeline"
	"github.com/toolsd/toolsd/internal/pipeline/policy"
	"github.com/toolsd/toolsd/internal/tool"
)

func mustParse(t testing.TB, src string) *policy.Set {
	t.Helper()
	s, err := policy.Parse([]byte(src), "config.yaml")
	if err != nil {
		t.Fatalf("Parse() error = %v", err)
	}
	return s
}

func TestRuleMatching(t *testing.T) {
	s := mustParse(t, `
rules:
  - scope: "global/**"
    tool: "fs_*"
    decision: ask
    reason: "file access"
  - scope: "global/*/sandbox"
    tool: "shell"
    decision: allow
  - scope: "global/agents/intern"
    tool: "*"
    decision: deny
    reason: "interns may not use tools"
  - tool: "web_fetch"
    when: 'scope.startsWith("global/agents/") && tool == "web_fetch" && has(args.url) && args.url.startsWith("http://")'
    decision: deny
    reason: "plain http is not allowed"
`)
	tests := map[string]struct {
		scope, name, args string
		want              pipeline.Verdict
	}{
		"** matches any depth":         {scope: "global/agents/a/b", name: "fs_read", want: pipeline.Verdict{Decision: pipeline.Ask, Reason: "file access"}},
		"** matches zero segments":     {scope: "global", name: "fs_write", want: pipeline.Verdict{Decision: pipeline.Ask, Reason: "file access"}},
		"scope mismatch":               {scope: "other", name: "fs_read"},
		"single-segment star":          {scope: "global/x/sandbox", name: "shell", want: pipeline.Verdict{Decision: pipeline.Allow}},
		"star does not cross segments": {scope: "global/x/y/sandbox", name: "shell"},
		"tool star crosses slashes":    {scope: "global/x", name: "fs_admin/delete", want: pipeline.Verdict{Decision: pipeline.Ask, Reason: "file access"}},
		"deny beats ask":               {scope: "global/agents/intern", name: "fs_read", want: pipeline.Verdict{Decision: pipeline.Deny, Reason: "interns may not use tools"}},
		"condition true":               {scope: "global/agents/a", name: "web_fetch", args: `{"url":"http://x"}`, want: pipeline.Verdict{Decision: pipeline.Deny, Reason: "plain http is not allowed"}},
		"condition false":              {scope: "global/agents/a", name: "web_fetch", args: `{"url":"https://x"}`},
		"condition guarded by has":     {scope: "global/agents/a", name: "web_fetch", args: `{}`},
		"condition sees scope":         {scope: "elsewhere", name: "web_fetch", args: `{"url":"http://x"}`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if tc.args == "" {
				tc.args = `{}`
			}
			if got := s.PreExecute(t.Context(), exec(tc.scope, tc.name, tc.args), nil); got != tc.want {
				t.Errorf("PreExecute(%s, %s, %s) = %+v, want %+v", tc.scope, tc.name, tc.args, got, tc.want)
			}
		})
	}
}

func TestConditionErrorsFailClosed(t *testing.T) {
	s := mustParse(t, `
rules:
  - tool: echo
    decision: allow
  - tool: echo
    when: 'args.text.contains("forbidden")'
    decision: deny
    reason: "echo may not say forbidden"
  - tool: loop
    when: 'args.items.all(x, args.items.all(y, args.items.all(z, x + y + z >= 0)))'
    decision: allow
`)
	items := strings.TrimSuffix(strings.Repeat("1,", 200), ",")
	tests := map[string]struct {
		e          *tool.Exec
		wantDetail string
	}{
		"missing key":          {e: exec("g", "echo", `{"other":1}`), wantDetail: "config.yaml:6:11: policy.rules[1].when: no such key: text"},
		"cost limit":           {e: exec("g", "loop", fmt.Sprintf(`{"items":[%s]}`, items)), wantDetail: "config.yaml:10:11: policy.rules[2].when: operation cancelled: actual cost limit exceeded"},
		"arguments not JSON":   {e: exec("g", "echo", `{"text":`), wantDetail: "config.yaml:6:11: policy.rules[1].when: arguments cannot be decoded: unexpected EOF"},
		"data after arguments": {e: exec("g", "echo", `{"text":"x"} x`), wantDetail: "config.yaml:6:11: policy.rules[1].when: arguments cannot be decoded: data after the arguments"},
		// Valid arguments (an exponent within ±400) that a float64 cannot hold.
		"number out of range": {e: exec("g", "echo", `{"text":"x","n":1e399}`), wantDetail: "config.yaml:6:11: policy.rules[1].when: arguments cannot be decoded: number 1e399: strconv.ParseFloat: parsing \"1e399\": value out of range"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			v := s.PreExecute(t.Context(), tc.e, nil)
			if v.Decision != pipeline.Deny || v.Reason != "call denied by policy (rule evaluation failed)" || !strings.HasPrefix(v.UserReason, tc.wantDetail) {
				t.Errorf("PreExecute() = %+v, want a fail-closed deny detailing %q", v, tc.wantDetail)
			}
		})
	}
}

// TestConditionOnAnOutOfRangeNumberIsCut: a number beyond a double's range fails the
// condition closed, with the decode error as the denial's detail. That error quotes the
// number, whose digits the model chose (a megabyte of them is a valid argument): the
// detail is cut at MaxEvalErrorBytes, as an evaluation error's is.
func TestConditionOnAnOutOfRangeNumberIsCut(t *testing.T) {
	s := mustParse(t, "rules:\n  - tool: echo\n    when: 'args.n > 0'\n    decision: deny\n")
	args := `{"n":1` + strings.Repeat("0", 1<<20) + `}`
	v := s.PreExecute(t.Context(), exec("g", "echo", args), nil)
	const where = "config.yaml:3:11: policy.rules[0].when: "
	if v.Decision != pipeline.Deny || !strings.HasPrefix(v.UserReason, where+"arguments cannot be decoded: number 1000") ||
		len(v.UserReason) > len(where)+policy.MaxEvalErrorBytes {
		t.Errorf("PreExecute() = %s with a detail of %d bytes starting %.80q, want a fail-closed deny detailing the decode error in at most %d bytes",
			v.Decision, len(v.UserReason), v.UserReason, len(where)+policy.MaxEvalErrorBytes)
	}
}

func TestSetInPipeline(t *testing.T) {
	s := mustParse(t, `
default: deny
rules:
  - tool: echo
    decision: allow
  - tool: echo
    when: 'args.text.contains("forbidden")'
    decision: deny
    reason: "echo may not say forbidden"
  - tool: echo
    when: 'args.text.contains("secret")'
    decision: deny
    reason: "matched secrets rule 12"
    user_reason: "blocked by the secrets policy"
    private: true
  - tool: rm
    decision: ask
    reason: "rm deletes files"
tools:
  echo: {max_result_bytes: 4}
`)
	res := resolverFunc(func(_ context.Context, c *tool.Call) (pipeline.Tool, error) {
		return &stubTool{def: tool.Definition{Name: c.Name}}, nil
	})
	disp := dispatcherFunc(func(context.Context, pipeline.Tool, *tool.Exec) tool.Result { return tool.Result{Content: "ok"} })
	p := pipeline.New(res, disp, pipeline.WithPolicy(s))
	tests := map[string]struct {
		name, args string
		wantCode   tool.Code
		wantMsg    string
		wantReason string
	}{
		"allowed":          {name: "echo", args: `{"text":"hi"}`},
		"denied":           {name: "echo", args: `{"text":"forbidden"}`, wantCode: tool.CodeDenied, wantMsg: "echo may not say forbidden"},
		"private":          {name: "echo", args: `{"text":"secret"}`, wantCode: tool.CodeDenied, wantMsg: "call denied by policy", wantReason: "blocked by the secrets policy"},
		"ask, no approver": {name: "rm", args: `{}`, wantCode: tool.CodeApprovalUnavailable, wantMsg: "call requires approval but no approver is available"},
		"default deny":     {name: "cat", args: `{}`, wantCode: tool.CodeDenied, wantMsg: "call denied by policy"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := p.Run(t.Context(), exec("global", tc.name, tc.args))
			if r.Code() != tc.wantCode {
				t.Fatalf("Run(%s %s) = %+v, want code %q", tc.name, tc.args, r, tc.wantCode)
			}
			if r.Err != nil && (r.Err.Message != tc.wantMsg || r.Err.Reason != tc.wantReason || strings.Contains(r.Content, "rule 12")) {
				t.Errorf("Run(%s %s).Err = %+v, want message %q reason %q", tc.name, tc.args, r.Err, tc.wantMsg, tc.wantReason)
			}
		})
	}
	// The per-tool result limit comes from the set too: "ok" fits 4 bytes, a reload
	// tightening it to 1 byte rejects the same result.
	p.SetPolicy(mustParse(t, "tools:\n  echo: {max_result_bytes: 1}\n"))
	if r := p.Run(t.Context(), exec("global", "echo", `{"text":"hi"}`)); r.Code() != tool.CodeResultTooLarge {
		t.Errorf("Run() after reload = %+v, want RESULT_TOO_LARGE", r)
	}
}

type stubTool struct{ def tool.Definition }

func (s *stubTool) Definition() *tool.Definition { return &s.def }
func (s *stubTool) Owner() string                { return "p" }
func (s *stubTool) Hash() string                 { return "" }
func (s *stubTool) ValidateArguments(string) error {
	return nil
}
func (s *stubTool) ValidateOutput([]byte) error { return nil }

type resolverFunc func(ctx context.Context, c *tool.Call) (pipeline.Tool, error)

func (f resolverFunc) Resolve(ctx context.Context, c *tool.Call) (pipeline.Tool, error) {
	return f(ctx, c)
}

type dispatcherFunc func(ctx context.Context, t pipeline.Tool, e *tool.Exec) tool.Result

func (f dispatcherFunc) Dispatch(ctx context.Context, t pipeline.Tool, e *tool.Exec) tool.Result {
	return f(ctx, t, e)
}

// TestConditionCostCountsOperandSizes: arguments are dyn, and CEL charges an operator on
// dyn operands 1 whatever their size, so without sized costs this condition would copy
// 2000 half-megabyte strings (a gigabyte) within the cost limit and abstain.
func TestConditionCostCountsOperandSizes(t *testing.T) {
	s := mustParse(t, `
rules:
  - tool: open
    when: 'args.parts.exists(p, args.base + p == "/etc/passwd")'
    decision: deny
    reason: "no passwd"
  - tool: cmp
    when: 'args.parts.exists(p, args.base < args.base)'
    decision: deny
    reason: "never"
`)
	parts := strings.TrimSuffix(strings.Repeat(`"x",`, 2000), ",")
	args := fmt.Sprintf(`{"base":%q,"parts":[%s]}`, strings.Repeat("a", 512<<10), parts)
	for _, name := range []string{"open", "cmp"} {
		v := s.PreExecute(t.Context(), exec("g", name, args), nil)
		if !deniedOverCost(v) {
			t.Errorf("PreExecute(%s, 2000 half-megabyte operations) = %+v, want a fail-closed deny over the cost limit", name, v)
		}
	}
}

// TestConditionCostCountsComparedValues: `in` over a dyn list and `==` of nested dyn
// values were charged 1 each whatever they compared, so a comprehension over one
// argument testing membership in (or equality with) another compared millions of
// elements within the cost limit (with 50,000-element arguments, a minute of a core).
// Each is now charged by what it compares, and these conditions run out of cost.
func TestConditionCostCountsComparedValues(t *testing.T) {
	s := mustParse(t, `
rules:
  - tool: member
    when: 'args.parts.exists(p, "absent" in args.items)'
    decision: deny
    reason: "never"
  - tool: nested
    when: 'args.parts.exists(p, args.a == args.b)'
    decision: deny
    reason: "never"
  - tool: small
    when: 'args.parts.exists(p, p in ["a", "b"] || [p] == args.items)'
    decision: deny
    reason: "small"
`)
	list := func(n int, elem string) string {
		return "[" + strings.TrimSuffix(strings.Repeat(elem+",", n), ",") + "]"
	}
	xs := strings.Repeat(`"x",`, 5000)
	tests := map[string]struct {
		name, args string
		want       pipeline.Decision
	}{
		// 1,000 memberships in 1,000 elements: a million comparisons.
		"membership": {name: "member", args: fmt.Sprintf(`{"parts":%s,"items":%s}`, list(1000, "1"), list(1000, `"x"`)), want: pipeline.Deny},
		// 500 comparisons of one-element lists holding 5,000 elements each.
		"nested equality": {name: "nested", args: fmt.Sprintf(`{"parts":%s,"a":[[%s"y"]],"b":[[%s"z"]]}`, list(500, "1"), xs, xs), want: pipeline.Deny},
		// Small comparisons stay cheap: 1,000 of them fit the limit.
		"small": {name: "small", args: fmt.Sprintf(`{"parts":%s,"items":[1,2]}`, list(1000, `"c"`)), want: pipeline.Abstain},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			v := s.PreExecute(t.Context(), exec("g", tc.name, tc.args), nil)
			if v.Decision != tc.want {
				t.Fatalf("PreExecute(%s) = %+v, want %s", tc.name, v, tc.want)
			}
			if tc.want == pipeline.Deny && !strings.HasSuffix(v.UserReason, "actual cost limit exceeded") {
				t.Errorf("PreExecute(%s) = %+v, want a fail-closed deny over the cost limit", tc.name, v)
			}
		})
	}
}

// TestConditionCostCountsHashedKeys: `x in map` was charged 1 whatever the key, and a
// lookup hashes the whole key, so a comprehension testing a 4 MB argument's membership
// in a map argument hashed 40 GB within the cost limit (1.5 seconds of a core). It is now
// charged by the key it reads.
func TestConditionCostCountsHashedKeys(t *testing.T) {
	s := mustParse(t, `
rules:
  - tool: t
    when: 'args.parts.exists(p, args.k in args.m)'
    decision: deny
`)
	parts := "[" + strings.TrimSuffix(strings.Repeat("1,", 1000), ",") + "]"
	m := `{"a":1,"b":1,"c":1,"d":1,"e":1,"f":1,"g":1,"h":1,"i":1}`
	args := fmt.Sprintf(`{"parts":%s,"m":%s,"k":%q}`, parts, m, strings.Repeat("z", 1<<20))
	v := s.PreExecute(t.Context(), exec("g", "t", args), nil)
	if !deniedOverCost(v) {
		t.Errorf("PreExecute(1,000 lookups of a 1 MB key) = %+v, want a fail-closed deny over the cost limit", v)
	}
	small := fmt.Sprintf(`{"parts":%s,"m":%s,"k":"j"}`, parts, m)
	if v := s.PreExecute(t.Context(), exec("g", "t", small), nil); v.Decision != pipeline.Abstain {
		t.Errorf("PreExecute(1,000 lookups of a short key) = %+v, want abstain", v)
	}
}

// TestConditionCostCountsParsedText: conversions and size read their whole text, and CEL
// charged them 1 on a dyn argument, so a comprehension converting a half-megabyte
// argument at every step parsed gigabytes within the cost limit (double() for 25
// seconds, timestamp() for 50). Each is now charged by the text it reads, and so is the
// time zone of a timestamp's accessor (getHours(args.tz) with a megabyte zone name ran
// 40 seconds: each lookup searches the zone files for it and quotes it in its error).
func TestConditionCostCountsParsedText(t *testing.T) {
	tests := map[string]string{
		"double":   `double(args.s) > 1.0`,
		"int":      `int(args.z) == 1`,
		"uint":     `uint(args.z) == 1u`,
		"duration": `duration(args.d) == duration("1s")`,
		"bytes":    `bytes(args.s) == b"x"`,
		"string":   `string(bytes(args.s)) == "x"`,
		"size":     `size(args.s) == 0`,
		"member":   `args.s.size() == 0`,
		"timezone": `timestamp(0).getHours(args.s) == 1`,
	}
	parts := "[" + strings.TrimSuffix(strings.Repeat("1,", 1000), ",") + "]"
	zeros := strings.Repeat("0", 20000)
	args := fmt.Sprintf(`{"parts":%s,"s":"0.%s1","z":%q,"d":"%ss"}`, parts, zeros, zeros, zeros)
	for name, cond := range tests {
		t.Run(name, func(t *testing.T) {
			s := mustParse(t, fmt.Sprintf("rules:\n  - tool: t\n    when: 'args.parts.exists(p, %s)'\n    decision: deny\n", cond))
			v := s.PreExecute(t.Context(), exec("g", "t", args), nil)
			if !deniedOverCost(v) {
				t.Errorf("PreExecute(1,000 times %s of 20 KB) = %+v, want a fail-closed deny over the cost limit", cond, v)
			}
		})
	}
}

// TestConditionPatternsCompileOnce: a rule's matches() pattern was compiled again at
// every match, which the cost limit does not charge (a match of an empty text costs
// nothing), so a rule matching each element of a list argument against a pattern of
// some 3,000 instructions compiled it per element: 1,000 empty strings allocated a
// gigabyte, and 10,000 took 16 seconds, within the cost limit. It is compiled at parse.
func TestConditionPatternsCompileOnce(t *testing.T) {
	s := mustParse(t, `
rules:
  - tool: t
    when: 'args.parts.exists(p, p.matches("[a-z]{0,1000}[0-9]{0,1000}x"))'
    decision: deny
`)
	args := fmt.Sprintf(`{"parts":[%s]}`, strings.TrimSuffix(strings.Repeat(`"",`, 1000), ","))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	v := s.PreExecute(t.Context(), exec("g", "t", args), nil)
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; v.Decision != pipeline.Abstain || n > 64<<20 {
		t.Errorf("PreExecute(1,000 matches of an empty text) = %+v after allocating %d bytes, want abstain within 64 MiB", v, n)
	}
}

// TestEvaluationErrorsAreCut: some CEL errors quote the value that failed ("no such
// key: <key>", an invalid timestamp), which comes from the arguments; a fail-closed
// denial's reason and a mode expression's error (logged for every call) carried a
// megabyte of the model's text when the arguments held one. So did a mode expression
// that evaluated to such text, which is quoted as an unknown mode.
func TestEvaluationErrorsAreCut(t *testing.T) {
	s := mustParse(t, `
rules:
  - tool: key
    when: 'args.m[args.k] == 1'
    decision: allow
  - tool: ts
    when: 'timestamp(args.k) == timestamp(0)'
    decision: allow
tools:
  shell: {mode_when: 'args.m[args.k]'}
  pick: {mode_when: 'args.k'}
`)
	args := fmt.Sprintf(`{"m":{},"k":%q}`, strings.Repeat("z", 100000))
	for _, name := range []string{"key", "ts"} {
		v := s.PreExecute(t.Context(), exec("g", name, args), nil)
		if v.Decision != pipeline.Deny || !strings.HasPrefix(v.UserReason, "config.yaml:") || len(v.UserReason) > 1200 {
			t.Errorf("PreExecute(%s, a 100 KB key) = %s with a %d-byte reason %.80q…, want a deny with a reason of at most 1200 bytes", name, v.Decision, len(v.UserReason), v.UserReason)
		}
	}
	// A mode expression may also evaluate to the model's text, which is no mode.
	for _, name := range []string{"shell", "pick"} {
		_, err := s.Tool("", name).ModeFunc(t.Context(), &tool.Call{Name: name, Arguments: args})
		if err == nil || !strings.Contains(err.Error(), "policy.tools."+name+".mode_when") || len(err.Error()) > 1200 {
			t.Errorf("Tool(%s).ModeFunc(a 100 KB key) error of %d bytes = %.120q…, want one of at most 1200 bytes naming the expression", name, len(fmt.Sprint(err)), fmt.Sprint(err))
		}
	}
}

// deniedOverCost reports whether v is the fail-closed deny of a condition that ran out
// of its cost limit.
func deniedOverCost(v pipeline.Verdict) bool {
	return v.Decision == pipeline.Deny && strings.HasSuffix(v.UserReason, "actual cost limit exceeded")
}

// TestConditionNumbersAreExact: arguments reached conditions with every number a double,
// so integers above 2^53 (snowflake IDs, account numbers) compared as their neighbours:
// `args.id == 9007199254740993` matched 9007199254740992, and `args.id > 2^53` missed
// 2^53+1, letting a call past a deny rule. An integral number that fits int64 (or
// uint64) is now an int (uint); other numbers stay doubles, and the mixed comparisons
// rules already wrote still compare numerically.
func TestConditionNumbersAreExact(t *testing.T) {
	const (
		match  = "match"
		none   = "none"
		failed = "failed"
	)
	tests := map[string]struct{ when, args, want string }{
		"big id equal":               {when: `args.id == 9007199254740993`, args: `{"id":9007199254740993}`, want: match},
		"big id one below":           {when: `args.id == 9007199254740993`, args: `{"id":9007199254740992}`, want: none},
		"big id one above":           {when: `args.id == 9007199254740993`, args: `{"id":9007199254740994}`, want: none},
		"big id not equal":           {when: `args.id != 9007199254740993`, args: `{"id":9007199254740992}`, want: match},
		"big id greater":             {when: `args.id > 9007199254740992`, args: `{"id":9007199254740993}`, want: match},
		"negative equal":             {when: `args.id == -9007199254740993`, args: `{"id":-9007199254740993}`, want: match},
		"negative one above":         {when: `args.id == -9007199254740993`, args: `{"id":-9007199254740992}`, want: none},
		"int64 minimum":              {when: `args.id < -9223372036854775807`, args: `{"id":-9223372036854775808}`, want: match},
		"int64 maximum":              {when: `args.id == 9223372036854775807 && type(args.id) == int`, args: `{"id":9223372036854775807}`, want: match},
		"uint64 above int64":         {when: `args.id > 9223372036854775807 && type(args.id) == uint`, args: `{"id":9223372036854775808}`, want: match},
		"uint64 maximum":             {when: `args.id == 18446744073709551615u`, args: `{"id":18446744073709551615}`, want: match},
		"uint64 one below maximum":   {when: `args.id == 18446744073709551615u`, args: `{"id":18446744073709551614}`, want: none},
		"beyond uint64 is double":    {when: `type(args.id) == double`, args: `{"id":18446744073709551616}`, want: match},
		"below int64 is double":      {when: `type(args.id) == double`, args: `{"id":-9223372036854775809}`, want: match},
		"integral fraction is int":   {when: `args.id == 9007199254740993 && type(args.id) == int`, args: `{"id":9007199254740993.000}`, want: match},
		"integral exponent is int":   {when: `args.id == 9007199254740993 && type(args.id) == int`, args: `{"id":9.007199254740993e15}`, want: match},
		"small exponent is double":   {when: `args.n == 1000 && type(args.n) == double`, args: `{"n":1E+3}`, want: match},
		"exponent makes integral":    {when: `args.n == 15 && type(args.n) == double`, args: `{"n":1.5e1}`, want: match},
		"exponent makes fraction":    {when: `args.n == 1.5 && type(args.n) == double`, args: `{"n":15e-1}`, want: match},
		"exponent beyond int64":      {when: `type(args.n) == uint`, args: `{"n":1e19}`, want: match},
		"exponent beyond uint64":     {when: `type(args.n) == double`, args: `{"n":1e20}`, want: match},
		"negative zero is zero":      {when: `args.n == 0`, args: `{"n":-0.0}`, want: match},
		"below 2^53 is double":       {when: `type(args.n) == double && args.n == 9007199254740991`, args: `{"n":9007199254740991}`, want: match},
		"2^53 is int":                {when: `type(args.n) == int && args.n == 9007199254740992`, args: `{"n":9007199254740992}`, want: match},
		"minus 2^53 is int":          {when: `type(args.n) == int`, args: `{"n":-9007199254740992}`, want: match},
		"below 2^53 not big literal": {when: `args.n == 9007199254740993`, args: `{"n":9007199254740991}`, want: none},
		"below 2^53 under big":       {when: `args.n < 9007199254740993`, args: `{"n":9007199254740991}`, want: match},
		"division stays double":      {when: `args.amount / 100.0 > 50.0`, args: `{"amount":5099}`, want: match},
		"division by zero is inf":    {when: `args.amount / 0.0 > 1.0`, args: `{"amount":5}`, want: match},
		"fraction is double":         {when: `args.n == 0.001 && type(args.n) == double`, args: `{"n":1e-3}`, want: match},
		"tiny fraction is double":    {when: `type(args.n) == double`, args: `{"n":4.0000000000000000001}`, want: match},
		"int equals int":             {when: `args.n == 5`, args: `{"n":5}`, want: match},
		"int equals double":          {when: `args.n == 5.0`, args: `{"n":5}`, want: match},
		"int above double":           {when: `args.n > 1.5`, args: `{"n":2}`, want: match},
		"int below double":           {when: `args.n > 1.5`, args: `{"n":1}`, want: none},
		"double below int":           {when: `args.price < 10`, args: `{"price":9.99}`, want: match},
		"double not equal int":       {when: `args.price == 10`, args: `{"price":9.99}`, want: none},
		"int below uint":             {when: `args.n < 10u`, args: `{"n":9}`, want: match},
		"in list":                    {when: `args.id in [42, 9007199254740993]`, args: `{"id":9007199254740993}`, want: match},
		"not in list by one":         {when: `args.id in [42, 9007199254740993]`, args: `{"id":9007199254740992}`, want: none},
		"in mixed list":              {when: `args.n in [1.5, 3]`, args: `{"n":3.0}`, want: match},
		"nested in a list":           {when: `args.ids.exists(i, i == 9007199254740993)`, args: `{"ids":[1,9007199254740992]}`, want: none},
		"nested in an object":        {when: `args.o.id == 9007199254740993`, args: `{"o":{"id":9007199254740993}}`, want: match},
		"list argument in list":      {when: `9007199254740993 in args.ids`, args: `{"ids":[9007199254740992,9007199254740994]}`, want: none},
		"exact arithmetic":           {when: `args.n + 1 == 9007199254740994`, args: `{"n":9007199254740993}`, want: match},
		"int overflow fails closed":  {when: `args.n + 1 > 0`, args: `{"n":9223372036854775807}`, want: failed},
		"int underflow fails closed": {when: `args.n - 1 < 0`, args: `{"n":-9223372036854775808}`, want: failed},
		"uint overflow fails closed": {when: `args.n * 2u > 0u`, args: `{"n":18446744073709551615}`, want: failed},
		"negation fails closed":      {when: `-args.n > 0`, args: `{"n":-9223372036854775808}`, want: failed},
		"exponent at int64 minimum":  {when: `type(args.n) == double`, args: `{"n":1.5e-9223372036854775808}`, want: match},
		"exponent at int64 maximum":  {when: `args.n > 0`, args: `{"n":1e9223372036854775807}`, want: failed},
		"exponent past int64 range":  {when: `args.n == 0`, args: `{"n":0e99999999999999999999}`, want: match},
		"zero with huge exponent":    {when: `args.n == 0`, args: `{"n":0.0e-9223372036854775808}`, want: match},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := mustParse(t, fmt.Sprintf("rules:\n  - tool: t\n    when: '%s'\n    decision: deny\n    reason: matched\n", tc.when))
			v := s.PreExecute(t.Context(), exec("g", "t", tc.args), nil)
			got := none
			switch {
			case v == pipeline.Verdict{Decision: pipeline.Deny, Reason: "matched"}:
				got = match
			case v.Decision == pipeline.Deny:
				got = failed
			case v.Decision != pipeline.Abstain:
				got = v.Decision.String()
			}
			if got != tc.want {
				t.Errorf("PreExecute(%s) with %s = %+v (%s), want %s", tc.when, tc.args, v, got, tc.want)
			}
		})
	}
}

// TestEmptyScopeMatchesEveryScope: a rule's or guard's scope written "" matches every
// scope, as the README says ("" and a lone "*" = all, as hook subscriptions and
// hooks.required read it); it matched the global scope alone, so a deny written with
// scope "" let every other scope's calls through.
func TestEmptyScopeMatchesEveryScope(t *testing.T) {
	s := mustParse(t, `
rules:
  - scope: ""
    tool: shell
    decision: deny
    reason: no shell
guards:
  - scope: ""
    tool: rm
    reason: no rm
`)
	guards := s.Guards()
	for _, scope := range []string{"", "tenant-a", "tenant-a/bot/x"} {
		if v := s.PreExecute(t.Context(), exec(scope, "shell", `{}`), nil); v.Decision != pipeline.Deny {
			t.Errorf("PreExecute(scope %q, shell) = %+v, want deny", scope, v)
		}
		if v := guards[0].Guard(t.Context(), exec(scope, "rm", `{}`), nil); v.Decision != pipeline.Deny {
			t.Errorf("Guard(scope %q, rm) = %+v, want deny", scope, v)
		}
	}
}
