// Package mcppeer is the peer baseline: the benchmark's no-op tool served by the official
// MCP Go SDK over streamable HTTP, and an agent that calls it through the SDK's own client.
// MCP has no batch, so a batch of n calls is n concurrent CallTool requests on the agent's
// one client session.
//
// It must stay a default-configured SDK setup (the SDK's own schema inference and
// validation, SSE responses, standalone SSE stream): tuning the peer would make the ratio
// to it flatter toolsd.
package mcppeer
