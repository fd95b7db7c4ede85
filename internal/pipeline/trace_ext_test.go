package pipeline_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolsd/toolsd/internal/pipeline"
	"github.com/toolsd/toolsd/internal/tool"
)

type stageKey struct{}

// recTracer records every tracer event of one call as a line of text, and tags each
// stage's context so tests can see which context a layer ran with.
type recTracer struct{ events []string }

func (r *recTracer) StartCall(ctx context.Context, e *tool.Exec) (context.Context, pipeline.CallTrace) {
	r.events = append(r.events, "call "+e.Name)
	return context.WithValue(ctx, stageKey{}, "call"), r
}

func (r *recTracer) StartStage(ctx context.Context, s pipeline.Stage) context.Context {
	r.events = append(r.events, fmt.Sprintf("start %s (in %v)", s, ctx.Value(stageKey{})))
	return context.WithValue(ctx, stageKey{}, string(s))
}

func (r *recTracer) EndStage(s pipeline.Stage) { r.events = append(r.events, "end "+string(s)) }

func (r *recTracer) End(t pipeline.Tool, res tool.Result) {
	owner := "<nil>"
	if t != nil {
		owner = t.Owner()
	}
	r.events = append(r.events, fmt.Sprintf("done %s %q", owner, res.Code()))
}

func (r *recTracer) note(s string) { r.events = append(r.events, s) }

func TestStageTracer(t *testing.T) {
	seen := func(r *recTracer, what string) func(ctx context.Context) {
		return func(ctx context.Context) { r.note(fmt.Sprintf("%s sees %v", what, ctx.Value(stageKey{}))) }
	}
	tests := map[string]struct {
		res  func(r *recTracer) *resolver
		disp func(r *recTracer) *dispatcher
		opts func(r *recTracer) []pipeline.Option
		want []string
	}{
		"dispatched call": {
			disp: func(r *recTracer) *dispatcher {
				return &dispatcher{fn: func(ctx context.Context, _ int, _ pipeline.Tool, _ *tool.Exec) tool.Result {
					seen(r, "provider")(ctx)
					return tool.Result{Content: "ok"}
				}}
			},
			opts: func(r *recTracer) []pipeline.Option {
				return []pipeline.Option{
					pipeline.WithPreExecute(pipeline.PreExecuteFunc("pre", func(ctx context.Context, _ *tool.Exec, _ pipeline.Tool) pipeline.Verdict {
						seen(r, "pre-execute")(ctx)
						return pipeline.Verdict{}
					})),
					pipeline.WithPostExecute(pipeline.PostExecuteFunc("post", func(ctx context.Context, _ *tool.Exec, _ pipeline.Tool, _ tool.Result) pipeline.PostVerdict {
						seen(r, "post-execute")(ctx)
						return pipeline.PostVerdict{}
					})),
					pipeline.WithResultObservers(func(*tool.Exec, tool.Result, time.Duration) { r.note("observer") }),
				}
			},
			want: []string{
				"call read",
				"start prepare (in call)", "pre-execute sees prepare", "end prepare",
				"start dispatch (in call)", "provider sees dispatch", "end dispatch",
				"start complete (in call)", "post-execute sees call", "end complete",
				"observer", `done p1 ""`,
			},
		},
		"unknown tool ends in prepare": {
			res: func(*recTracer) *resolver {
				return &resolver{fn: func(int, *tool.Call) (pipeline.Tool, error) { return nil, tool.ErrUnknownTool }}
			},
			want: []string{"call read", "start prepare (in call)", "end prepare", `done <nil> "UNKNOWN_TOOL"`},
		},
		"denied call ends in prepare": {
			opts: func(*recTracer) []pipeline.Option {
				return []pipeline.Option{pipeline.WithPreExecute(verdict(pipeline.Deny, "no"))}
			},
			want: []string{"call read", "start prepare (in call)", "end prepare", `done p1 "DENIED"`},
		},
		"panicking provider still ends dispatch": {
			disp: func(*recTracer) *dispatcher {
				return &dispatcher{fn: func(context.Context, int, pipeline.Tool, *tool.Exec) tool.Result { panic("boom") }}
			},
			want: []string{
				"call read", "start prepare (in call)", "end prepare",
				"start dispatch (in call)", "end dispatch", `done p1 "INTERNAL"`,
			},
		},
		"retry reports the re-resolved tool": {
			res: func(*recTracer) *resolver {
				return &resolver{fn: func(n int, _ *tool.Call) (pipeline.Tool, error) {
					t := newTool("read")
					t.owner = fmt.Sprintf("p%d", n)
					return t, nil
				}}
			},
			disp: func(*recTracer) *dispatcher {
				return &dispatcher{fn: func(_ context.Context, n int, _ pipeline.Tool, _ *tool.Exec) tool.Result {
					if n == 1 {
						return tool.Failure(tool.CodeProviderGone, "gone")
					}
					return tool.Result{Content: "ok"}
				}}
			},
			opts: func(*recTracer) []pipeline.Option {
				return []pipeline.Option{
					pipeline.WithConfig(pipeline.Config{ToolPolicy: func(string, string) pipeline.ToolSettings {
						return pipeline.ToolSettings{Idempotent: true}
					}}),
					pipeline.WithSleep(func(context.Context, time.Duration) error { return nil }),
				}
			},
			want: []string{
				"call read", "start prepare (in call)", "end prepare",
				"start dispatch (in call)", "end dispatch", "start complete (in call)", "end complete",
				`done p2 ""`,
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			rec := &recTracer{}
			res := staticResolver(newTool("read"))
			if tc.res != nil {
				res = tc.res(rec)
			}
			disp := &dispatcher{}
			if tc.disp != nil {
				disp = tc.disp(rec)
			}
			opts := []pipeline.Option{pipeline.WithStageTracer(rec)}
			if tc.opts != nil {
				opts = append(opts, tc.opts(rec)...)
			}
			p := pipeline.New(res, disp, opts...)
			p.Run(t.Context(), newExec("read", `{}`))
			if diff := cmp.Diff(tc.want, rec.events); diff != "" {
				t.Errorf("tracer events (-want +got):\n%s", diff)
			}
		})
	}
}

// nilTracer declines to trace: the call runs as without a tracer.
type nilTracer struct{ calls int }

func (n *nilTracer) StartCall(ctx context.Context, _ *tool.Exec) (context.Context, pipeline.CallTrace) {
	n.calls++
	return ctx, nil
}

func TestStageTracerDeclines(t *testing.T) {
	tr := &nilTracer{}
	p := pipeline.New(staticResolver(newTool("read")), &dispatcher{}, pipeline.WithStageTracer(tr))
	if r := p.Run(t.Context(), newExec("read", `{}`)); r.IsError || tr.calls != 1 {
		t.Errorf("Run() = %+v with %d StartCalls, want a success and 1", r, tr.calls)
	}
}

// TestResultFits: a final result that does not fit where it is recorded becomes
// RESULT_TOO_LARGE, keeping what it asked of the turn, before the result observers and
// the stage tracer see it: they see what the log and the client get. One that fits is
// left alone.
func TestResultFits(t *testing.T) {
	tr := newTool("echo")
	big := tool.Result{Content: "big", ConcludesTurn: true, AdditionalContexts: []string{"note"}}
	for name, fits := range map[string]bool{"fits": true, "too large": false} {
		t.Run(name, func(t *testing.T) {
			rec := &recTracer{}
			var observed tool.Result
			var checked tool.Result
			p := pipeline.New(staticResolver(tr), returning(big),
				pipeline.WithStageTracer(rec),
				pipeline.WithResultObservers(func(_ *tool.Exec, r tool.Result, _ time.Duration) { observed = r }),
				pipeline.WithResultFits(func(_ *tool.Exec, r *tool.Result) bool { checked = *r; return fits }))
			e := newExec("echo", `{}`)
			got := p.Run(t.Context(), e)
			if diff := cmp.Diff(big, checked); diff != "" {
				t.Errorf("checked result (-want +got):\n%s", diff)
			}
			want := big
			if !fits {
				want = tool.Failure(tool.CodeResultTooLarge, "the tool's result (3 bytes) is over the session log's limit for one event")
				want.Err.Tool = "echo"
				want.ConcludesTurn, want.AdditionalContexts = true, []string{"note"}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Run() (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(want, observed); diff != "" {
				t.Errorf("observed result (-want +got):\n%s", diff)
			}
			if last := rec.events[len(rec.events)-1]; last != fmt.Sprintf("done %s %q", tr.Owner(), want.Code()) {
				t.Errorf("tracer's last event = %q, want the call done with %q", last, want.Code())
			}
		})
	}
}
