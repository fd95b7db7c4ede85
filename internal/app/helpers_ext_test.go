package app_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/app"
	"github.com/toolsd/toolsd/internal/config"
	"github.com/toolsd/toolsd/pkg/provider"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// baseConfig is a loopback, in-memory toolsd with ephemeral ports.
const baseConfig = `
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
session: {store: memory}
`

// env is one running toolsd and a client connection to it.
type env struct {
	app   *app.App
	conn  *grpc.ClientConn
	tools toolsdv1.ToolServiceClient
}

// start runs toolsd from baseConfig followed by extra YAML, which must not repeat
// baseConfig's keys (listen, admin_listen, session): build a config for those.
func start(tb testing.TB, extra string, opts ...app.Option) *env {
	tb.Helper()
	cfg, err := config.Parse([]byte(baseConfig+extra), "test.yaml")
	if err != nil {
		tb.Fatalf("config.Parse() = %v", err)
	}
	return startConfig(tb, cfg, opts...)
}

// as is a client of e's toolsd that authenticates with the bearer token.
func (e *env) as(tb testing.TB, token string) *env {
	conn := dialWith(tb, e.app.Addr(), grpc.WithPerRPCCredentials(bearer(token)))
	return &env{app: e.app, conn: conn, tools: toolsdv1.NewToolServiceClient(conn)}
}

func startConfig(tb testing.TB, cfg *config.Config, opts ...app.Option) *env {
	tb.Helper()
	a, stop, runErr := runApp(tb, cfg, opts...)
	conn := dial(tb, a.Addr())
	tb.Cleanup(func() {
		stop()
		if err := <-runErr; err != nil {
			tb.Errorf("App.Run() = %v", err)
		}
	})
	return &env{app: a, conn: conn, tools: toolsdv1.NewToolServiceClient(conn)}
}

// runApp builds an app from cfg (logging to the test) and runs it; stop is what SIGTERM
// does, and runErr receives Run's result. The app is stopped, and its end awaited, when
// the test ends.
func runApp(tb testing.TB, cfg *config.Config, opts ...app.Option) (a *app.App, stop context.CancelFunc, runErr <-chan error) {
	tb.Helper()
	a, err := app.New(cfg, append([]app.Option{app.WithLogger(zaptest.NewLogger(tb))}, opts...)...)
	if err != nil {
		tb.Fatalf("app.New() = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	result, ended := make(chan error, 1), make(chan struct{})
	go func() {
		result <- a.Run(ctx)
		close(ended)
	}()
	tb.Cleanup(func() {
		cancel()
		<-ended
	})
	return a, cancel, result
}

// awaitRun waits for App.Run to return on runErr, as [runApp] gave it, and fails the
// test unless it returned nil. The wait is bounded only so that a hang fails the test
// rather than its binary: it says nothing of how soon Run should return.
func awaitRun(tb testing.TB, runErr <-chan error) {
	tb.Helper()
	select {
	case err := <-runErr:
		if err != nil {
			tb.Errorf("App.Run() = %v, want nil", err)
		}
	case <-time.After(20 * time.Second):
		tb.Fatal("App.Run() did not return within 20s")
	}
}

func dial(tb testing.TB, addr string) *grpc.ClientConn {
	tb.Helper()
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		tb.Fatalf("grpc.NewClient(%s) = %v", addr, err)
	}
	tb.Cleanup(func() { _ = conn.Close() })
	return conn
}

// runProvider connects an SDK provider with tools and waits until they are registered.
// The returned stop ends the provider and waits for it.
func runProvider(tb testing.TB, addr string, tools ...provider.Tool) (p *provider.Provider, stop func()) {
	tb.Helper()
	p = provider.New("test", provider.WithBackoff(10*time.Millisecond, 50*time.Millisecond))
	p.Add(tools...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = p.Run(ctx, addr)
	}()
	stop = func() { cancel(); <-done }
	tb.Cleanup(stop)
	select {
	case <-p.Ready():
	case <-time.After(10 * time.Second):
		tb.Fatal("provider did not register within 10s")
	}
	return p, stop
}

// outcome is everything one ExecuteBatch stream returned.
type outcome struct {
	accepted  *toolsdv1.BatchAccepted
	results   []*toolsdv1.ToolResult
	approvals []*toolsdv1.ApprovalRequest
	progress  []*toolsdv1.ToolProgress
	settled   *toolsdv1.BatchSettled
	// order is the kind of each message in arrival order ("accepted", "result", ...).
	order []string
}

// batchOptions steer a client's side of the stream.
type batchOptions struct {
	// approve answers approval requests; nil half-closes right after the batch.
	approve func(*toolsdv1.ApprovalRequest) *toolsdv1.ApprovalDecision
	// onResult may act after each result (e.g. cancel); it sees the stream.
	onResult func(toolsdv1.ToolService_ExecuteBatchClient, *toolsdv1.ToolResult)
	// onAccepted may act once the plan is durable.
	onAccepted func(toolsdv1.ToolService_ExecuteBatchClient)
	// callOpts are the stream's call options (e.g. a larger receive limit).
	callOpts []grpc.CallOption
	// metadata, if set, is sent with the stream (e.g. a traceparent).
	metadata metadata.MD
}

// execute runs a batch to its end and returns what the stream carried.
func (e *env) execute(tb testing.TB, b *toolsdv1.Batch, o batchOptions) (*outcome, error) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if o.metadata != nil {
		ctx = metadata.NewOutgoingContext(ctx, o.metadata)
	}
	stream, err := e.tools.ExecuteBatch(ctx, o.callOpts...)
	if err != nil {
		return nil, err
	}
	// A Send that loses the race with the server refusing the stream returns io.EOF;
	// the refusal's status then comes from Recv below.
	if err := stream.Send(&toolsdv1.ExecuteBatchRequest{Msg: &toolsdv1.ExecuteBatchRequest_Batch{Batch: b}}); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if o.approve == nil && o.onResult == nil && o.onAccepted == nil {
		if err := stream.CloseSend(); err != nil {
			return nil, err
		}
	}
	out := &outcome{}
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out.order = append(out.order, messageKind(m))
		switch msg := m.GetMsg().(type) {
		case *toolsdv1.ExecuteBatchResponse_Accepted:
			out.accepted = msg.Accepted
			if o.onAccepted != nil {
				o.onAccepted(stream)
			}
		case *toolsdv1.ExecuteBatchResponse_Result:
			out.results = append(out.results, msg.Result)
			if o.onResult != nil {
				o.onResult(stream, msg.Result)
			}
		case *toolsdv1.ExecuteBatchResponse_ApprovalRequest:
			out.approvals = append(out.approvals, msg.ApprovalRequest)
			if o.approve == nil {
				continue
			}
			if d := o.approve(msg.ApprovalRequest); d != nil {
				if err := stream.Send(&toolsdv1.ExecuteBatchRequest{Msg: &toolsdv1.ExecuteBatchRequest_Approval{Approval: d}}); err != nil {
					return out, err
				}
			}
		case *toolsdv1.ExecuteBatchResponse_Progress:
			out.progress = append(out.progress, msg.Progress)
		case *toolsdv1.ExecuteBatchResponse_Settled:
			out.settled = msg.Settled
		}
	}
}

// messageKind names a response message's kind, as recorded in outcome.order.
func messageKind(m *toolsdv1.ExecuteBatchResponse) string {
	switch m.GetMsg().(type) {
	case *toolsdv1.ExecuteBatchResponse_Accepted:
		return "accepted"
	case *toolsdv1.ExecuteBatchResponse_Result:
		return "result"
	case *toolsdv1.ExecuteBatchResponse_ApprovalRequest:
		return "approval"
	case *toolsdv1.ExecuteBatchResponse_Progress:
		return "progress"
	case *toolsdv1.ExecuteBatchResponse_Settled:
		return "settled"
	}
	return fmt.Sprintf("%T", m.GetMsg())
}

// mustExecute is execute that fails the test on an RPC error.
func (e *env) mustExecute(tb testing.TB, b *toolsdv1.Batch, o batchOptions) *outcome {
	tb.Helper()
	out, err := e.execute(tb, b, o)
	if err != nil {
		tb.Fatalf("ExecuteBatch() = %v", err)
	}
	if out.settled == nil {
		tb.Fatal("ExecuteBatch() ended without settled")
	}
	return out
}

// readSession returns every stored event of a session.
func (e *env) readSession(tb testing.TB, sessionID string) []*toolsdv1.SessionEvent {
	tb.Helper()
	events, err := readAll(e, sessionID)
	if err != nil {
		tb.Fatalf("ReadSession(%s) = %v", sessionID, err)
	}
	return events
}

// readAll reads a session and returns its events, or the RPC's error.
func readAll(e *env, id string) ([]*toolsdv1.SessionEvent, error) { return readRange(e, id, 0, 0) }

// schemaNames lists the tool names a scope sees.
func (e *env) schemaNames(tb testing.TB, scope string) []string {
	tb.Helper()
	resp, err := e.tools.Schemas(context.Background(), &toolsdv1.SchemasRequest{Scope: scope})
	if err != nil {
		tb.Fatalf("Schemas(%q) = %v", scope, err)
	}
	names := make([]string, len(resp.GetTools()))
	for i, t := range resp.GetTools() {
		names[i] = t.GetName()
	}
	return names
}

// waitFor polls cond until it holds or 10s pass.
func waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// loggedField waits for the first line logged as msg whose key is value, and returns
// that line's field.
func loggedField(tb testing.TB, logs *observer.ObservedLogs, msg, key string, value any, field string) any {
	tb.Helper()
	var got any
	waitFor(tb, "the "+msg+" log line", func() bool {
		for _, l := range logs.FilterMessage(msg).All() {
			if l.ContextMap()[key] == value {
				got = l.ContextMap()[field]
				return true
			}
		}
		return false
	})
	return got
}

func call(id, name, args string) *toolsdv1.ToolCall {
	return &toolsdv1.ToolCall{CallId: id, Name: name, ArgumentsJson: args}
}

// resultCodes lists each result's error code ("" for success), in stream order.
func resultCodes(rs []*toolsdv1.ToolResult) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.GetError().GetCode()
	}
	return out
}
