package server_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/server"
	"github.com/toolsd/toolsd/internal/session"
)

// sendBatch sends a one-call batch on a new stream and returns the RPC's end.
func sendBatch(t *testing.T, tools toolsdv1.ToolServiceClient, sessionID string) error {
	t.Helper()
	stream, err := tools.ExecuteBatch(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	b := &toolsdv1.Batch{SessionId: sessionID, Calls: []*toolsdv1.ToolCall{{CallId: "c", Name: "t", ArgumentsJson: "{}"}}}
	if err := stream.Send(&toolsdv1.ExecuteBatchRequest{Msg: &toolsdv1.ExecuteBatchRequest_Batch{Batch: b}}); err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := stream.Recv(); err != nil {
			return err
		}
	}
}

// TestBatchPlaceComesBackAfterAPanic: a batch whose handler panics (here: no scheduler)
// ends with Internal through the recovery interceptor and gives its place among
// limits.max_batches back, so the next batch is handled (and panics) rather than
// refused; a stream that has sent no batch holds no place meanwhile.
func TestBatchPlaceComesBackAfterAPanic(t *testing.T) {
	tools, _, ends := serveDeps(t, server.Deps{Sessions: session.NewMemory(),
		Limits: server.Limits{MaxBatches: 1, FirstMessageTimeout: time.Hour}})
	idleCtx, stopIdle := context.WithCancel(t.Context())
	idle, err := tools.ExecuteBatch(idleCtx)
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range []string{"s1", "s2", "s3"} {
		if err := sendBatch(t, tools, id); status.Code(err) != codes.Internal {
			t.Errorf("ExecuteBatch(%s) #%d = %v, want Internal (a recovered panic), not a refusal", id, i+1, err)
		}
		<-ends
	}
	stopIdle()
	_, _ = idle.Recv()
	<-ends
}
