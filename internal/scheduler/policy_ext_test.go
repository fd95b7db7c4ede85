package scheduler_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/toolsd/toolsd/internal/pipeline"
	"github.com/toolsd/toolsd/internal/scheduler"
	"github.com/toolsd/toolsd/internal/tool"
)

// staticPolicy is a [pipeline.Policy] with one decision and one tool's settings.
type staticPolicy struct {
	decision pipeline.Decision
	tool     string
	settings pipeline.ToolSettings
}

func (p *staticPolicy) Name() string { return "static" }

func (p *staticPolicy) PreExecute(_ context.Context, e *tool.Exec, _ pipeline.Tool) pipeline.Verdict {
	if e.Name != p.tool {
		return pipeline.Verdict{}
	}
	return pipeline.Verdict{Decision: p.decision, Reason: "decided by " + p.decision.String()}
}

func (p *staticPolicy) DefaultDecision() pipeline.Decision { return pipeline.Allow }

func (p *staticPolicy) Tool(_, name string) pipeline.ToolSettings {
	if name != p.tool {
		return pipeline.ToolSettings{}
	}
	return p.settings
}

// namedTool is a [pipeline.Tool] that takes any JSON arguments and results.
type namedTool struct{ def tool.Definition }

func (n *namedTool) Definition() *tool.Definition { return &n.def }
func (n *namedTool) Owner() string                { return "p1" }
func (n *namedTool) Hash() string                 { return "h-" + n.def.Name }
func (n *namedTool) ValidateArguments(raw string) error {
	var v any
	return json.Unmarshal([]byte(raw), &v)
}
func (n *namedTool) ValidateOutput([]byte) error { return nil }

type anyToolResolver struct{}

func (anyToolResolver) Resolve(_ context.Context, c *tool.Call) (pipeline.Tool, error) {
	return &namedTool{def: tool.Definition{Name: c.Name}}, nil
}

type dispatchFunc func(ctx context.Context, t pipeline.Tool, e *tool.Exec) tool.Result

func (f dispatchFunc) Dispatch(ctx context.Context, t pipeline.Tool, e *tool.Exec) tool.Result {
	return f(ctx, t, e)
}

// TestExecuteCallKeepsThePolicyOfItsMode: a policy reload between the read of a call's
// mode and its start does not apply to the call. The call was told exclusive by the
// policy that denies it; it waits for the pool to drain, the reload installs a policy
// that would have it parallel and allowed, and the call still runs under the first:
// denied, never dispatched.
func TestExecuteCallKeepsThePolicyOfItsMode(t *testing.T) {
	var once sync.Once
	modeRead := make(chan struct{})
	old := &staticPolicy{decision: pipeline.Deny, tool: "tool-1", settings: pipeline.ToolSettings{
		ModeFunc: func(context.Context, *tool.Call) (tool.Mode, error) {
			once.Do(func() { close(modeRead) })
			return tool.ModeExclusive, nil
		},
	}}
	reloaded := &staticPolicy{decision: pipeline.Allow, tool: "tool-1", settings: pipeline.ToolSettings{Mode: tool.ModeParallel}}

	release := make(chan struct{})
	var mu sync.Mutex
	var dispatched []string
	disp := dispatchFunc(func(ctx context.Context, _ pipeline.Tool, e *tool.Exec) tool.Result {
		mu.Lock()
		dispatched = append(dispatched, e.Name)
		mu.Unlock()
		if e.Index == 0 && !await(ctx, release) {
			return tool.Failure(tool.CodeInternal, "never released")
		}
		return okResult(e.Index)
	})
	p := pipeline.New(anyToolResolver{}, disp, pipeline.WithPolicy(old))

	l := &fakeLog{}
	done := make(chan error, 1)
	go func() {
		_, err := scheduler.New(p, p, l).Execute(t.Context(), newBatch(2), nil, nil)
		done <- err
	}()
	// Call 0 is running; call 1 has its mode (exclusive) and waits for the pool to drain.
	if !await(t.Context(), modeRead) {
		t.Fatal("call 1's mode was never read")
	}
	p.SetPolicy(reloaded)
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("Execute() error = %v", err)
	}
	results := l.checkComplete(t, 2)
	if results[0].IsError {
		t.Errorf("call 0 result = %+v, want success", results[0].Err)
	}
	if results[1].Code() != tool.CodeDenied {
		t.Errorf("call 1 result code = %q, want %q: the policy that made it exclusive denies it", results[1].Code(), tool.CodeDenied)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(dispatched) != 1 || dispatched[0] != "tool-0" {
		t.Errorf("dispatched %v, want only tool-0", dispatched)
	}
}
