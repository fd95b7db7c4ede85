package pipeline_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/toolsd/toolsd/internal/pipeline"
	"github.com/toolsd/toolsd/internal/pipeline/policy"
	"github.com/toolsd/toolsd/internal/tool"
)

// benchRules is a 10-rule policy: seven rules for other tools or scopes, an allow for
// the benchmarked tool, and two conditions on it that evaluate to false (so the
// arguments are decoded and CEL runs twice per call).
func benchRules(tb testing.TB, withCEL bool) *policy.Set {
	tb.Helper()
	var b strings.Builder
	b.WriteString("rules:\n")
	for i := range 7 {
		fmt.Fprintf(&b, "  - scope: \"global/agents/a%d/**\"\n    tool: \"tool_%d*\"\n    decision: deny\n", i, i)
	}
	b.WriteString("  - tool: echo\n    decision: allow\n")
	for i := range 2 {
		if withCEL {
			fmt.Fprintf(&b, "  - tool: echo\n    when: 'has(args.text) && args.text.contains(\"forbidden%d\")'\n    decision: deny\n", i)
		} else {
			fmt.Fprintf(&b, "  - tool: \"ech?\"\n    scope: \"nowhere/%d\"\n    decision: deny\n", i)
		}
	}
	s, err := policy.Parse([]byte(b.String()), "bench.yaml")
	if err != nil {
		tb.Fatal(err)
	}
	if s.Rules() != 10 {
		tb.Fatalf("bench policy has %d rules, want 10", s.Rules())
	}
	return s
}

// nopTool validates nothing, so the benchmark measures the pipeline itself.
type nopTool struct{ def tool.Definition }

func (n *nopTool) Definition() *tool.Definition { return &n.def }
func (n *nopTool) Owner() string                { return "p" }
func (n *nopTool) Hash() string                 { return "" }
func (n *nopTool) ValidateArguments(string) error {
	return nil
}
func (n *nopTool) ValidateOutput([]byte) error { return nil }

type nopDispatcher struct{}

func (nopDispatcher) Dispatch(context.Context, pipeline.Tool, *tool.Exec) tool.Result {
	return tool.Result{Content: "hello", Value: []byte(`{"text":"hello"}`)}
}

type nopResolver struct{ t pipeline.Tool }

func (r nopResolver) Resolve(context.Context, *tool.Call) (pipeline.Tool, error) { return r.t, nil }

func BenchmarkRun(b *testing.B) {
	res := nopResolver{t: &nopTool{def: tool.Definition{Name: "echo"}}}
	cases := map[string][]pipeline.Option{
		"no-policy":     nil,
		"10-rules":      {pipeline.WithPolicy(benchRules(b, false))},
		"10-rules-2cel": {pipeline.WithPolicy(benchRules(b, true))},
	}
	for name, opts := range cases {
		b.Run(name, func(b *testing.B) {
			p := pipeline.New(res, nopDispatcher{}, opts...)
			e := newExec("echo", `{"text":"hello world"}`)
			ctx := b.Context()
			b.ReportAllocs()
			for b.Loop() {
				if r := p.Run(ctx, e); r.IsError {
					b.Fatalf("Run() = %+v, want success", r.Err)
				}
			}
		})
	}
}
