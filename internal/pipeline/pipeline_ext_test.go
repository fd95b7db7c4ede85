package pipeline_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/toolsd/toolsd/internal/pipeline"
	"github.com/toolsd/toolsd/internal/tool"
)

// fakePolicy is a Policy with a fixed verdict, default and settings.
type fakePolicy struct {
	v        pipeline.Verdict
	def      pipeline.Decision
	settings pipeline.ToolSettings
}

func (f *fakePolicy) Name() string { return "fake" }
func (f *fakePolicy) PreExecute(context.Context, *tool.Exec, pipeline.Tool) pipeline.Verdict {
	return f.v
}
func (f *fakePolicy) DefaultDecision() pipeline.Decision        { return f.def }
func (f *fakePolicy) Tool(string, string) pipeline.ToolSettings { return f.settings }

func TestMode(t *testing.T) {
	exclusive := newTool("write")
	exclusive.def.Mode = tool.ModeExclusive
	modeFunc := func(m tool.Mode, err error) func(context.Context, *tool.Call) (tool.Mode, error) {
		return func(context.Context, *tool.Call) (tool.Mode, error) { return m, err }
	}
	unknown := &resolver{fn: func(int, *tool.Call) (pipeline.Tool, error) { return nil, tool.ErrUnknownTool }}
	tests := map[string]struct {
		res      *resolver
		config   pipeline.ToolSettings
		policy   *pipeline.ToolSettings
		want     tool.Mode
		resolves int
	}{
		"definition mode":                 {res: staticResolver(exclusive), want: tool.ModeExclusive, resolves: 1},
		"unspecified is parallel":         {res: staticResolver(newTool("read")), want: tool.ModeParallel, resolves: 1},
		"unknown tool is parallel":        {res: unknown, want: tool.ModeParallel, resolves: 1},
		"operator override wins":          {res: staticResolver(exclusive), config: pipeline.ToolSettings{Mode: tool.ModeParallel}, want: tool.ModeParallel},
		"policy override wins":            {res: staticResolver(newTool("read")), config: pipeline.ToolSettings{Mode: tool.ModeParallel}, policy: &pipeline.ToolSettings{Mode: tool.ModeExclusive}, want: tool.ModeExclusive},
		"mode expression":                 {res: staticResolver(exclusive), config: pipeline.ToolSettings{ModeFunc: modeFunc(tool.ModeParallel, nil)}, want: tool.ModeParallel},
		"undecided expression falls back": {res: staticResolver(exclusive), config: pipeline.ToolSettings{ModeFunc: modeFunc(tool.ModeUnspecified, nil)}, want: tool.ModeExclusive, resolves: 1},
		"failing expression is exclusive": {res: staticResolver(newTool("read")), config: pipeline.ToolSettings{ModeFunc: modeFunc(tool.ModeParallel, errors.New("no such key"))}, want: tool.ModeExclusive},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			opts := []pipeline.Option{pipeline.WithConfig(pipeline.Config{
				ToolPolicy: func(string, string) pipeline.ToolSettings { return tc.config },
			})}
			if tc.policy != nil {
				opts = append(opts, pipeline.WithPolicy(&fakePolicy{settings: *tc.policy}))
			}
			p := pipeline.New(tc.res, returning(tool.Result{}), opts...)
			e := &tool.Exec{Call: tool.Call{Name: "write", Arguments: `{}`}}
			if got := p.Mode(t.Context(), e); got != tc.want {
				t.Errorf("Mode(%s) = %s, want %s", e.Name, got, tc.want)
			}
			if tc.res.count() != tc.resolves {
				t.Errorf("Mode resolved %d times, want %d", tc.res.count(), tc.resolves)
			}
		})
	}
}

// TestModePinsTheCallsPolicy: a call whose mode was read runs under the policy that
// gave it, whatever is installed meanwhile; a call whose mode was not read, or was read
// by another pipeline, runs under the current one.
func TestModePinsTheCallsPolicy(t *testing.T) {
	deny := &fakePolicy{v: pipeline.Verdict{Decision: pipeline.Deny}, settings: pipeline.ToolSettings{Mode: tool.ModeExclusive}}
	allow := &fakePolicy{v: pipeline.Verdict{Decision: pipeline.Allow}, settings: pipeline.ToolSettings{Mode: tool.ModeParallel}}
	p := pipeline.New(staticResolver(newTool("write")), returning(tool.Result{Content: "written"}), pipeline.WithPolicy(deny))
	other := pipeline.New(staticResolver(newTool("write")), returning(tool.Result{}), pipeline.WithPolicy(deny))

	pinned, foreign, unpinned := newExec("write", `{}`), newExec("write", `{}`), newExec("write", `{}`)
	if got := p.Mode(t.Context(), pinned); got != tool.ModeExclusive {
		t.Fatalf("Mode() = %s, want exclusive", got)
	}
	other.Mode(t.Context(), foreign)
	p.SetPolicy(allow)
	if r := p.Run(t.Context(), pinned); r.Code() != tool.CodeDenied {
		t.Errorf("Run() after Mode and a reload = %q, want %q (the policy that gave the mode)", r.Code(), tool.CodeDenied)
	}
	for name, e := range map[string]*tool.Exec{"without Mode": unpinned, "after another pipeline's Mode": foreign} {
		if r := p.Run(t.Context(), e); r.IsError {
			t.Errorf("Run() %s = %+v, want success under the current policy", name, r.Err)
		}
	}
}

func TestSetPolicyKeepsInFlightCalls(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	disp := &dispatcher{fn: func(_ context.Context, n int, _ pipeline.Tool, _ *tool.Exec) tool.Result {
		if n == 1 {
			close(started)
			<-release
		}
		return tool.Result{Content: "0123456789"}
	}}
	// The first policy allows and lets results be 64 bytes; the next one denies
	// everything and would make the in-flight call's result too large.
	p := pipeline.New(staticResolver(newTool("echo")), disp,
		pipeline.WithPolicy(&fakePolicy{v: pipeline.Verdict{Decision: pipeline.Allow}, settings: pipeline.ToolSettings{MaxResultBytes: 64}}))
	done := make(chan tool.Result)
	go func() { done <- p.Run(context.WithoutCancel(t.Context()), newExec("echo", `{}`)) }()
	<-started
	p.SetPolicy(&fakePolicy{v: pipeline.Verdict{Decision: pipeline.Deny, Reason: "frozen"}, settings: pipeline.ToolSettings{MaxResultBytes: 5}})
	if r := p.Run(t.Context(), newExec("echo", `{}`)); r.Code() != tool.CodeDenied {
		t.Errorf("Run() after SetPolicy = %+v, want DENIED", r.Err)
	}
	close(release)
	if r := <-done; r.IsError {
		t.Errorf("in-flight Run() = %+v, want success under the policy it started with", r.Err)
	}
	p.SetPolicy(nil)
	if r := p.Run(t.Context(), newExec("echo", `{}`)); r.IsError {
		t.Errorf("Run() after SetPolicy(nil) = %+v, want success", r.Err)
	}
}

func TestPolicyDefaultDecision(t *testing.T) {
	p := pipeline.New(staticResolver(newTool("echo")), returning(tool.Result{}),
		pipeline.WithConfig(pipeline.Config{DefaultDecision: pipeline.Allow}),
		pipeline.WithPolicy(&fakePolicy{def: pipeline.Deny}))
	if r := p.Run(t.Context(), newExec("echo", `{}`)); r.Code() != tool.CodeDenied {
		t.Errorf("Run() = %+v, want the policy's default deny", r.Err)
	}
	p.SetConfig(pipeline.Config{DefaultDecision: pipeline.Allow})
	if r := p.Run(t.Context(), newExec("echo", `{}`)); r.Code() != tool.CodeDenied {
		t.Errorf("Run() after SetConfig = %+v, want the policy's default to still apply", r.Err)
	}
	p.SetPolicy(nil)
	if r := p.Run(t.Context(), newExec("echo", `{}`)); r.IsError {
		t.Errorf("Run() without policy = %+v, want the config's default allow", r.Err)
	}
}

// TestDefaultDecisionOutOfRangeDenies: a participant's decision outside the enum counts
// as Deny, and so does a default outside it; it let every call of an all-abstaining
// policy run.
func TestDefaultDecisionOutOfRangeDenies(t *testing.T) {
	bad := pipeline.Decision(9)
	for name, opt := range map[string]pipeline.Option{
		"config": pipeline.WithConfig(pipeline.Config{DefaultDecision: bad}),
		"policy": pipeline.WithPolicy(&fakePolicy{def: bad}),
	} {
		t.Run(name, func(t *testing.T) {
			disp := returning(tool.Result{Content: "ran"})
			p := pipeline.New(staticResolver(newTool("echo")), disp, opt)
			if r := p.Run(t.Context(), newExec("echo", `{}`)); r.Code() != tool.CodeDenied || disp.count() != 0 {
				t.Errorf("Run() with default %s = %+v after %d dispatches, want DENIED without dispatch", bad, r, disp.count())
			}
		})
	}
}

func TestResultObserversSeeFinalOutcome(t *testing.T) {
	clock := newClock()
	disp := &dispatcher{fn: func(context.Context, int, pipeline.Tool, *tool.Exec) tool.Result {
		clock.Advance(250 * time.Millisecond)
		return tool.Result{Content: "hello world"}
	}}
	tl := newTool("echo")
	tl.def.MaxContentBytes = 1
	var got []string
	var durations []time.Duration
	obs := func(name string) pipeline.ResultObserver {
		return func(e *tool.Exec, r tool.Result, d time.Duration) {
			got = append(got, name+":"+e.CallID+":"+r.Content)
			durations = append(durations, d)
		}
	}
	p := pipeline.New(staticResolver(tl), disp, pipeline.WithClock(clock.Now), pipeline.WithResultObservers(obs("a"), obs("b")))
	r := p.Run(t.Context(), newExec("echo", `{}`))
	want := "\n[truncated: 11 bytes total]"
	if r.Content != want || len(got) != 2 || got[0] != "a:c1:"+want || got[1] != "b:c1:"+want {
		t.Errorf("observers saw %q (result %q), want a then b seeing the finalized %q", got, r.Content, want)
	}
	for _, d := range durations {
		if d != 250*time.Millisecond {
			t.Errorf("observed duration = %v, want 250ms", d)
		}
	}
}

// TestModeChangedBeforeTheCallStarts: Mode and Run resolve the tool apart, and a
// registration in between may change its definition. A call scheduled as parallel from
// its definition's mode (or because it did not resolve) is not run when its tool now says
// exclusive: it would run beside the batch's other calls. Any other change, and a mode
// an operator's setting gave, runs as scheduled.
func TestModeChangedBeforeTheCallStarts(t *testing.T) {
	parallel, exclusive := newTool("write"), newTool("write")
	exclusive.def.Mode = tool.ModeExclusive
	tests := map[string]struct {
		atMode   pipeline.Tool // nil: not registered yet
		config   pipeline.ToolSettings
		wantCode tool.Code
	}{
		"parallel, then exclusive":            {atMode: parallel, wantCode: tool.CodeAbortedBeforeDispatch},
		"unknown, then exclusive":             {atMode: nil, wantCode: tool.CodeAbortedBeforeDispatch},
		"exclusive, then exclusive":           {atMode: exclusive, wantCode: ""},
		"operator's parallel, then exclusive": {atMode: parallel, config: pipeline.ToolSettings{Mode: tool.ModeParallel}, wantCode: ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			res := &resolver{fn: func(n int, _ *tool.Call) (pipeline.Tool, error) {
				if n > 1 {
					return exclusive, nil
				}
				if tc.atMode == nil {
					return nil, tool.ErrUnknownTool
				}
				return tc.atMode, nil
			}}
			disp := returning(tool.Result{Content: "written"})
			p := pipeline.New(res, disp, pipeline.WithConfig(pipeline.Config{
				ToolPolicy: func(string, string) pipeline.ToolSettings { return tc.config },
			}))
			e := newExec("write", `{}`)
			p.Mode(t.Context(), e)
			r := p.Run(t.Context(), e)
			wantSent := 1
			if tc.wantCode != "" {
				wantSent = 0
			}
			if r.Code() != tc.wantCode || disp.count() != wantSent {
				t.Errorf("Run() = code %q (%+v), dispatched %d times; want %q, dispatched %d times", r.Code(), r.Err, disp.count(), tc.wantCode, wantSent)
			}
		})
	}
}

// TestModeChangedWhilePolicyDecides: a call scheduled as parallel from its definition's
// mode is not run when its tool is registered again as exclusive while the call's
// pre-execute participants decide (a remote hook may take up to limits.hook_timeout):
// it would run beside the batch's other calls, as it would had the registration come
// before its policy. A tool registered again still parallel runs as scheduled.
func TestModeChangedWhilePolicyDecides(t *testing.T) {
	parallel, exclusive := newTool("write"), newTool("write")
	parallel.hash, exclusive.hash = "h-parallel", "h-exclusive"
	exclusive.def.Mode = tool.ModeExclusive
	again := newTool("write")
	again.hash = "h-again"
	tests := map[string]struct {
		registered pipeline.Tool // what the hook's wait leaves registered
		wantCode   tool.Code
	}{
		"registered again as exclusive": {registered: exclusive, wantCode: tool.CodeAbortedBeforeDispatch},
		"registered again as parallel":  {registered: again, wantCode: ""},
		"unchanged":                     {registered: parallel, wantCode: ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var mu sync.Mutex
			current := pipeline.Tool(parallel)
			res := &resolver{fn: func(int, *tool.Call) (pipeline.Tool, error) {
				mu.Lock()
				defer mu.Unlock()
				return current, nil
			}}
			hook := pipeline.PreExecuteFunc("slow-hook", func(context.Context, *tool.Exec, pipeline.Tool) pipeline.Verdict {
				mu.Lock()
				current = tc.registered // the provider registers the tool again meanwhile
				mu.Unlock()
				return pipeline.Verdict{Decision: pipeline.Allow}
			})
			disp := returning(tool.Result{Content: "written"})
			p := pipeline.New(res, disp, pipeline.WithPreExecute(hook))
			e := newExec("write", `{}`)
			if m := p.Mode(t.Context(), e); m != tool.ModeParallel {
				t.Fatalf("Mode() = %v, want parallel", m)
			}
			r := p.Run(t.Context(), e)
			wantSent := 1
			if tc.wantCode != "" {
				wantSent = 0
			}
			if r.Code() != tc.wantCode || disp.count() != wantSent {
				t.Errorf("Run() = code %q (%+v), dispatched %d times; want %q, dispatched %d times", r.Code(), r.Err, disp.count(), tc.wantCode, wantSent)
			}
		})
	}
}
