package main

import (
	"context"
	"fmt"
	"time"

	"github.com/toolsd/toolsd/bench/load"
	"github.com/toolsd/toolsd/bench/mcppeer"
)

// Target is one system under test. Start brings up a fresh instance for one workload run;
// the harness stops it right after.
type Target interface {
	Name() string
	Start(ctx context.Context) (*Instance, error)
}

// Instance is a running system under test.
type Instance struct {
	// Dial opens one agent.
	Dial load.Dialer
	// PID is the server process charged with CPU time (0: CPU not measured).
	PID int
	// ProviderPID is the provider process, measured the same way (0: none, the tool runs
	// in the server).
	ProviderPID int
	// MetricsURL is a Prometheus text endpoint exporting go_memstats_mallocs_total of that
	// process ("": allocations not measured).
	MetricsURL string
	// Stop ends every process of the instance.
	Stop func()
}

func init() {
	registerTarget(relayTarget{}, mcpTarget{})
}

// sessionPrefix makes session ids unique per target and instance.
func sessionPrefix(target string) string {
	return fmt.Sprintf("bench-%s-%d", target, time.Now().UnixNano())
}

// relayTarget is the raw relay: a relay-server process and a relay-provider process.
type relayTarget struct{}

func (relayTarget) Name() string { return nameRelay }

func (relayTarget) Start(ctx context.Context) (*Instance, error) {
	srv, info, err := startRole(ctx, "relay-server")
	if err != nil {
		return nil, err
	}
	prov, _, err := startRole(ctx, "relay-provider", "-target", info.Addr)
	if err != nil {
		srv.stop()
		return nil, err
	}
	return &Instance{
		Dial:        load.BatchDialer(info.Addr, sessionPrefix(nameRelay)),
		PID:         srv.pid(),
		ProviderPID: prov.pid(),
		MetricsURL:  info.Metrics,
		Stop: func() {
			prov.stop()
			srv.stop()
		},
	}, nil
}

// mcpTarget is the MCP Go SDK peer: one mcp-server process, the tool inside it.
type mcpTarget struct{}

func (mcpTarget) Name() string { return nameMCP }

func (mcpTarget) Start(ctx context.Context) (*Instance, error) {
	srv, info, err := startRole(ctx, "mcp-server")
	if err != nil {
		return nil, err
	}
	return &Instance{Dial: mcppeer.Dialer(info.Addr), PID: srv.pid(), MetricsURL: info.Metrics, Stop: srv.stop}, nil
}
