package mcppeer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sync/errgroup"

	"github.com/toolsd/toolsd/bench/load"
)

// ErrBadResult reports a CallTool result other than the no-op tool's "ok".
var ErrBadResult = errors.New("mcppeer: bad CallTool result")

// agent is one MCP client session; a batch is BatchSize concurrent CallTool requests.
type agent struct {
	transport *http.Transport
	session   *mcp.ClientSession
	params    *mcp.CallToolParams
	calls     int
}

// Dialer returns a [load.Dialer] of MCP agents for the streamable HTTP endpoint URL.
func Dialer(endpoint string) load.Dialer {
	return func(ctx context.Context, _ int, w load.Workload) (load.Agent, error) {
		return Dial(ctx, endpoint, w)
	}
}

// Dial opens one client session (initialize handshake included) with its own HTTP
// connection pool, sized so that a batch's concurrent requests never queue for a
// connection.
func Dial(ctx context.Context, endpoint string, w load.Workload) (load.Agent, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = w.BatchSize + 2
	client := mcp.NewClient(&mcp.Implementation{Name: "mcppeer-agent", Version: "1"}, nil)
	session, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   endpoint,
		HTTPClient: &http.Client{Transport: tr},
	}, nil)
	if err != nil {
		tr.CloseIdleConnections()
		return nil, fmt.Errorf("mcppeer: connect %s: %w", endpoint, err)
	}
	return &agent{
		transport: tr,
		session:   session,
		params:    &mcp.CallToolParams{Name: load.NoopTool, Arguments: json.RawMessage(load.Arguments(w.ArgBytes))},
		calls:     w.BatchSize,
	}, nil
}

// Do issues the batch's calls concurrently and waits for all of them.
func (a *agent) Do(ctx context.Context) error {
	if a.calls == 1 {
		return a.call(ctx)
	}
	g, ctx := errgroup.WithContext(ctx)
	for range a.calls {
		g.Go(func() error { return a.call(ctx) })
	}
	return g.Wait()
}

func (a *agent) call(ctx context.Context) error {
	res, err := a.session.CallTool(ctx, a.params)
	if err != nil {
		return fmt.Errorf("mcppeer: call: %w", err)
	}
	if res.IsError || len(res.Content) != 1 {
		return fmt.Errorf("%w: %+v", ErrBadResult, res)
	}
	if t, ok := res.Content[0].(*mcp.TextContent); !ok || t.Text != "ok" {
		return fmt.Errorf("%w: content %+v", ErrBadResult, res.Content[0])
	}
	return nil
}

// Close ends the session and drops its connections.
func (a *agent) Close() error {
	err := a.session.Close()
	a.transport.CloseIdleConnections()
	return err
}
