package app_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
)

// TestProviderCancelSaysWhy: the cancel a provider gets for a running call says why the
// call ended, in words a provider's author can act on: the agent's deadline passed, the
// agent cancelled (its RPC, or with a cancel message), or the tool's own timeout fired.
// A batch ended by its stream said "context canceled" whatever ended it, the agent's
// deadline too (its client resets the stream at the deadline, often before toolsd's
// timer for it fires).
func TestProviderCancelSaysWhy(t *testing.T) {
	tests := map[string]struct {
		timeout     time.Duration // the agent's deadline, 0 for none
		toolTimeout time.Duration // the tool's timeout, 0 for the default
		end         func(cancel context.CancelFunc, stream toolsdv1.ToolService_ExecuteBatchClient) error
		want        string
	}{
		"the agent's deadline passes": {
			timeout: time.Second,
			want:    "server: the agent's deadline for the batch passed",
		},
		"the agent cancels the RPC": {
			end: func(cancel context.CancelFunc, _ toolsdv1.ToolService_ExecuteBatchClient) error {
				cancel()
				return nil
			},
			want: "server: the agent cancelled the batch's RPC or went away",
		},
		"the agent sends cancel": {
			end: func(_ context.CancelFunc, stream toolsdv1.ToolService_ExecuteBatchClient) error {
				return stream.Send(&toolsdv1.ExecuteBatchRequest{Msg: &toolsdv1.ExecuteBatchRequest_Cancel{Cancel: &toolsdv1.CancelBatch{Reason: "user pressed stop"}}})
			},
			want: "server: the agent cancelled the batch",
		},
		"the tool's timeout fires": {
			timeout:     time.Hour,
			toolTimeout: 300 * time.Millisecond,
			want:        "tool timed out: context deadline exceeded",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := start(t, "limits: {accepted_hold: 0s}\n")
			p := helloHand(t, e.conn, "raw")
			def := &toolsdv1.ToolDefinition{Name: "raw", Description: "raw tool", ParametersJson: `{"type":"object"}`}
			if tc.toolTimeout > 0 {
				def.Timeout = durationpb.New(tc.toolTimeout)
			}
			p.send(t, &toolsdv1.ProviderServiceConnectRequest{Msg: &toolsdv1.ProviderServiceConnectRequest_Register{Register: &toolsdv1.RegisterTools{Ref: 1, Tools: []*toolsdv1.ToolDefinition{def}}}})
			if st := p.recv(t).GetRegisterResult().GetTools(); len(st) != 1 || st[0].GetErrorCode() != "" {
				t.Fatalf("register result = %v, want raw registered", st)
			}
			ctx, cancel := context.WithCancel(t.Context())
			if tc.timeout > 0 {
				ctx, cancel = context.WithTimeout(t.Context(), tc.timeout)
			}
			defer cancel()
			stream, err := e.tools.ExecuteBatch(ctx)
			if err != nil {
				t.Fatal(err)
			}
			session := "s-cancel-reason-" + strings.ReplaceAll(name, " ", "-")
			if err := stream.Send(batchReq(&toolsdv1.Batch{SessionId: session, Calls: []*toolsdv1.ToolCall{call("c", "raw", `{}`)}})); err != nil {
				t.Fatal(err)
			}
			ex := p.recv(t).GetExecute()
			if ex == nil {
				t.Fatal("provider got no execute")
			}
			if tc.end != nil {
				if err := tc.end(cancel, stream); err != nil {
					t.Fatalf("ending the batch: %v", err)
				}
			}
			c := p.recv(t).GetCancel()
			if c.GetRequestId() != ex.GetRequestId() || c.GetReason() != tc.want {
				t.Errorf("provider's cancel = %v, want request %d cancelled with reason %q", c, ex.GetRequestId(), tc.want)
			}
			p.send(t, result(&toolsdv1.ExecuteResult{RequestId: ex.GetRequestId(), Cancelled: true}))
			for err == nil {
				_, err = stream.Recv()
			}
			waitFor(t, "the log to complete", func() bool { return len(e.readSession(t, session)) == 2 })
		})
	}
}
