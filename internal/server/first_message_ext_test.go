package server_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/server"
)

// TestBatchStreamWithoutItsBatchTimesOut: an ExecuteBatch stream opened with no batch
// held its handler (and a stream slot) until drain or the client's deadline. It now ends
// once limits.first_message_timeout passes, with DeadlineExceeded and reason
// FIRST_MESSAGE_TIMEOUT, its handler returns, and the RPC is counted with that code.
func TestBatchStreamWithoutItsBatchTimesOut(t *testing.T) {
	tools, reg, ends := serveDeps(t, server.Deps{Limits: server.Limits{FirstMessageTimeout: time.Millisecond}})
	// A safety net only: a stream the server never ends fails on its missing reason.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	stream, err := tools.ExecuteBatch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); status.Code(err) != codes.DeadlineExceeded || reason(err) != "FIRST_MESSAGE_TIMEOUT" {
		t.Errorf("ExecuteBatch().Recv() with no batch sent = %v, want DeadlineExceeded with reason FIRST_MESSAGE_TIMEOUT", err)
	}
	<-ends // the handler returned
	if got := rpcCount(t, reg, "ExecuteBatch", "DeadlineExceeded"); got != 1 {
		t.Errorf("grpc_server_handled_total{grpc_method=ExecuteBatch,grpc_code=DeadlineExceeded} = %v, want 1", got)
	}
}

// TestBatchStreamWithItsBatchInTime: a batch that comes within the limit is read and
// judged on its own (here refused for having no calls), not timed out.
func TestBatchStreamWithItsBatchInTime(t *testing.T) {
	tools, _, ends := serveDeps(t, server.Deps{Limits: server.Limits{FirstMessageTimeout: time.Minute}})
	stream, err := tools.ExecuteBatch(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&toolsdv1.ExecuteBatchRequest{Msg: &toolsdv1.ExecuteBatchRequest_Batch{Batch: &toolsdv1.Batch{SessionId: "s"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); status.Code(err) != codes.InvalidArgument || reason(err) != "BAD_REQUEST" {
		t.Errorf("ExecuteBatch().Recv() after a batch of no calls = %v, want InvalidArgument with reason BAD_REQUEST", err)
	}
	<-ends
}
