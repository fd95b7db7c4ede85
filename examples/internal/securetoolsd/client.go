package securetoolsd

import (
	"context"
	"errors"
	"io"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
)

// WaitForTool waits, for up to 30 s, until [Scope]'s schemas name tool: it
// looks again each time WatchSchemas says the visible set changed.
func WaitForTool(t *testing.T, conn *grpc.ClientConn, tool string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	client := toolsdv1.NewToolServiceClient(conn)
	watch, err := client.WatchSchemas(ctx, &toolsdv1.WatchSchemasRequest{Scope: Scope})
	if err != nil {
		t.Fatalf("WatchSchemas() = %v", err)
	}
	var names []string
	for {
		if _, err := watch.Recv(); err != nil {
			t.Fatalf("WatchSchemas().Recv() = %v; Schemas() named %q, want %q among them", err, names, tool)
		}
		resp, err := client.Schemas(ctx, &toolsdv1.SchemasRequest{Scope: Scope})
		if err != nil {
			t.Fatalf("Schemas() = %v", err)
		}
		names = names[:0]
		for _, s := range resp.GetTools() {
			names = append(names, s.GetName())
		}
		if slices.Contains(names, tool) {
			return
		}
	}
}

// Execute runs one batch of calls in session, in [Scope], and returns its results in model order.
func Execute(t *testing.T, conn *grpc.ClientConn, session string, calls ...*toolsdv1.ToolCall) []*toolsdv1.ToolResult {
	t.Helper()
	stream, err := toolsdv1.NewToolServiceClient(conn).ExecuteBatch(t.Context())
	if err != nil {
		t.Fatalf("ExecuteBatch() = %v", err)
	}
	if err := stream.Send(&toolsdv1.ExecuteBatchRequest{Msg: &toolsdv1.ExecuteBatchRequest_Batch{Batch: &toolsdv1.Batch{
		SessionId: session, Scope: Scope, Turn: 1, Step: 1, Calls: calls,
	}}}); err != nil {
		t.Fatalf("ExecuteBatch().Send() = %v", err)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatalf("ExecuteBatch().CloseSend() = %v", err)
	}
	var results []*toolsdv1.ToolResult
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return results
		}
		if err != nil {
			t.Fatalf("ExecuteBatch().Recv() = %v", err)
		}
		if r := m.GetResult(); r != nil {
			results = append(results, r)
		}
	}
}
