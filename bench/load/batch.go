package load

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
)

// NoopTool is the tool every target serves: it takes {"data": string} and returns "ok".
const NoopTool = "noop"

// ErrBadResponse reports a batch stream that broke the ExecuteBatch contract or carried
// a result other than the no-op tool's "ok" (the no-op tool never fails, so an error
// or another answer means the target measured something else).
var ErrBadResponse = errors.New("load: bad ExecuteBatch response")

// BatchDialer returns a [Dialer] of ExecuteBatch agents for the ToolService at addr.
// Each agent has its own connection and its own session, named session+"-"+i.
func BatchDialer(addr, session string) Dialer {
	return func(ctx context.Context, i int, w Workload) (Agent, error) {
		return DialBatch(ctx, addr, session+"-"+strconv.Itoa(i), w)
	}
}

// batchAgent is one agent loop speaking toolsd's ExecuteBatch: one stream per batch,
// reading results until settled.
type batchAgent struct {
	conn   *grpc.ClientConn
	client toolsdv1.ToolServiceClient
	req    *toolsdv1.ExecuteBatchRequest
	batch  *toolsdv1.Batch
}

// DialBatch connects one ExecuteBatch agent. Its batches hold w.BatchSize calls to
// [NoopTool] with w.ArgBytes of arguments each, in session; the step advances per batch.
func DialBatch(ctx context.Context, addr, session string, w Workload) (Agent, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("load: dial %s: %w", addr, err)
	}
	args := Arguments(w.ArgBytes)
	calls := make([]*toolsdv1.ToolCall, w.BatchSize)
	for i := range calls {
		calls[i] = &toolsdv1.ToolCall{CallId: "call-" + strconv.Itoa(i), Name: NoopTool, ArgumentsJson: args}
	}
	batch := &toolsdv1.Batch{SessionId: session, Turn: 1, Calls: calls}
	a := &batchAgent{
		conn:   conn,
		client: toolsdv1.NewToolServiceClient(conn),
		req:    &toolsdv1.ExecuteBatchRequest{Msg: &toolsdv1.ExecuteBatchRequest_Batch{Batch: batch}},
		batch:  batch,
	}
	conn.Connect()
	return a, nil
}

// Do sends one batch and reads until settled, checking model order and result count.
func (a *batchAgent) Do(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	a.batch.Step++
	stream, err := a.client.ExecuteBatch(ctx)
	if err != nil {
		return fmt.Errorf("load: open ExecuteBatch: %w", err)
	}
	if err := stream.Send(a.req); err != nil {
		return fmt.Errorf("load: send batch: %w", err)
	}
	results := 0
	for {
		resp, err := stream.Recv()
		if err != nil {
			return fmt.Errorf("load: recv after %d results: %w", results, err)
		}
		switch m := resp.Msg.(type) {
		case *toolsdv1.ExecuteBatchResponse_Result:
			if err := checkResult(m.Result, a.batch.Calls, results); err != nil {
				return err
			}
			results++
		case *toolsdv1.ExecuteBatchResponse_Settled:
			if int(m.Settled.GetResults()) != len(a.batch.Calls) || results != len(a.batch.Calls) {
				return fmt.Errorf("%w: settled after %d results (reported %d), want %d",
					ErrBadResponse, results, m.Settled.GetResults(), len(a.batch.Calls))
			}
			return drain(stream)
		case *toolsdv1.ExecuteBatchResponse_ApprovalRequest:
			return fmt.Errorf("%w: approval requested for %s: the benchmark expects no policy", ErrBadResponse, m.ApprovalRequest.GetTool())
		}
	}
}

// checkResult checks that r is the no-op tool's "ok" for calls[want], the next call in
// model order.
func checkResult(r *toolsdv1.ToolResult, calls []*toolsdv1.ToolCall, want int) error {
	if int(r.GetIndex()) != want || want >= len(calls) {
		return fmt.Errorf("%w: result index %d, want %d (model order)", ErrBadResponse, r.GetIndex(), want)
	}
	if r.GetIsError() {
		return fmt.Errorf("%w: error result %s: %s", ErrBadResponse, r.GetError().GetCode(), r.GetContent())
	}
	if id := calls[want].GetCallId(); r.GetCallId() != id || r.GetContent() != "ok" {
		return fmt.Errorf("%w: result %q for call %q, want \"ok\" for %q", ErrBadResponse, r.GetContent(), r.GetCallId(), id)
	}
	return nil
}

// drain reads the end of the stream after settled, so the RPC finishes cleanly.
func drain(stream grpc.BidiStreamingClient[toolsdv1.ExecuteBatchRequest, toolsdv1.ExecuteBatchResponse]) error {
	if err := stream.CloseSend(); err != nil {
		return fmt.Errorf("load: close send: %w", err)
	}
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: message or error after settled: %w", ErrBadResponse, err)
	}
	return nil
}

// Close closes the connection.
func (a *batchAgent) Close() error { return a.conn.Close() }
