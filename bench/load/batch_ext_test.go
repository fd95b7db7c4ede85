package load_test

import (
	"errors"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/toolsd/toolsd/bench/load"
	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
)

// answerServer answers every batch with answer(call) for each call, then settled.
type answerServer struct {
	toolsdv1.UnimplementedToolServiceServer
	answer func(*toolsdv1.ToolCall) *toolsdv1.ToolResult
}

func (s answerServer) ExecuteBatch(stream toolsdv1.ToolService_ExecuteBatchServer) error {
	req, err := stream.Recv()
	if err != nil {
		return err
	}
	for i, c := range req.GetBatch().GetCalls() {
		r := s.answer(c)
		r.Index = uint32(i)
		if err := stream.Send(&toolsdv1.ExecuteBatchResponse{Msg: &toolsdv1.ExecuteBatchResponse_Result{Result: r}}); err != nil {
			return err
		}
	}
	return stream.Send(&toolsdv1.ExecuteBatchResponse{Msg: &toolsdv1.ExecuteBatchResponse_Settled{
		Settled: &toolsdv1.BatchSettled{Results: uint32(len(req.GetBatch().GetCalls()))},
	}})
}

func serveAnswers(t *testing.T, answer func(*toolsdv1.ToolCall) *toolsdv1.ToolResult) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	toolsdv1.RegisterToolServiceServer(g, answerServer{answer: answer})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = g.Serve(lis)
	}()
	t.Cleanup(func() {
		g.Stop()
		<-done
	})
	return lis.Addr().String()
}

// TestBatchAgentChecksResults: a result that is not the no-op tool's "ok" for the call
// sent fails the batch, as a wrong MCP result does, even without is_error: a target
// that answers something else measured something else.
func TestBatchAgentChecksResults(t *testing.T) {
	tests := map[string]struct {
		answer  func(*toolsdv1.ToolCall) *toolsdv1.ToolResult
		wantErr error
	}{
		"ok": {answer: func(c *toolsdv1.ToolCall) *toolsdv1.ToolResult {
			return &toolsdv1.ToolResult{CallId: c.GetCallId(), Content: "ok"}
		}},
		"empty content": {answer: func(c *toolsdv1.ToolCall) *toolsdv1.ToolResult {
			return &toolsdv1.ToolResult{CallId: c.GetCallId()}
		}, wantErr: load.ErrBadResponse},
		"other content": {answer: func(c *toolsdv1.ToolCall) *toolsdv1.ToolResult {
			return &toolsdv1.ToolResult{CallId: c.GetCallId(), Content: "unknown tool"}
		}, wantErr: load.ErrBadResponse},
		"other call": {answer: func(*toolsdv1.ToolCall) *toolsdv1.ToolResult {
			return &toolsdv1.ToolResult{CallId: "call-0", Content: "ok"}
		}, wantErr: load.ErrBadResponse},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			addr := serveAnswers(t, tc.answer)
			w := load.Workload{Name: name, Agents: 1, BatchSize: 2, ArgBytes: 20, Duration: time.Second}
			a, err := load.DialBatch(t.Context(), addr, "s", w)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = a.Close() }()
			if err := a.Do(t.Context()); !errors.Is(err, tc.wantErr) {
				t.Errorf("Do() = %v, want %v", err, tc.wantErr)
			}
		})
	}
}
