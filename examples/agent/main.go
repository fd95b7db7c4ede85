// Command agent is a minimal agent loop against toolsd: it fetches the prompt's tool
// schemas, sends one step's tool calls as a batch, answers approval requests, prints the
// results in model order, and reads the session back. Run toolsd with `make run` first.
// Against a toolsd that serves TLS (README, Security), -ca names the CA of its
// certificate, -cert and -key a client certificate, -token-file a bearer token.
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

	"github.com/toolsd/toolsd/examples/internal/dialflags"
	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
)

func main() {
	o, err := parseFlags(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		os.Exit(2) // parseFlags printed the error and the usage
	}
	if err := run(context.Background(), o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(1)
	}
}

// options are the agent's flags.
type options struct {
	addr, session, scope string
	approve              bool
	conn                 *dialflags.Flags
}

// parseFlags reads the command line, which holds flags only: parsing stops at the first
// other argument, so one given by mistake (the address without -addr) would otherwise
// be ignored, and every flag after it with it. It prints its errors, with the usage, as
// package flag prints those of the flags.
func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.StringVar(&o.addr, "addr", "127.0.0.1:50151", "toolsd gRPC address")
	fs.StringVar(&o.scope, "scope", "", `scope to run in ("" is global; a tenant's agent runs in its tenant's)`)
	fs.StringVar(&o.session, "session", fmt.Sprintf("agent-%d", time.Now().UnixNano()), "session id")
	fs.BoolVar(&o.approve, "approve", true, "approve calls that policy asks about")
	o.conn = dialflags.Register(fs)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	err := o.conn.Check()
	if fs.NArg() > 0 {
		err = fmt.Errorf("unexpected argument %q: the agent takes only flags (the toolsd address is -addr HOST:PORT)", fs.Arg(0))
	}
	if err != nil {
		fmt.Fprintln(fs.Output(), err)
		fs.Usage()
	}
	return o, err
}

// run runs one step against toolsd, printing to w what it sends and gets.
func run(ctx context.Context, o options, w io.Writer) error {
	addr, session, approve := o.addr, o.session, o.approve
	dial, err := o.conn.DialOptions()
	if err != nil {
		return err
	}
	conn, err := grpc.NewClient(addr, dial...)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	client := toolsdv1.NewToolServiceClient(conn)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()

	schemas, err := client.Schemas(ctx, &toolsdv1.SchemasRequest{Scope: o.scope})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "prompt tools (fingerprint %.12s…):\n", schemas.GetFingerprint())
	for _, t := range schemas.GetTools() {
		fmt.Fprintf(w, "  %-14s %s\n", t.GetName(), t.GetDescription())
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
		SessionId: session, Scope: o.scope, Turn: 1, Step: 1, Calls: calls,
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
			fmt.Fprintf(w, "approval requested for %s %s (%s): approving=%v\n", r.GetTool(), r.GetArgumentsJson(), r.GetReason(), approve)
			// Echoing the request id makes the answer count for this request only.
			if err := stream.Send(&toolsdv1.ExecuteBatchRequest{Msg: &toolsdv1.ExecuteBatchRequest_Approval{Approval: &toolsdv1.ApprovalDecision{
				CallId: r.GetCallId(), RequestId: r.GetRequestId(), Approved: approve, Reason: "decided by examples/agent",
			}}}); err != nil {
				return err
			}
		case *toolsdv1.ExecuteBatchResponse_Result:
			r := msg.Result
			fmt.Fprintf(w, "result %d %s: %s\n", r.GetIndex(), r.GetCallId(), r.GetContent())
		case *toolsdv1.ExecuteBatchResponse_Settled:
			fmt.Fprintf(w, "settled: %d results, concludes_turn=%v, contexts=%q\n",
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
	fmt.Fprintln(w, "session log:")
	for {
		m, err := events.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		ev := m.GetEvent()
		fmt.Fprintf(w, "  #%d %-12s cites %v\n", ev.GetSeq(), ev.GetType(), ev.GetSourceEventSeqs())
	}
}
