package observe_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/toolsd/toolsd/internal/observe"
	"github.com/toolsd/toolsd/internal/pipeline"
	"github.com/toolsd/toolsd/internal/tool"
)

func newMetrics(tb testing.TB) (*observe.Metrics, *prometheus.Registry) {
	tb.Helper()
	reg := prometheus.NewRegistry()
	return observe.New(reg), reg
}

// value reads one series from g: a counter's or gauge's value, or a histogram's
// sample count. labels are name, value pairs that must all match; the test fails when
// no series matches.
func value(tb testing.TB, g prometheus.Gatherer, name string, labels ...string) float64 {
	tb.Helper()
	mfs, err := g.Gather()
	if err != nil {
		tb.Fatalf("Gather() = %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if !hasLabels(m, labels) {
				continue
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	tb.Fatalf("no series %s%v", name, labels)
	return 0
}

// has reports whether g holds a series of name with labels.
func has(tb testing.TB, g prometheus.Gatherer, name string, labels ...string) bool {
	tb.Helper()
	mfs, err := g.Gather()
	if err != nil {
		tb.Fatalf("Gather() = %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if hasLabels(m, labels) {
				return true
			}
		}
	}
	return false
}

func hasLabels(m *dto.Metric, labels []string) bool {
	got := map[string]string{}
	for _, lp := range m.GetLabel() {
		got[lp.GetName()] = lp.GetValue()
	}
	for i := 0; i+1 < len(labels); i += 2 {
		if got[labels[i]] != labels[i+1] { // an absent label reads as empty
			return false
		}
	}
	return true
}

// fakeTool is a registered tool served by owner.
type fakeTool struct {
	def   tool.Definition
	owner string
}

func newTool(name, owner string) *fakeTool {
	return &fakeTool{def: tool.Definition{Name: name, Parameters: json.RawMessage(`{"type":"object"}`)}, owner: owner}
}

func (f *fakeTool) Definition() *tool.Definition   { return &f.def }
func (f *fakeTool) Owner() string                  { return f.owner }
func (f *fakeTool) Hash() string                   { return "" }
func (f *fakeTool) ValidateArguments(string) error { return nil }
func (f *fakeTool) ValidateOutput([]byte) error    { return nil }

// resolverFunc and dispatcherFunc adapt functions to the pipeline's interfaces.
type resolverFunc func(ctx context.Context, c *tool.Call) (pipeline.Tool, error)

func (f resolverFunc) Resolve(ctx context.Context, c *tool.Call) (pipeline.Tool, error) {
	return f(ctx, c)
}

type dispatcherFunc func(ctx context.Context, t pipeline.Tool, e *tool.Exec) tool.Result

func (f dispatcherFunc) Dispatch(ctx context.Context, t pipeline.Tool, e *tool.Exec) tool.Result {
	return f(ctx, t, e)
}

// tools resolves the names in known and reports every other name as unknown.
func tools(known ...*fakeTool) resolverFunc {
	return func(_ context.Context, c *tool.Call) (pipeline.Tool, error) {
		for _, t := range known {
			if t.def.Name == c.Name {
				return t, nil
			}
		}
		return nil, tool.ErrUnknownTool
	}
}

func succeed(content string) dispatcherFunc {
	return func(context.Context, pipeline.Tool, *tool.Exec) tool.Result { return tool.Result{Content: content} }
}

func newExec(name, args string) *tool.Exec {
	return &tool.Exec{Call: tool.Call{
		SessionID: "sess-1", Scope: "global/agent", BatchID: "batch-1", Turn: 3, Step: 4, Index: 1,
		CallID: "call-9", Name: name, Arguments: args,
	}}
}
