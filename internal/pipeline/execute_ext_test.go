package pipeline_test

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolsd/toolsd/internal/pipeline"
	"github.com/toolsd/toolsd/internal/tool"
	"github.com/toolsd/toolsd/internal/tool/tooltest"
)

func TestTimeoutCancelsDispatch(t *testing.T) {
	tests := map[string]struct {
		defTimeout time.Duration
		setting    time.Duration
		cfg        time.Duration
		want       string
	}{
		"operator setting":   {defTimeout: time.Hour, setting: 3 * time.Millisecond, want: "3ms"},
		"definition timeout": {defTimeout: 4 * time.Millisecond, want: "4ms"},
		"config default":     {cfg: 5 * time.Millisecond, want: "5ms"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			sleep := newTool("sleep")
			sleep.def.Timeout = tc.defTimeout
			sawDone := make(chan struct{})
			disp := &dispatcher{fn: func(ctx context.Context, _ int, _ pipeline.Tool, _ *tool.Exec) tool.Result {
				<-ctx.Done()
				close(sawDone)
				return tool.Failure(tool.CodeToolError, "cancelled by toolsd")
			}}
			p := pipeline.New(staticResolver(sleep), disp, pipeline.WithConfig(pipeline.Config{
				DefaultTimeout: tc.cfg,
				ToolPolicy: func(string, string) pipeline.ToolSettings {
					return pipeline.ToolSettings{Timeout: tc.setting}
				},
			}))
			e := newExec("sleep", `{}`)
			r := p.Run(t.Context(), e)
			checkShape(t, e, r)
			select {
			case <-sawDone:
			default:
				t.Error("dispatcher never saw its context cancelled")
			}
			want := fmt.Sprintf("tool %q timed out after %s", "sleep", tc.want)
			if r.Code() != tool.CodeToolTimeout || r.Err.Message != want {
				t.Errorf("Run() = %s %q, want TOOL_TIMEOUT %q", r.Code(), r.Err.Message, want)
			}
		})
	}
}

func TestSuccessAfterCancelIsAborted(t *testing.T) {
	tests := map[string]struct {
		result   tool.Result
		wantCode tool.Code
	}{
		"success becomes aborted": {result: tool.Result{Content: "done"}, wantCode: tool.CodeAborted},
		"tool error stays":        {result: tool.Failure(tool.CodeToolError, "disk full"), wantCode: tool.CodeToolError},
		"aborted success still concludes the turn": {
			result: tool.Result{Content: "done", ConcludesTurn: true}, wantCode: tool.CodeAborted,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			disp := &dispatcher{fn: func(context.Context, int, pipeline.Tool, *tool.Exec) tool.Result {
				cancel()
				return tc.result
			}}
			p := pipeline.New(staticResolver(newTool("echo")), disp)
			e := newExec("echo", `{}`)
			r := p.Run(ctx, e)
			checkShape(t, e, r)
			if r.Code() != tc.wantCode {
				t.Errorf("Run() code = %q, want %q", r.Code(), tc.wantCode)
			}
			if tc.wantCode == tool.CodeAborted && r.Content != "Error: call was cancelled" {
				t.Errorf("Run().Content = %q, want %q", r.Content, "Error: call was cancelled")
			}
			if r.ConcludesTurn != tc.result.ConcludesTurn {
				t.Errorf("Run().ConcludesTurn = %v, want the tool's %v", r.ConcludesTurn, tc.result.ConcludesTurn)
			}
		})
	}
}

// retryRig builds a pipeline whose tool "fetch" is idempotent (or not) with a fake clock.
func retryRig(idempotent bool, retry pipeline.RetryConfig, res *resolver, disp *dispatcher, extra ...pipeline.Option) (*pipeline.Pipeline, *fakeClock) {
	clock := newClock()
	opts := append([]pipeline.Option{
		pipeline.WithConfig(pipeline.Config{
			Retry: retry,
			ToolPolicy: func(string, string) pipeline.ToolSettings {
				return pipeline.ToolSettings{Idempotent: idempotent}
			},
		}),
		pipeline.WithClock(clock.Now),
		pipeline.WithSleep(clock.Sleep),
		pipeline.WithBackoff(func(int, pipeline.RetryConfig) time.Duration { return time.Second }),
	}, extra...)
	return pipeline.New(res, disp, opts...), clock
}

func TestRetryReresolvesIdempotentTool(t *testing.T) {
	old, fresh := newTool("fetch"), newTool("fetch")
	old.owner, fresh.owner = "p1", "p2"
	var validatedBy []string
	old.outErr = func([]byte) error { validatedBy = append(validatedBy, "p1"); return nil }
	fresh.outErr = func([]byte) error { validatedBy = append(validatedBy, "p2"); return nil }
	res := &resolver{fn: func(n int, _ *tool.Call) (pipeline.Tool, error) {
		switch n {
		case 1:
			return old, nil
		case 2:
			return nil, tool.ErrUnknownTool // provider not back yet
		}
		return fresh, nil
	}}
	var attempts []int // as the providers see them
	disp := &dispatcher{fn: func(ctx context.Context, _ int, t pipeline.Tool, _ *tool.Exec) tool.Result {
		attempts = append(attempts, pipeline.Attempt(ctx))
		if t.Owner() == "p1" {
			return tool.Failure(tool.CodeProviderGone, "provider disconnected")
		}
		return tool.Result{Content: "fetched", Value: []byte(`"fetched"`)}
	}}
	obs := &metrics{}
	p, clock := retryRig(true, pipeline.RetryConfig{MaxAttempts: 5, Budget: time.Minute}, res, disp, pipeline.WithObserver(obs))
	e := newExec("fetch", `{}`)
	r := p.Run(t.Context(), e)
	checkShape(t, e, r)
	if r.IsError || r.Content != "fetched" {
		t.Fatalf("Run() = %+v, want the reconnected provider's success", r)
	}
	if diff := cmp.Diff([]string{"p1", "p2"}, disp.owners); diff != "" {
		t.Errorf("dispatched owners (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{1, 2}, attempts); diff != "" {
		t.Errorf("dispatched attempts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"p2"}, validatedBy); diff != "" {
		t.Errorf("output validated by (-want +got):\n%s", diff)
	}
	if res.count() != 3 || len(clock.sleeps) != 2 {
		t.Errorf("resolves = %d, sleeps = %v; want 3 resolves and 2 sleeps", res.count(), clock.sleeps)
	}
	// The retry is the provider's second attempt: the try that found the tool unknown
	// dispatched nothing.
	want := []string{"start fetch", "retry fetch PROVIDER_GONE 2", "finish fetch "}
	if diff := cmp.Diff(want, obs.events()); diff != "" {
		t.Errorf("observer events (-want +got):\n%s", diff)
	}
}

// A retry goes only to a registration of the same definition: policy, guards and the
// approval decided on the one the call was admitted with, and a tool re-registered
// with, say, other annotations may need another decision.
func TestRetryStopsAtAnotherDefinition(t *testing.T) {
	old, other := newTool("fetch"), newTool("fetch")
	old.owner, old.hash = "p1", "h1"
	other.owner, other.hash = "p2", "h2"
	other.def.Annotations.Destructive = true
	res := &resolver{fn: func(n int, _ *tool.Call) (pipeline.Tool, error) {
		if n == 1 {
			return old, nil
		}
		return other, nil
	}}
	disp := &dispatcher{fn: func(context.Context, int, pipeline.Tool, *tool.Exec) tool.Result {
		return tool.Failure(tool.CodeProviderGone, "provider disconnected")
	}}
	p, _ := retryRig(true, pipeline.RetryConfig{MaxAttempts: 5, Budget: time.Minute}, res, disp)
	e := newExec("fetch", `{}`)
	r := p.Run(t.Context(), e)
	checkShape(t, e, r)
	if r.Code() != tool.CodeProviderGone {
		t.Errorf("Run() code = %s, want the first dispatch's PROVIDER_GONE", r.Code())
	}
	if diff := cmp.Diff([]string{"p1"}, disp.owners); diff != "" {
		t.Errorf("dispatched owners (-want +got):\n%s", diff)
	}
	if res.count() != 2 {
		t.Errorf("resolves = %d, want 2 (the call's and the retry's)", res.count())
	}
}

func TestRetryLimits(t *testing.T) {
	gone := tool.Failure(tool.CodeProviderGone, "provider disconnected")
	tests := map[string]struct {
		idempotent     bool
		result         tool.Result
		retry          pipeline.RetryConfig
		wantDispatches int
		wantReason     string
	}{
		"not idempotent": {
			result: gone, retry: pipeline.RetryConfig{MaxAttempts: 5, Budget: time.Minute},
			wantDispatches: 1,
		},
		"not transient": {
			idempotent: true, result: tool.Failure(tool.CodeToolError, "bad input"),
			retry: pipeline.RetryConfig{MaxAttempts: 5, Budget: time.Minute}, wantDispatches: 1,
		},
		"max attempts": {
			idempotent: true, result: gone, retry: pipeline.RetryConfig{MaxAttempts: 3, Budget: time.Hour},
			wantDispatches: 3, wantReason: "failed after 3 attempts",
		},
		"budget": {
			// dispatches at t=0s, 1s, 2s; a retry at 3s would pass the 2.5s budget.
			idempotent: true, result: tool.Failure(tool.CodeProviderUnavailable, "no provider"),
			retry:          pipeline.RetryConfig{MaxAttempts: 100, Budget: 2500 * time.Millisecond},
			wantDispatches: 3, wantReason: "failed after 3 attempts",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			disp := returning(tc.result)
			p, _ := retryRig(tc.idempotent, tc.retry, staticResolver(newTool("fetch")), disp)
			e := newExec("fetch", `{}`)
			r := p.Run(t.Context(), e)
			checkShape(t, e, r)
			if r.Code() != tc.result.Code() || r.Err.Reason != tc.wantReason {
				t.Errorf("Run() = %+v, want code %q reason %q", r.Err, tc.result.Code(), tc.wantReason)
			}
			if disp.count() != tc.wantDispatches {
				t.Errorf("dispatches = %d, want %d", disp.count(), tc.wantDispatches)
			}
		})
	}
}

// TestRetryBudgetWithHugeBackoff: a backoff that, added to the time already spent,
// passes the longest Duration is over any budget. The sum wrapped around below zero,
// and the call slept that backoff (until its timeout) before a retry the budget forbids.
func TestRetryBudgetWithHugeBackoff(t *testing.T) {
	var clock *fakeClock
	disp := &dispatcher{fn: func(context.Context, int, pipeline.Tool, *tool.Exec) tool.Result {
		clock.Advance(2 * time.Second)
		return tool.Failure(tool.CodeProviderGone, "provider disconnected")
	}}
	huge := pipeline.WithBackoff(func(int, pipeline.RetryConfig) time.Duration {
		return time.Duration(math.MaxInt64) - time.Second
	})
	p, clock := retryRig(true, pipeline.RetryConfig{MaxAttempts: 5, Budget: time.Minute}, staticResolver(newTool("fetch")), disp, huge)
	e := newExec("fetch", `{}`)
	r := p.Run(t.Context(), e)
	if r.Code() != tool.CodeProviderGone || disp.count() != 1 {
		t.Errorf("Run() = %+v after %d dispatches, want PROVIDER_GONE after 1", r.Err, disp.count())
	}
	if len(clock.sleeps) != 0 {
		t.Errorf("backoffs slept = %v, want none: the backoff is over the budget", clock.sleeps)
	}
}

func TestRetryStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	disp := &dispatcher{fn: func(context.Context, int, pipeline.Tool, *tool.Exec) tool.Result {
		cancel()
		return tool.Failure(tool.CodeProviderGone, "provider disconnected")
	}}
	p, _ := retryRig(true, pipeline.RetryConfig{MaxAttempts: 5, Budget: time.Minute}, staticResolver(newTool("fetch")), disp)
	e := newExec("fetch", `{}`)
	r := p.Run(ctx, e)
	if r.Code() != tool.CodeProviderGone || disp.count() != 1 {
		t.Errorf("Run() = %+v after %d dispatches, want PROVIDER_GONE after 1", r.Err, disp.count())
	}
}

// TestRetryStopsWhenCancelledAsTheBackoffEnds: a cancel that comes as the backoff's
// timer fires (sleepCtx then may return either way) does not start another attempt,
// which the broker would answer with ABORTED in place of the call's PROVIDER_GONE.
func TestRetryStopsWhenCancelledAsTheBackoffEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	disp := &dispatcher{fn: func(ctx context.Context, _ int, _ pipeline.Tool, _ *tool.Exec) tool.Result {
		if ctx.Err() != nil {
			return tool.Failure(tool.CodeAborted, "call was cancelled")
		}
		return tool.Failure(tool.CodeProviderGone, "provider disconnected")
	}}
	timerAndCancel := pipeline.WithSleep(func(context.Context, time.Duration) error {
		cancel()
		return nil // the timer won the select
	})
	p, _ := retryRig(true, pipeline.RetryConfig{MaxAttempts: 5, Budget: time.Minute}, staticResolver(newTool("fetch")), disp, timerAndCancel)
	e := newExec("fetch", `{}`)
	r := p.Run(ctx, e)
	if r.Code() != tool.CodeProviderGone || disp.count() != 1 {
		t.Errorf("Run() = %+v after %d dispatches, want PROVIDER_GONE after 1", r.Err, disp.count())
	}
}

// TestRetryStopsPastTheDeadlineBeforeItsTimer: a caller's deadline that passes during an
// attempt starts no further attempt even while its context's timer has yet to run, as a
// cancel does. The broker answers a call past its deadline ABORTED_BEFORE_DISPATCH, which
// would stand in place of the call's PROVIDER_GONE and say the tool never ran, though
// the first attempt reached its provider.
func TestRetryStopsPastTheDeadlineBeforeItsTimer(t *testing.T) {
	passed := &atomic.Bool{}
	ctx := tooltest.LateTimer{Context: t.Context(), Passed: passed}
	disp := &dispatcher{fn: func(ctx context.Context, _ int, _ pipeline.Tool, _ *tool.Exec) tool.Result {
		if tool.Ended(ctx) { // as the broker answers a call past its deadline
			return tool.Failure(tool.CodeAbortedBeforeDispatch, "call was cancelled before it started")
		}
		passed.Store(true)
		return tool.Failure(tool.CodeProviderGone, "provider disconnected")
	}}
	clock := newClock()
	p := pipeline.New(staticResolver(newTool("fetch")), disp,
		pipeline.WithConfig(pipeline.Config{
			Retry: pipeline.RetryConfig{MaxAttempts: 5, Budget: time.Minute},
			ToolPolicy: func(string, string) pipeline.ToolSettings {
				// Longer than the caller's deadline: the dispatch keeps the caller's.
				return pipeline.ToolSettings{Idempotent: true, Timeout: 2 * time.Hour}
			},
		}),
		pipeline.WithClock(clock.Now), pipeline.WithSleep(clock.Sleep),
		pipeline.WithBackoff(func(int, pipeline.RetryConfig) time.Duration { return time.Second }))
	r := p.Run(ctx, newExec("fetch", `{}`))
	if r.Code() != tool.CodeProviderGone || disp.count() != 1 {
		t.Errorf("Run() = %+v after %d dispatches, want PROVIDER_GONE after 1", r.Err, disp.count())
	}
}

// TestRetryDoesNotWaitPastTheDeadline: a backoff that would reach the call's deadline
// (its tool's timeout, or the caller's deadline when that comes first) is not waited,
// as one past the budget is not: no retry could start, so the call ends at once with
// the failure it had. It waited out the deadline and then ended TOOL_TIMEOUT.
func TestRetryDoesNotWaitPastTheDeadline(t *testing.T) {
	tests := map[string]struct {
		toolTimeout    time.Duration
		callerDeadline time.Duration
	}{
		"tool timeout":    {toolTimeout: time.Minute},
		"caller deadline": {toolTimeout: 3 * time.Hour, callerDeadline: time.Minute},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			if tc.callerDeadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.callerDeadline)
				defer cancel()
			}
			disp := returning(tool.Failure(tool.CodeProviderGone, "provider disconnected"))
			// The deadline is on the wall clock, so the fake one starts from it.
			clock := &fakeClock{now: time.Now()}
			p := pipeline.New(staticResolver(newTool("fetch")), disp,
				pipeline.WithConfig(pipeline.Config{
					Retry: pipeline.RetryConfig{MaxAttempts: 5, Budget: 10 * time.Hour},
					ToolPolicy: func(string, string) pipeline.ToolSettings {
						return pipeline.ToolSettings{Idempotent: true, Timeout: tc.toolTimeout}
					},
				}),
				pipeline.WithClock(clock.Now), pipeline.WithSleep(clock.Sleep),
				pipeline.WithBackoff(func(int, pipeline.RetryConfig) time.Duration { return 2 * time.Minute }))
			e := newExec("fetch", `{}`)
			r := p.Run(ctx, e)
			checkShape(t, e, r)
			if r.Code() != tool.CodeProviderGone || disp.count() != 1 {
				t.Errorf("Run() = %+v after %d dispatches, want PROVIDER_GONE after 1", r.Err, disp.count())
			}
			if len(clock.sleeps) != 0 {
				t.Errorf("backoffs slept = %v, want none: the backoff reaches the deadline", clock.sleeps)
			}
		})
	}
}

func TestExecuteInterceptorOrder(t *testing.T) {
	var order []string
	layer := func(name string) pipeline.Interceptor {
		return func(ctx context.Context, e *tool.Exec, t pipeline.Tool, next pipeline.Handler) tool.Result {
			order = append(order, name+" in")
			r := next(ctx, e, t)
			order = append(order, name+" out")
			r.Content += "+" + name
			return r
		}
	}
	disp := &dispatcher{fn: func(context.Context, int, pipeline.Tool, *tool.Exec) tool.Result {
		order = append(order, "body")
		return tool.Result{Content: "r"}
	}}
	p := pipeline.New(staticResolver(newTool("echo")), disp,
		pipeline.WithInterceptors(layer("a"), pipeline.ChainInterceptors(layer("b"), layer("c"))))
	r := p.Run(t.Context(), newExec("echo", `{}`))
	if want := []string{"a in", "b in", "c in", "body", "c out", "b out", "a out"}; !cmp.Equal(want, order) {
		t.Errorf("interceptor order = %v, want %v", order, want)
	}
	if r.Content != "r+c+b+a" {
		t.Errorf("Run().Content = %q, want %q", r.Content, "r+c+b+a")
	}
}

func TestInterceptorShortCircuit(t *testing.T) {
	disp := returning(tool.Result{Content: "ok"})
	cached := func(context.Context, *tool.Exec, pipeline.Tool, pipeline.Handler) tool.Result {
		return tool.Result{Content: "cached"}
	}
	p := pipeline.New(staticResolver(newTool("echo")), disp, pipeline.WithInterceptors(cached))
	if r := p.Run(t.Context(), newExec("echo", `{}`)); r.Content != "cached" || disp.count() != 0 {
		t.Errorf("Run() = %q with %d dispatches, want cached and 0", r.Content, disp.count())
	}
}

// metrics is a recording Observer.
type metrics struct {
	mu  sync.Mutex
	evs []string
}

func (m *metrics) add(s string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.evs = append(m.evs, s)
}

func (m *metrics) events() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.evs...)
}

func (m *metrics) DispatchStarted(name string) { m.add("start " + name) }
func (m *metrics) DispatchFinished(name string, code tool.Code, _ time.Duration) {
	m.add(fmt.Sprintf("finish %s %s", name, code))
}
func (m *metrics) Retried(name string, code tool.Code, attempt int) {
	m.add(fmt.Sprintf("retry %s %s %d", name, code, attempt))
}
func (m *metrics) Panicked(name string) { m.add("panic " + name) }

// A call whose timeout fired stays TOOL_TIMEOUT when the batch is cancelled while the
// provider is still winding down (the broker's cancel grace): the timeout came first.
func TestTimeoutBeforeCancelStaysTimeout(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	disp := &dispatcher{fn: func(ctx context.Context, _ int, _ pipeline.Tool, _ *tool.Exec) tool.Result {
		<-ctx.Done() // the tool's timeout
		cancel()     // the client cancels during the cancel grace
		return tool.Failure(tool.CodeAborted, "call was cancelled")
	}}
	p := pipeline.New(staticResolver(newTool("sleep")), disp, pipeline.WithConfig(pipeline.Config{DefaultTimeout: time.Millisecond}))
	e := newExec("sleep", `{}`)
	r := p.Run(ctx, e)
	checkShape(t, e, r)
	if r.Code() != tool.CodeToolTimeout {
		t.Errorf("Run() = %+v, want TOOL_TIMEOUT", r.Err)
	}
}

// TestCallerDeadlineIsNotTheToolsTimeout: a failure that comes at the caller's deadline,
// before the tool's own timeout and before the caller's context has noticed its
// deadline, is the provider's failure, not TOOL_TIMEOUT: the dispatch context's deadline
// is the caller's there, and the tool's timeout has not passed.
func TestCallerDeadlineIsNotTheToolsTimeout(t *testing.T) {
	start := time.Now()
	ctx, cancel := context.WithDeadline(t.Context(), start.Add(time.Hour))
	defer cancel()
	clock := &fakeClock{now: start}
	disp := &dispatcher{fn: func(context.Context, int, pipeline.Tool, *tool.Exec) tool.Result {
		clock.Advance(2 * time.Hour) // past the caller's deadline, before the tool's timeout
		return tool.Failure(tool.CodeToolError, "deadline exceeded")
	}}
	p := pipeline.New(staticResolver(newTool("sleep")), disp, pipeline.WithClock(clock.Now),
		pipeline.WithConfig(pipeline.Config{DefaultTimeout: 3 * time.Hour}))
	e := newExec("sleep", `{}`)
	r := p.Run(ctx, e)
	checkShape(t, e, r)
	if r.Code() != tool.CodeToolError {
		t.Errorf("Run() = %+v, want the provider's TOOL_ERROR: the 3h timeout has not passed", r.Err)
	}
}

// TestRetryCancelledBeforeItsAttemptStarts: a cancel that lands once a retry has passed
// its checks (while the tool is resolved again, or while the broker waits to hand the
// execute to a busy stream) is answered ABORTED_BEFORE_DISPATCH by the broker, though
// the first attempt reached its provider. The call keeps the failure it had rather than
// say the tool never ran, and the observer counts no retry: none reached a provider.
func TestRetryCancelledBeforeItsAttemptStarts(t *testing.T) {
	aborted := tool.Failure(tool.CodeAbortedBeforeDispatch, "call was cancelled before it started")
	tests := map[string]struct {
		cancelIn  string // "resolve" or "dispatch"
		cancelAt  int    // the try cancelled
		wantRetry []string
	}{
		"cancelled while resolving again": {cancelIn: "resolve", cancelAt: 2},
		"cancelled before the send":       {cancelIn: "dispatch", cancelAt: 2},
		"cancelled before the second retry's send": {
			cancelIn: "dispatch", cancelAt: 3, wantRetry: []string{"retry fetch PROVIDER_GONE 2"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			fetch := newTool("fetch")
			res := &resolver{fn: func(n int, _ *tool.Call) (pipeline.Tool, error) {
				if n == tc.cancelAt && tc.cancelIn == "resolve" {
					cancel()
				}
				return fetch, nil
			}}
			disp := &dispatcher{fn: func(ctx context.Context, n int, _ pipeline.Tool, _ *tool.Exec) tool.Result {
				if n == tc.cancelAt && tc.cancelIn == "dispatch" {
					cancel()
				}
				if tool.Ended(ctx) { // as the broker answers a call it did not send
					return aborted
				}
				return tool.Failure(tool.CodeProviderGone, "provider disconnected")
			}}
			obs := &metrics{}
			p, _ := retryRig(true, pipeline.RetryConfig{MaxAttempts: 5, Budget: time.Minute}, res, disp, pipeline.WithObserver(obs))
			e := newExec("fetch", `{}`)
			r := p.Run(ctx, e)
			checkShape(t, e, r)
			if r.Code() != tool.CodeProviderGone || disp.count() != tc.cancelAt {
				t.Errorf("Run() = %+v after %d dispatches, want PROVIDER_GONE after %d", r.Err, disp.count(), tc.cancelAt)
			}
			want := append(append([]string{"start fetch"}, tc.wantRetry...), "finish fetch PROVIDER_GONE")
			if diff := cmp.Diff(want, obs.events()); diff != "" {
				t.Errorf("observer events (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRetryInAToolSetThatEndedWaitsNoBackoff: a call of a batch run with a tool set
// whose provider left (its disconnect removes its tools, which ends the set, though the
// registry may not have caught up yet) or whose set was released or invalidated while
// it ran keeps its PROVIDER_GONE at once: no retry could go through the set, so no
// backoff is waited before finding that out.
func TestRetryInAToolSetThatEndedWaitsNoBackoff(t *testing.T) {
	gone := fmt.Errorf("registry: tool set %q was released: %w", "ts_1", tool.ErrToolSetGone)
	tests := map[string]struct {
		released  bool // the set is gone once the call has been dispatched
		connected bool
	}{
		"set released":  {released: true, connected: true},
		"provider left": {},
		"both":          {released: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			fetch := newTool("fetch")
			fetch.owner = "p1"
			var dispatched atomic.Bool
			res := &resolver{fn: func(int, *tool.Call) (pipeline.Tool, error) {
				if tc.released && dispatched.Load() {
					return nil, gone
				}
				return fetch, nil
			}}
			disp := &dispatcher{fn: func(context.Context, int, pipeline.Tool, *tool.Exec) tool.Result {
				dispatched.Store(true)
				return tool.Failure(tool.CodeProviderGone, "provider disconnected while the call was running")
			}}
			connected := pipeline.WithProviderConnected(func(string) bool { return tc.connected || !dispatched.Load() })
			p, clock := retryRig(true, pipeline.RetryConfig{MaxAttempts: 5, Budget: time.Minute}, res, disp, connected)
			e := newExec("fetch", `{}`)
			e.ToolSetID = "ts_1"
			r := p.Run(t.Context(), e)
			checkShape(t, e, r)
			if r.Code() != tool.CodeProviderGone || r.Err.Reason != "" || disp.count() != 1 {
				t.Errorf("Run() = %+v after %d dispatches, want the first dispatch's PROVIDER_GONE, unretried", r.Err, disp.count())
			}
			if len(clock.sleeps) != 0 {
				t.Errorf("backoffs slept = %v, want none: the set has ended", clock.sleeps)
			}
		})
	}
}

// TestRetryInALiveToolSet: a tool set that lives on, its provider connected, does not
// stop an idempotent call's retries.
func TestRetryInALiveToolSet(t *testing.T) {
	disp := &dispatcher{fn: func(_ context.Context, n int, _ pipeline.Tool, _ *tool.Exec) tool.Result {
		if n == 1 {
			return tool.Failure(tool.CodeProviderUnavailable, "provider not connected")
		}
		return tool.Result{Content: "fetched", Value: []byte(`"fetched"`)}
	}}
	connected := pipeline.WithProviderConnected(func(string) bool { return true })
	p, clock := retryRig(true, pipeline.RetryConfig{MaxAttempts: 5, Budget: time.Minute}, staticResolver(newTool("fetch")), disp, connected)
	e := newExec("fetch", `{}`)
	e.ToolSetID = "ts_1"
	r := p.Run(t.Context(), e)
	if r.IsError || disp.count() != 2 || len(clock.sleeps) != 1 {
		t.Errorf("Run() = %+v after %d dispatches and backoffs %v, want the retry's success after one backoff", r.Err, disp.count(), clock.sleeps)
	}
}
