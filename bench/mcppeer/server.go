package mcppeer

import (
	"context"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolsd/toolsd/bench/load"
)

// noopArgs is the no-op tool's input; the SDK infers and enforces its schema.
type noopArgs struct {
	Data string `json:"data"`
}

// NewHandler returns a streamable HTTP handler for one MCP server with the tool
// [load.NoopTool], which returns the text "ok".
func NewHandler() http.Handler {
	s := mcp.NewServer(&mcp.Implementation{Name: "mcppeer", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: load.NoopTool, Description: "Does nothing and returns ok."}, noop)
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
}

func noop(context.Context, *mcp.CallToolRequest, noopArgs) (*mcp.CallToolResult, any, error) {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
}
