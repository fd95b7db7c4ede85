package mcppeer_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolsd/toolsd/bench/load"
	"github.com/toolsd/toolsd/bench/mcppeer"
)

func TestPeerRunsWorkload(t *testing.T) {
	tests := map[string]struct{ agents, batch int }{
		"single call":    {agents: 2, batch: 1},
		"3-call batches": {agents: 2, batch: 3},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(mcppeer.NewHandler())
			defer srv.Close()
			w := load.Workload{Name: name, Agents: tc.agents, BatchSize: tc.batch, ArgBytes: 100,
				Warmup: 20 * time.Millisecond, Duration: 150 * time.Millisecond}
			res, err := load.Run(t.Context(), w, mcppeer.Dialer(srv.URL))
			if err != nil {
				t.Fatalf("Run() error = %v", err)
			}
			if res.Batches == 0 || res.Calls != res.Batches*tc.batch || res.P50 <= 0 {
				t.Fatalf("Run() = %+v, want completed batches with latencies", res)
			}
		})
	}
}

// TestBadResultIsError checks that the agent notices a tool that does not answer "ok",
// by pointing it at a server whose noop tool answers something else.
func TestBadResultIsError(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "wrong", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: load.NoopTool}, func(_ context.Context, _ *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "not ok"}}}, nil, nil
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	defer srv.Close()
	w := load.Workload{Name: "x", Agents: 1, BatchSize: 1, ArgBytes: 20, Duration: time.Second}
	a, err := mcppeer.Dial(t.Context(), srv.URL, w)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = a.Close() }()
	if err := a.Do(t.Context()); !errors.Is(err, mcppeer.ErrBadResult) {
		t.Fatalf("Do() error = %v, want ErrBadResult", err)
	}
}
