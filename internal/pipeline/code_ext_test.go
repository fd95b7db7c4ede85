package pipeline_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolsd/toolsd/internal/pipeline"
	"github.com/toolsd/toolsd/internal/tool"
)

// TestVerdictCodes covers the codes and user reasons a participant may put on a Deny or
// a Block (a remote policy that cannot be consulted reports POLICY_UNAVAILABLE).
func TestVerdictCodes(t *testing.T) {
	tests := map[string]struct {
		pre  pipeline.Verdict
		post pipeline.PostVerdict
		want tool.Error
	}{
		"deny without code is DENIED": {
			pre:  pipeline.Verdict{Decision: pipeline.Deny, Reason: "no"},
			want: tool.Error{Code: tool.CodeDenied, Message: "no", Tool: "echo"},
		},
		"deny with code keeps it": {
			pre:  pipeline.Verdict{Decision: pipeline.Deny, Reason: "hook down", UserReason: "hook x", Code: tool.CodePolicyUnavailable},
			want: tool.Error{Code: tool.CodePolicyUnavailable, Message: "hook down", Reason: "hook x", Tool: "echo"},
		},
		"block without code is BLOCKED": {
			post: pipeline.PostVerdict{Action: pipeline.Block, Reason: "no"},
			want: tool.Error{Code: tool.CodeBlocked, Message: "no", Tool: "echo"},
		},
		"block with code and user reason": {
			post: pipeline.PostVerdict{Action: pipeline.Block, UserReason: "hook x: secret", Code: tool.CodePolicyUnavailable},
			want: tool.Error{Code: tool.CodePolicyUnavailable, Message: "result blocked by policy", Reason: "hook x: secret", Tool: "echo"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := pipeline.New(staticResolver(newTool("echo")), returning(tool.Result{Content: "ok"}),
				pipeline.WithPreExecute(pipeline.PreExecuteFunc("pre", func(context.Context, *tool.Exec, pipeline.Tool) pipeline.Verdict {
					return tc.pre
				})),
				pipeline.WithPostExecute(pipeline.PostExecuteFunc("post", func(context.Context, *tool.Exec, pipeline.Tool, tool.Result) pipeline.PostVerdict {
					return tc.post
				})))
			e := newExec("echo", `{}`)
			r := p.Run(t.Context(), e)
			checkShape(t, e, r)
			if r.Err == nil {
				t.Fatalf("Run() = %+v, want an error result", r)
			}
			if diff := cmp.Diff(tc.want, *r.Err); diff != "" {
				t.Errorf("Run() error (-want +got):\n%s", diff)
			}
			if want := tool.ErrorContentPrefix + tc.want.Message; r.Content != want {
				t.Errorf("Run() content = %q, want %q", r.Content, want)
			}
		})
	}
}
