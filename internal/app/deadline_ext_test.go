package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/app"
)

// TestClientEndIsTheRPCsCode: a batch whose client's deadline passes while a call runs
// ends DEADLINE_EXCEEDED in toolsd's own record of the RPC (its log line and
// grpc_server_handled_total), as README's status table says of the client's deadline;
// it read CANCELED (the client's reset often comes before toolsd's timer for the
// deadline), or OK when the batch settled as the deadline came. A client that cancels
// the RPC, with a deadline far off or none, still reads CANCELED. Either way the calls
// are in the session log as a cancel leaves them: the running one ABORTED, the
// unstarted one ABORTED_BEFORE_DISPATCH.
func TestClientEndIsTheRPCsCode(t *testing.T) {
	tests := map[string]struct {
		timeout time.Duration // 0: no deadline
		cancel  bool          // cancel the RPC once the first call runs
		want    codes.Code
	}{
		"deadline passes":      {timeout: time.Second, want: codes.DeadlineExceeded},
		"cancelled":            {timeout: time.Hour, cancel: true, want: codes.Canceled},
		"cancelled, unbounded": {cancel: true, want: codes.Canceled},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			core, logs := observer.New(zap.DebugLevel)
			e := start(t, "", app.WithLogger(zap.New(core)))
			started, stopped := make(chan string, 2), make(chan string, 2)
			runProvider(t, e.app.Addr(), blockTool("block", started, stopped))
			ctx, cancel := context.WithCancel(t.Context())
			if tc.timeout > 0 {
				ctx, cancel = context.WithTimeout(t.Context(), tc.timeout)
			}
			defer cancel()
			stream, err := e.tools.ExecuteBatch(ctx)
			if err != nil {
				t.Fatal(err)
			}
			const id = "s-client-end"
			if err := stream.Send(batchReq(&toolsdv1.Batch{SessionId: id, MaxParallel: 1, Calls: []*toolsdv1.ToolCall{
				call("c0", "block", `{"label":"first"}`), call("c1", "block", `{"label":"second"}`),
			}})); err != nil {
				t.Fatal(err)
			}
			wantLogged := []string{"ABORTED", "ABORTED_BEFORE_DISPATCH"}
			select {
			case <-started:
			case <-ctx.Done(): // a machine too slow to start the call in a second
				wantLogged = []string{"ABORTED_BEFORE_DISPATCH", "ABORTED_BEFORE_DISPATCH"}
			}
			if tc.cancel {
				cancel()
			}
			for err == nil {
				_, err = stream.Recv()
			}
			if status.Code(err) != tc.want {
				t.Fatalf("ExecuteBatch() = %v, want %v", err, tc.want)
			}
			if code := loggedField(t, logs, "finished call", "grpc.method", "ExecuteBatch", "grpc.code"); code != tc.want.String() {
				t.Errorf("logged grpc.code = %v, want %v", code, tc.want)
			}
			waitFor(t, "the RPC counted", func() bool {
				return rpcCount(t, e.app, "grpc_server_handled_total", "grpc_method", "ExecuteBatch") == 1
			})
			if n := rpcCount(t, e.app, "grpc_server_handled_total", "grpc_method", "ExecuteBatch", "grpc_code", tc.want.String()); n != 1 {
				t.Errorf("grpc_server_handled_total{grpc_method=ExecuteBatch,grpc_code=%v} = %d, want 1", tc.want, n)
			}
			waitFor(t, "the log to complete", func() bool { return len(e.readSession(t, id)) == 4 })
			var got []string
			for _, ev := range e.readSession(t, id) {
				if r := ev.GetToolResult(); r != nil {
					got = append(got, r.GetError().GetCode())
				}
			}
			if diff := cmp.Diff(wantLogged, got); diff != "" {
				t.Errorf("logged codes (-want +got):\n%s", diff)
			}
		})
	}
}

// TestClientEndBeforeTheBatch: a batch stream whose client's deadline passes before it
// sends its batch is DEADLINE_EXCEEDED in toolsd's log line and metrics too (gRPC's Recv
// answers Canceled for any stream its client resets), and one its client cancels
// before that CANCELED.
func TestClientEndBeforeTheBatch(t *testing.T) {
	tests := map[string]struct {
		timeout time.Duration
		cancel  bool // cancel once the handler runs
		want    codes.Code
	}{
		"deadline passes": {timeout: 500 * time.Millisecond, want: codes.DeadlineExceeded},
		"cancelled":       {timeout: time.Hour, cancel: true, want: codes.Canceled},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			core, logs := observer.New(zap.DebugLevel)
			e := start(t, "", app.WithLogger(zap.New(core)))
			ctx, cancel := context.WithTimeout(t.Context(), tc.timeout)
			defer cancel()
			stream, err := e.tools.ExecuteBatch(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if tc.cancel {
				waitFor(t, "the handler to start", func() bool { return startedRPCs(t, e.app, "ExecuteBatch") == 1 })
				cancel()
			}
			if _, err := stream.Recv(); status.Code(err) != tc.want {
				t.Fatalf("ExecuteBatch().Recv() = %v, want %v", err, tc.want)
			}
			if code := loggedField(t, logs, "finished call", "grpc.method", "ExecuteBatch", "grpc.code"); code != tc.want.String() {
				t.Errorf("logged grpc.code = %v, want %v", code, tc.want)
			}
		})
	}
}
