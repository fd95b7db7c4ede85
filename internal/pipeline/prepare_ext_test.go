package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolsd/toolsd/internal/pipeline"
	"github.com/toolsd/toolsd/internal/tool"
)

// A call may name a tool that does not exist with any text the request allows: its
// result quotes the name cut at 128 bytes, in the message and in error.tool.
func TestUnknownToolNameIsCut(t *testing.T) {
	res := &resolver{fn: func(int, *tool.Call) (pipeline.Tool, error) { return nil, tool.ErrUnknownTool }}
	p := pipeline.New(res, &dispatcher{})
	name := strings.Repeat("n", 100_000)
	e := newExec(name, `{}`)
	r := p.Run(t.Context(), e)
	if r.Code() != tool.CodeUnknownTool {
		t.Fatalf("Run() code = %s, want UNKNOWN_TOOL", r.Code())
	}
	want := tool.NamedInResult(name)
	if len(want) > 132 || !strings.HasPrefix(name, strings.TrimSuffix(want, "…")) {
		t.Fatalf("NamedInResult() = %d bytes, want the name cut to at most 128 bytes and an ellipsis", len(want))
	}
	if r.Err.Tool != want || r.Err.Message != fmt.Sprintf("unknown tool %q", want) {
		t.Errorf("error.tool = %d bytes, message = %d bytes; want both quoting the cut name", len(r.Err.Tool), len(r.Err.Message))
	}
	if len(r.Content) > 200 {
		t.Errorf("content is %d bytes, want the cut name only", len(r.Content))
	}
}

func TestPrepareFailures(t *testing.T) {
	echo := newTool("echo")
	strict := newTool("echo")
	strict.argErr = errors.New(`at "/text": expected string, got number`)
	tests := map[string]struct {
		res      *resolver
		args     string
		opts     []pipeline.Option
		wantCode tool.Code
		wantMsg  string
	}{
		"unknown tool": {
			res: &resolver{fn: func(int, *tool.Call) (pipeline.Tool, error) {
				return nil, fmt.Errorf("registry: %w", tool.ErrUnknownTool)
			}},
			wantCode: tool.CodeUnknownTool,
			wantMsg:  `unknown tool "echo"`,
		},
		"tool set ended": {
			res:      &resolver{fn: func(int, *tool.Call) (pipeline.Tool, error) { return nil, tool.ErrToolSetGone }},
			wantCode: tool.CodeAbortedBeforeDispatch,
			wantMsg:  "call was not started: its tool set ended",
		},
		"resolver failure": {
			res:      &resolver{fn: func(int, *tool.Call) (pipeline.Tool, error) { return nil, errors.New("disk on fire") }},
			wantCode: tool.CodeInternal,
			wantMsg:  "internal error",
		},
		"malformed arguments": {
			res:      staticResolver(echo),
			args:     `{"text":`,
			wantCode: tool.CodeInvalidArguments,
			wantMsg:  `invalid arguments for tool "echo": arguments are not valid JSON`,
		},
		"schema violation": {
			res:      staticResolver(strict),
			args:     `{"text":1}`,
			wantCode: tool.CodeInvalidArguments,
			wantMsg:  `invalid arguments for tool "echo": at "/text": expected string, got number`,
		},
		"default deny": {
			res:      staticResolver(echo),
			opts:     []pipeline.Option{pipeline.WithConfig(pipeline.Config{DefaultDecision: pipeline.Deny})},
			wantCode: tool.CodeDenied,
			wantMsg:  "call denied by policy",
		},
		"ask without approver": {
			res:      staticResolver(echo),
			opts:     []pipeline.Option{pipeline.WithPreExecute(verdict(pipeline.Ask, "sure?"))},
			wantCode: tool.CodeApprovalUnavailable,
			wantMsg:  "call requires approval but no approver is available",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if tc.args == "" {
				tc.args = `{}`
			}
			var posts int
			post := pipeline.PostExecuteFunc("count", func(context.Context, *tool.Exec, pipeline.Tool, tool.Result) pipeline.PostVerdict {
				posts++
				return pipeline.PostVerdict{}
			})
			var observed []tool.Result
			disp := returning(tool.Result{Content: "ok"})
			opts := append([]pipeline.Option{
				pipeline.WithPostExecute(post),
				pipeline.WithResultObservers(func(_ *tool.Exec, r tool.Result, _ time.Duration) { observed = append(observed, r) }),
			}, tc.opts...)
			p := pipeline.New(tc.res, disp, opts...)
			e := newExec("echo", tc.args)
			r := p.Run(t.Context(), e)
			checkShape(t, e, r)
			if r.Code() != tc.wantCode || r.Err.Message != tc.wantMsg {
				t.Errorf("Run() = %s %q, want %s %q", r.Code(), r.Err.Message, tc.wantCode, tc.wantMsg)
			}
			if r.Content != "Error: "+tc.wantMsg {
				t.Errorf("Run().Content = %q, want %q", r.Content, "Error: "+tc.wantMsg)
			}
			if disp.count() != 0 || posts != 0 {
				t.Errorf("final result reached dispatch %d times, post-execute %d times; want 0, 0", disp.count(), posts)
			}
			if diff := cmp.Diff([]tool.Result{r}, observed); diff != "" {
				t.Errorf("observed results mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPrivateReasonHiddenFromContent(t *testing.T) {
	tests := map[string]struct {
		v          pipeline.Verdict
		wantMsg    string
		wantReason string
	}{
		"private reason": {
			v:       pipeline.Verdict{Decision: pipeline.Deny, Reason: "rule 7: secrets dir", Private: true},
			wantMsg: "call denied by policy", wantReason: "rule 7: secrets dir",
		},
		"private with user reason": {
			v:       pipeline.Verdict{Decision: pipeline.Deny, Reason: "rule 7: secrets dir", UserReason: "blocked by admin", Private: true},
			wantMsg: "call denied by policy", wantReason: "blocked by admin",
		},
		"public reason": {
			v:       pipeline.Verdict{Decision: pipeline.Deny, Reason: "no writes to /etc", UserReason: "see policy doc"},
			wantMsg: "no writes to /etc", wantReason: "see policy doc",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := pipeline.New(staticResolver(newTool("write")), returning(tool.Result{}), pipeline.WithPreExecute(
				pipeline.PreExecuteFunc("rules", func(context.Context, *tool.Exec, pipeline.Tool) pipeline.Verdict { return tc.v })))
			e := newExec("write", `{}`)
			r := p.Run(t.Context(), e)
			checkShape(t, e, r)
			if r.Code() != tool.CodeDenied || r.Err.Message != tc.wantMsg || r.Err.Reason != tc.wantReason {
				t.Errorf("Run().Err = %+v, want DENIED %q reason %q", r.Err, tc.wantMsg, tc.wantReason)
			}
			if tc.v.Private && strings.Contains(r.Content, "secrets") {
				t.Errorf("Run().Content = %q leaks the private reason", r.Content)
			}
		})
	}
}

func TestParticipantsCannotRewriteArguments(t *testing.T) {
	const args = `{"path":"/tmp/x"}`
	var seen []string
	mutate := func(_ context.Context, e *tool.Exec, _ pipeline.Tool) pipeline.Verdict {
		seen = append(seen, e.Arguments)
		e.Arguments = `{"path":"/etc/passwd"}`
		e.Name = "other"
		return pipeline.Verdict{Decision: pipeline.Allow}
	}
	guard := func(_ context.Context, e *tool.Exec, _ pipeline.Tool) (bool, string) {
		seen = append(seen, e.Arguments)
		e.Arguments = `{"path":"/etc/shadow"}`
		return false, ""
	}
	post := func(_ context.Context, e *tool.Exec, _ pipeline.Tool, _ tool.Result) pipeline.PostVerdict {
		seen = append(seen, e.Arguments+" "+e.Name)
		return pipeline.PostVerdict{}
	}
	disp := returning(tool.Result{Content: "ok"})
	p := pipeline.New(staticResolver(newTool("read")), disp,
		pipeline.WithPreExecute(pipeline.PreExecuteFunc("m1", mutate), pipeline.PreExecuteFunc("m2", mutate)),
		pipeline.WithGuards(pipeline.GuardFunc("g", guard)),
		pipeline.WithPostExecute(pipeline.PostExecuteFunc("p", post)))
	e := newExec("read", args)
	r := p.Run(t.Context(), e)
	if r.IsError {
		t.Fatalf("Run() = %+v, want success", r)
	}
	want := []string{args, args, args, args + " read"}
	if diff := cmp.Diff(want, seen); diff != "" {
		t.Errorf("arguments seen by participants (-want +got):\n%s", diff)
	}
	if e.Arguments != args || e.Name != "read" {
		t.Errorf("Exec after Run = %s %s, want read %s", e.Name, e.Arguments, args)
	}
	if diff := cmp.Diff([]string{args}, disp.args); diff != "" {
		t.Errorf("dispatched arguments (-want +got):\n%s", diff)
	}
}

func TestApproval(t *testing.T) {
	tests := map[string]struct {
		approver func(cancel context.CancelFunc) tool.Approver
		// expires marks the cases that wait for the approval timeout: it is 5ms for
		// them and a minute for the others, which must not race it on a slow machine.
		expires  bool
		wantCode tool.Code
		wantMsg  string
	}{
		"approved": {
			approver: func(context.CancelFunc) tool.Approver {
				return approverFunc(func(_ context.Context, req tool.ApprovalRequest) (tool.ApprovalDecision, error) {
					if req.Reason != "deletes files" || req.Call.Name != "rm" {
						return tool.ApprovalDecision{}, fmt.Errorf("unexpected request %+v", req)
					}
					return tool.ApprovalDecision{Approved: true}, nil
				})
			},
		},
		"denied with reason": {
			approver: func(context.CancelFunc) tool.Approver {
				return approverFunc(func(context.Context, tool.ApprovalRequest) (tool.ApprovalDecision, error) {
					return tool.ApprovalDecision{Reason: "not today"}, nil
				})
			},
			wantCode: tool.CodeApprovalDenied, wantMsg: "call was not approved: not today",
		},
		"denied with a reason over 4 KiB": {
			approver: func(context.CancelFunc) tool.Approver {
				return approverFunc(func(context.Context, tool.ApprovalRequest) (tool.ApprovalDecision, error) {
					return tool.ApprovalDecision{Reason: strings.Repeat("é", pipeline.MaxApprovalReasonBytes)}, nil
				})
			},
			wantCode: tool.CodeApprovalDenied,
			wantMsg:  "call was not approved: " + strings.Repeat("é", (pipeline.MaxApprovalReasonBytes-len("…"))/2) + "…",
		},
		"approval timeout enforced": {
			approver: func(context.CancelFunc) tool.Approver {
				return approverFunc(func(ctx context.Context, _ tool.ApprovalRequest) (tool.ApprovalDecision, error) {
					<-ctx.Done()
					return tool.ApprovalDecision{}, ctx.Err()
				})
			},
			expires: true, wantCode: tool.CodeApprovalTimeout, wantMsg: "approval timed out after 5ms",
		},
		"caller cancels while asking": {
			approver: func(cancel context.CancelFunc) tool.Approver {
				return approverFunc(func(ctx context.Context, _ tool.ApprovalRequest) (tool.ApprovalDecision, error) {
					cancel()
					<-ctx.Done()
					return tool.ApprovalDecision{}, ctx.Err()
				})
			},
			wantCode: tool.CodeAbortedBeforeDispatch, wantMsg: "call was cancelled before dispatch",
		},
		"caller cancels after a denial": {
			approver: func(cancel context.CancelFunc) tool.Approver {
				return approverFunc(func(context.Context, tool.ApprovalRequest) (tool.ApprovalDecision, error) {
					cancel() // the cancel follows the answer
					return tool.ApprovalDecision{Reason: "not today"}, nil
				})
			},
			wantCode: tool.CodeApprovalDenied, wantMsg: "call was not approved: not today",
		},
		"caller cancels after an approval": {
			approver: func(cancel context.CancelFunc) tool.Approver {
				return approverFunc(func(context.Context, tool.ApprovalRequest) (tool.ApprovalDecision, error) {
					cancel()
					return tool.ApprovalDecision{Approved: true}, nil
				})
			},
			wantCode: tool.CodeAbortedBeforeDispatch, wantMsg: "call was cancelled before dispatch",
		},
		"caller cancels after the wait expired": {
			approver: func(cancel context.CancelFunc) tool.Approver {
				return approverFunc(func(ctx context.Context, _ tool.ApprovalRequest) (tool.ApprovalDecision, error) {
					<-ctx.Done()
					cancel()
					return tool.ApprovalDecision{}, ctx.Err()
				})
			},
			expires: true, wantCode: tool.CodeApprovalTimeout, wantMsg: "approval timed out after 5ms",
		},
		"approver failure": {
			approver: func(context.CancelFunc) tool.Approver {
				return approverFunc(func(context.Context, tool.ApprovalRequest) (tool.ApprovalDecision, error) {
					return tool.ApprovalDecision{}, errors.New("stream broken")
				})
			},
			wantCode: tool.CodeApprovalUnavailable, wantMsg: "call requires approval but no approver is available",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			disp := returning(tool.Result{Content: "ok"})
			timeout := time.Minute
			if tc.expires {
				timeout = 5 * time.Millisecond
			}
			p := pipeline.New(staticResolver(newTool("rm")), disp,
				pipeline.WithConfig(pipeline.Config{ApprovalTimeout: timeout}),
				pipeline.WithPreExecute(verdict(pipeline.Ask, "deletes files")))
			e := newExec("rm", `{}`)
			e.Approver = tc.approver(cancel)
			r := p.Run(ctx, e)
			checkShape(t, e, r)
			if r.Code() != tc.wantCode {
				t.Fatalf("Run() = %+v, want code %q", r, tc.wantCode)
			}
			if tc.wantCode == "" {
				if disp.count() != 1 {
					t.Errorf("approved call dispatched %d times, want 1", disp.count())
				}
				return
			}
			if r.Err.Message != tc.wantMsg || disp.count() != 0 {
				t.Errorf("Run() message %q dispatches %d, want %q and 0", r.Err.Message, disp.count(), tc.wantMsg)
			}
		})
	}
}

func TestCancelledBeforeDispatch(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	disp := returning(tool.Result{Content: "ok"})
	consulted := 0
	hook := pipeline.PreExecuteFunc("hook", func(context.Context, *tool.Exec, pipeline.Tool) pipeline.Verdict {
		consulted++
		return pipeline.Verdict{}
	})
	p := pipeline.New(staticResolver(newTool("echo")), disp, pipeline.WithPreExecute(hook))
	e := newExec("echo", `{}`)
	r := p.Run(ctx, e)
	checkShape(t, e, r)
	if r.Code() != tool.CodeAbortedBeforeDispatch || disp.count() != 0 || consulted != 0 {
		t.Errorf("Run(cancelled) = %+v with %d dispatches, %d hook calls; want ABORTED_BEFORE_DISPATCH and none", r.Err, disp.count(), consulted)
	}
}

func TestPanicBecomesInternal(t *testing.T) {
	var observed int
	disp := &dispatcher{fn: func(context.Context, int, pipeline.Tool, *tool.Exec) tool.Result { panic("boom") }}
	obs := &metrics{}
	p := pipeline.New(staticResolver(newTool("echo")), disp, pipeline.WithObserver(obs),
		pipeline.WithResultObservers(func(*tool.Exec, tool.Result, time.Duration) { observed++ }))
	e := newExec("echo", `{}`)
	r := p.Run(t.Context(), e)
	checkShape(t, e, r)
	if r.Code() != tool.CodeInternal || r.Err.Message != "internal error" || observed != 1 {
		t.Errorf("Run(panicking) = %+v, observed %d; want INTERNAL observed once", r.Err, observed)
	}
	if evs := obs.events(); !slices.Contains(evs, "panic echo") {
		t.Errorf("observer saw %q, want the panic counted", evs)
	}
	// The dispatch that panicked is over: it is no longer in flight.
	if evs := obs.events(); !slices.Contains(evs, "finish echo INTERNAL") {
		t.Errorf("observer saw %q, want the panicked dispatch finished", evs)
	}
}

func TestGateStopsCallCancelledDuringPrepare(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	disp := returning(tool.Result{Content: "ok"})
	p := pipeline.New(staticResolver(newTool("echo")), disp, pipeline.WithGuards(
		pipeline.GuardFunc("slow", func(context.Context, *tool.Exec, pipeline.Tool) (bool, string) {
			cancel()
			return false, ""
		})))
	e := newExec("echo", `{}`)
	r := p.Run(ctx, e)
	checkShape(t, e, r)
	if r.Code() != tool.CodeAbortedBeforeDispatch || disp.count() != 0 {
		t.Errorf("Run() = %+v with %d dispatches, want ABORTED_BEFORE_DISPATCH and none", r.Err, disp.count())
	}
}

// A tool that no longer resolves once its call is approved was restricted away, unless
// its provider has left: then the call goes on to dispatch, which finds the provider not
// connected, and does not count as restricted away.
func TestApprovedCallWhoseToolIsGone(t *testing.T) {
	tests := map[string]struct {
		operator bool // the tool is the operator's (owner ""), not provider p1's
		opts     []pipeline.Option
		wantCode tool.Code
		wantSent int
	}{
		"provider unknown":       {wantCode: tool.CodeAbortedBeforeDispatch},
		"provider connected":     {opts: []pipeline.Option{pipeline.WithProviderConnected(func(string) bool { return true })}, wantCode: tool.CodeAbortedBeforeDispatch},
		"provider not connected": {opts: []pipeline.Option{pipeline.WithProviderConnected(func(id string) bool { return id != "p1" })}, wantCode: tool.CodeProviderUnavailable, wantSent: 1},
		"operator's tool":        {operator: true, opts: []pipeline.Option{pipeline.WithProviderConnected(func(string) bool { return false })}, wantCode: tool.CodeAbortedBeforeDispatch},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			res := &resolver{fn: func(n int, _ *tool.Call) (pipeline.Tool, error) {
				if n == 1 {
					rm := newTool("rm")
					if tt.operator {
						rm.owner = ""
					}
					return rm, nil
				}
				return nil, tool.ErrUnknownTool
			}}
			disp := returning(tool.Failure(tool.CodeProviderUnavailable, "the tool's provider is not connected"))
			p := pipeline.New(res, disp, append(tt.opts, pipeline.WithPreExecute(verdict(pipeline.Ask, "deletes files")))...)
			e := newExec("rm", `{}`)
			e.Approver = approverFunc(func(context.Context, tool.ApprovalRequest) (tool.ApprovalDecision, error) {
				return tool.ApprovalDecision{Approved: true}, nil
			})
			if r := p.Run(t.Context(), e); r.Code() != tt.wantCode || disp.count() != tt.wantSent {
				t.Errorf("Run() = code %q, dispatched %d times; want %s, dispatched %d times", r.Code(), disp.count(), tt.wantCode, tt.wantSent)
			}
		})
	}
}

// An approval that an approver returns once the wait has expired (it got the answer
// just after its deadline) does not run the call: the ask timed out.
func TestLateApprovalDoesNotRun(t *testing.T) {
	disp := returning(tool.Result{Content: "ok"})
	p := pipeline.New(staticResolver(newTool("rm")), disp,
		pipeline.WithConfig(pipeline.Config{ApprovalTimeout: 5 * time.Millisecond}),
		pipeline.WithPreExecute(verdict(pipeline.Ask, "deletes files")))
	e := newExec("rm", `{}`)
	e.Approver = approverFunc(func(ctx context.Context, _ tool.ApprovalRequest) (tool.ApprovalDecision, error) {
		<-ctx.Done()
		return tool.ApprovalDecision{Approved: true}, nil
	})
	if r := p.Run(t.Context(), e); r.Code() != tool.CodeApprovalTimeout || disp.count() != 0 {
		t.Errorf("Run() = code %q content %q, dispatched %d times; want APPROVAL_TIMEOUT and no dispatch", r.Code(), r.Content, disp.count())
	}
}

// A caller whose own deadline passes while its call waits for approval (a client's
// RPC deadline) cancelled the call: the approval wait, far from its own timeout, did not
// expire, and the result must not say it did.
func TestCallerDeadlineDuringApprovalIsNotATimeout(t *testing.T) {
	disp := returning(tool.Result{Content: "ok"})
	p := pipeline.New(staticResolver(newTool("rm")), disp,
		pipeline.WithConfig(pipeline.Config{ApprovalTimeout: time.Hour}),
		pipeline.WithPreExecute(verdict(pipeline.Ask, "deletes files")))
	e := newExec("rm", `{}`)
	asked := make(chan struct{})
	e.Approver = approverFunc(func(ctx context.Context, _ tool.ApprovalRequest) (tool.ApprovalDecision, error) {
		close(asked)
		<-ctx.Done()
		return tool.ApprovalDecision{}, ctx.Err()
	})
	// The caller's deadline passes while the approval waits, and only then.
	ctx := &expiringContext{Context: t.Context(), expired: make(chan struct{})}
	go func() {
		<-asked
		close(ctx.expired)
	}()
	r := p.Run(ctx, e)
	checkShape(t, e, r)
	if r.Code() != tool.CodeAbortedBeforeDispatch || disp.count() != 0 {
		t.Errorf("Run() = %q %q with %d dispatches, want ABORTED_BEFORE_DISPATCH and none", r.Code(), r.Err.Message, disp.count())
	}
}

// expiringContext is a caller's context whose deadline passes when expired is closed.
type expiringContext struct {
	context.Context
	expired chan struct{}
}

func (c *expiringContext) Deadline() (time.Time, bool) { return time.Now().Add(time.Hour), true }

func (c *expiringContext) Done() <-chan struct{} { return c.expired }

func (c *expiringContext) Err() error {
	select {
	case <-c.expired:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// askingWithTimer is a pipeline that asks for approval of rm, dispatched to disp, and
// sets *fire to its approval wait's timer, which fires only when the test calls it.
func askingWithTimer(disp *dispatcher, fire *func()) *pipeline.Pipeline {
	return pipeline.New(staticResolver(newTool("rm")), disp,
		pipeline.WithConfig(pipeline.Config{ApprovalTimeout: time.Hour}),
		pipeline.WithApprovalTimer(func(_ time.Duration, f func()) func() bool {
			*fire = f
			return func() bool { return true }
		}),
		pipeline.WithPreExecute(verdict(pipeline.Ask, "deletes files")))
}

// An answer the approver accepts decides the call, even if the wait's timer fires
// before the approver returns it; once the timer has fired, Accept refuses an answer and
// the call ends APPROVAL_TIMEOUT. Exactly one of the two wins.
func TestApprovalAcceptAndExpiryHaveOneOutcome(t *testing.T) {
	tests := map[string]struct {
		expireFirst bool
		wantAccept  bool
		wantCode    tool.Code
	}{
		"accepted, then the timer fires":  {expireFirst: false, wantAccept: true, wantCode: ""},
		"the timer fires, then an answer": {expireFirst: true, wantAccept: false, wantCode: tool.CodeApprovalTimeout},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var fire func()
			p := askingWithTimer(returning(tool.Result{Content: "ok"}), &fire)
			e := newExec("rm", `{}`)
			var accepted bool
			e.Approver = approverFunc(func(ctx context.Context, req tool.ApprovalRequest) (tool.ApprovalDecision, error) {
				if tc.expireFirst {
					fire()
					accepted = req.Accept()
				} else {
					accepted = req.Accept()
					fire()
				}
				if !accepted {
					<-ctx.Done()
					return tool.ApprovalDecision{}, ctx.Err()
				}
				return tool.ApprovalDecision{Approved: true}, nil
			})
			r := p.Run(t.Context(), e)
			checkShape(t, e, r)
			if accepted != tc.wantAccept || r.Code() != tc.wantCode {
				t.Errorf("Accept() = %v, Run() = code %q; want %v and %q", accepted, r.Code(), tc.wantAccept, tc.wantCode)
			}
		})
	}
}

// A caller that cancels while its call waits for approval ended the wait: the wait's
// timer, firing after the cancellation but before the approver has returned, does not
// make the call APPROVAL_TIMEOUT.
func TestApprovalCancelledBeforeItsTimerFires(t *testing.T) {
	var fire func()
	disp := returning(tool.Result{Content: "ok"})
	p := askingWithTimer(disp, &fire)
	e := newExec("rm", `{}`)
	ctx, cancel := context.WithCancel(t.Context())
	e.Approver = approverFunc(func(actx context.Context, _ tool.ApprovalRequest) (tool.ApprovalDecision, error) {
		cancel()
		<-actx.Done()
		fire() // the timer fires as the approver returns
		return tool.ApprovalDecision{}, actx.Err()
	})
	r := p.Run(ctx, e)
	checkShape(t, e, r)
	if r.Code() != tool.CodeAbortedBeforeDispatch || disp.count() != 0 {
		t.Errorf("Run() = %q %q with %d dispatches, want ABORTED_BEFORE_DISPATCH and none", r.Code(), r.Err.Message, disp.count())
	}
}

// TestCancelledCallIsNotAsked: a call whose context ends after its policy asks, before
// the approver is asked, puts no question to the approver (on the batch stream, an
// approval_request the client would see for a call it has cancelled): it ends
// ABORTED_BEFORE_DISPATCH, as a call cancelled before its policy is consulted does.
func TestCancelledCallIsNotAsked(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	asks := pipeline.PreExecuteFunc("asks", func(context.Context, *tool.Exec, pipeline.Tool) pipeline.Verdict {
		cancel() // the batch is cancelled as the policy decides
		return pipeline.Verdict{Decision: pipeline.Ask, Reason: "deletes files"}
	})
	disp := returning(tool.Result{Content: "ok"})
	p := pipeline.New(staticResolver(newTool("rm")), disp, pipeline.WithPreExecute(asks))
	asked := 0
	e := newExec("rm", `{}`)
	e.Approver = approverFunc(func(ctx context.Context, _ tool.ApprovalRequest) (tool.ApprovalDecision, error) {
		asked++
		return tool.ApprovalDecision{}, ctx.Err()
	})
	r := p.Run(ctx, e)
	checkShape(t, e, r)
	if r.Code() != tool.CodeAbortedBeforeDispatch || asked != 0 || disp.count() != 0 {
		t.Errorf("Run() = %+v, asked %d times, dispatched %d; want ABORTED_BEFORE_DISPATCH, never asked, not dispatched", r.Err, asked, disp.count())
	}
}
