package pipeline_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolsd/toolsd/internal/pipeline"
	"github.com/toolsd/toolsd/internal/tool"
)

// fakeTool is a Tool whose validation is scripted.
type fakeTool struct {
	def    tool.Definition
	owner  string
	hash   string
	argErr error
	// outErr, when set, validates output values.
	outErr func(v []byte) error
}

func newTool(name string) *fakeTool {
	return &fakeTool{def: tool.Definition{Name: name, Parameters: json.RawMessage(`{"type":"object"}`)}, owner: "p1"}
}

func (f *fakeTool) Definition() *tool.Definition { return &f.def }
func (f *fakeTool) Owner() string                { return f.owner }
func (f *fakeTool) Hash() string                 { return f.hash }

func (f *fakeTool) ValidateArguments(raw string) error {
	if f.argErr != nil {
		return f.argErr
	}
	if !json.Valid([]byte(raw)) {
		return errors.New("arguments are not valid JSON")
	}
	return nil
}

func (f *fakeTool) ValidateOutput(v []byte) error {
	if f.outErr != nil {
		return f.outErr(v)
	}
	return nil
}

// resolver is a stub Resolver: fn decides, calls counts.
type resolver struct {
	mu    sync.Mutex
	calls int
	fn    func(n int, c *tool.Call) (pipeline.Tool, error)
}

func (r *resolver) Resolve(_ context.Context, c *tool.Call) (pipeline.Tool, error) {
	r.mu.Lock()
	r.calls++
	n := r.calls
	r.mu.Unlock()
	return r.fn(n, c)
}

func (r *resolver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}

// staticResolver always resolves to t.
func staticResolver(t pipeline.Tool) *resolver {
	return &resolver{fn: func(int, *tool.Call) (pipeline.Tool, error) { return t, nil }}
}

// dispatcher is a stub Dispatcher recording what it was sent.
type dispatcher struct {
	mu     sync.Mutex
	calls  int
	owners []string
	args   []string
	fn     func(ctx context.Context, n int, t pipeline.Tool, e *tool.Exec) tool.Result
}

func (d *dispatcher) Dispatch(ctx context.Context, t pipeline.Tool, e *tool.Exec) tool.Result {
	d.mu.Lock()
	d.calls++
	n := d.calls
	d.owners = append(d.owners, t.Owner())
	d.args = append(d.args, e.Arguments)
	d.mu.Unlock()
	if d.fn == nil {
		return tool.Result{Content: "ok"}
	}
	return d.fn(ctx, n, t, e)
}

func (d *dispatcher) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls
}

func returning(r tool.Result) *dispatcher {
	return &dispatcher{fn: func(context.Context, int, pipeline.Tool, *tool.Exec) tool.Result { return r }}
}

type approverFunc func(ctx context.Context, req tool.ApprovalRequest) (tool.ApprovalDecision, error)

func (f approverFunc) Approve(ctx context.Context, req tool.ApprovalRequest) (tool.ApprovalDecision, error) {
	return f(ctx, req)
}

func newExec(name, args string) *tool.Exec {
	return &tool.Exec{Call: tool.Call{SessionID: "s1", Scope: "global/agent", CallID: "c1", Name: name, Arguments: args}}
}

func verdict(d pipeline.Decision, reason string) pipeline.PreExecute {
	return pipeline.PreExecuteFunc("fixed-"+d.String(), func(context.Context, *tool.Exec, pipeline.Tool) pipeline.Verdict {
		return pipeline.Verdict{Decision: d, Reason: reason}
	})
}

// checkShape asserts the invariants every result keeps: errors carry a code, name the
// tool and show "Error: <message>" to the model; successes carry no error.
func checkShape(t *testing.T, e *tool.Exec, r tool.Result) {
	t.Helper()
	if !r.IsError {
		if r.Err != nil {
			t.Errorf("success carries error %+v", r.Err)
		}
		return
	}
	if r.Err == nil {
		t.Fatalf("error result without Err: %+v", r)
	}
	if r.Err.Code == "" || r.Err.Tool != e.Name {
		t.Errorf("Err = %+v, want a code and Tool %q", r.Err, e.Name)
	}
	if want := tool.ErrorContentPrefix + r.Err.Message; r.Content != want && !strings.HasPrefix(r.Content, tool.ErrorContentPrefix) {
		t.Errorf("Content = %q, want %q", r.Content, want)
	}
}

// fakeClock is advanced by fakeSleep so budgets are deterministic.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
}

func newClock() *fakeClock { return &fakeClock{now: time.Unix(1_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps = append(c.sleeps, d)
	c.now = c.now.Add(d)
	return nil
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
