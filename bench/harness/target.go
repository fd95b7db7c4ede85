package main

import (
	"context"
	"errors"
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
	// Stop ends every process of the instance. It reports each process that exited
	// before it was stopped, non-zero when stopped, or had to be killed.
	Stop func() error
	// procs are the instance's processes, watched while it is measured.
	procs []*child
}

// watch returns ctx, cancelled when a process of the instance exits, and the function
// that ends the watch. A run whose server or provider is gone ends at once, not at a
// batch's timeout.
func (inst *Instance) watch(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	for _, c := range inst.procs {
		go func() {
			select {
			case <-c.done:
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	return ctx, cancel
}

// earlyExit reports every process of the instance that has exited before it was stopped.
func (inst *Instance) earlyExit() error {
	var errs []error
	for _, c := range inst.procs {
		errs = append(errs, c.earlyExit())
	}
	return errors.Join(errs...)
}

// stopAll stops cs in order and reports every one that did not exit cleanly.
func stopAll(cs ...*child) error {
	var errs []error
	for _, c := range cs {
		errs = append(errs, c.stop())
	}
	return errors.Join(errs...)
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
		return nil, errors.Join(err, srv.stop())
	}
	return &Instance{
		Dial:        load.BatchDialer(info.Addr, sessionPrefix(nameRelay)),
		PID:         srv.pid(),
		ProviderPID: prov.pid(),
		MetricsURL:  info.Metrics,
		Stop:        func() error { return stopAll(prov, srv) },
		procs:       []*child{prov, srv},
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
	return &Instance{Dial: mcppeer.Dialer(info.Addr), PID: srv.pid(), MetricsURL: info.Metrics, Stop: srv.stop, procs: []*child{srv}}, nil
}
