// Command agent is a minimal agent loop against toolsd: it fetches the prompt's tool
// schemas, sends one step's tool calls as a batch, answers approval requests, prints the
// results in model order, and reads the session back. Run toolsd with `make run` first.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:50151", "toolsd gRPC address")
	session := flag.String("session", fmt.Sprintf("agent-%d", time.Now().UnixNano()), "session id")
	approve := flag.Bool("approve", true, "approve calls that policy asks about")
	flag.Parse()
	if err := run(*addr, *session, *approve); err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(1)
	}
}

func run(addr, session string, approve bool) error {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	client := toolsdv1.NewToolServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	schemas, err := client.Schemas(ctx, &toolsdv1.SchemasRequest{})
	if err != nil {
		return err
	}
	fmt.Printf("prompt tools (fingerprint %.12s…):\n", schemas.GetFingerprint())
	for _, t := range schemas.GetTools() {
		fmt.Printf("  %-14s %s\n", t.GetName(), t.GetDescription())
	}

	// What a model might emit for one step.
	calls := []*toolsdv1.ToolCall{
		{CallId: "call_1", Name: "add", ArgumentsJson: `{"a": 2, "b": 40}`},
		{CallId: "call_2", Name: "echo", ArgumentsJson: `{"text": "hello from the agent"}`},
		{CallId: "call_3", Name: "write_note", ArgumentsJson: `{"text": "the answer is 42"}`},
	}
	stream, err := client.ExecuteBatch(ctx)
	if err != nil {
		return err
	}
	if err := stream.Send(&toolsdv1.ExecuteBatchRequest{Msg: &toolsdv1.ExecuteBatchRequest_Batch{Batch: &toolsdv1.Batch{
		SessionId: session, Turn: 1, Step: 1, Calls: calls,
	}}}); err != nil {
		return err
	}
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		switch msg := m.GetMsg().(type) {
		case *toolsdv1.ExecuteBatchResponse_ApprovalRequest:
			r := msg.ApprovalRequest
			fmt.Printf("approval requested for %s %s (%s): approving=%v\n", r.GetTool(), r.GetArgumentsJson(), r.GetReason(), approve)
			// Echoing the request id makes the answer count for this request only.
			if err := stream.Send(&toolsdv1.ExecuteBatchRequest{Msg: &toolsdv1.ExecuteBatchRequest_Approval{Approval: &toolsdv1.ApprovalDecision{
				CallId: r.GetCallId(), RequestId: r.GetRequestId(), Approved: approve, Reason: "decided by examples/agent",
			}}}); err != nil {
				return err
			}
		case *toolsdv1.ExecuteBatchResponse_Result:
			r := msg.Result
			fmt.Printf("result %d %s: %s\n", r.GetIndex(), r.GetCallId(), r.GetContent())
		case *toolsdv1.ExecuteBatchResponse_Settled:
			fmt.Printf("settled: %d results, concludes_turn=%v, contexts=%q\n",
				msg.Settled.GetResults(), msg.Settled.GetConcludesTurn(), msg.Settled.GetAdditionalContexts())
			if err := stream.CloseSend(); err != nil {
				return err
			}
		}
	}

	events, err := client.ReadSession(ctx, &toolsdv1.ReadSessionRequest{SessionId: session})
	if err != nil {
		return err
	}
	fmt.Println("session log:")
	for {
		m, err := events.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		ev := m.GetEvent()
		fmt.Printf("  #%d %-12s cites %v\n", ev.GetSeq(), ev.GetType(), ev.GetSourceEventSeqs())
	}
}
