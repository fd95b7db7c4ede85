package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/toolsd/toolsd/bench/load"
	"github.com/toolsd/toolsd/bench/probe"
	"github.com/toolsd/toolsd/pkg/provider"
)

func init() {
	registerTarget(&toolsdTarget{name: nameToolsd}, &toolsdTarget{name: nameToolsdDurable, store: "bolt"},
		&toolsdTarget{name: nameToolsdJournal, store: "journal"})
	registerRole("toolsd-provider", runToolsdProvider)
	registerProbes(runToolsdProbes)
}

// toolsdArgs is the one place that knows toolsd's command line.
// store is a durable session store ("bolt", "journal") or "" for the in-memory log.
func toolsdArgs(listen, admin, dataDir, store string) []string {
	args := []string{"-listen", listen, "-admin-listen", admin, "-config", benchConfig()}
	if store != "" {
		return append(args, "-data-dir", dataDir, "-session-store", store)
	}
	return append(args, "-ephemeral")
}

// toolsdTarget is toolsd (in-memory or durable session log) with the no-op tool served
// by a separate provider process built on the Go provider SDK.
type toolsdTarget struct {
	name  string
	store string // "" in memory, or the durable store
}

func (t *toolsdTarget) Name() string { return t.name }

func (t *toolsdTarget) Start(ctx context.Context) (*Instance, error) {
	srv, err := startToolsd(ctx, t.store)
	if err != nil {
		return nil, err
	}
	prov, _, err := startRole(ctx, "toolsd-provider", "-target", srv.addr)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("harness: %s provider: %w", t.name, err), srv.stop())
	}
	return &Instance{
		Dial:        load.BatchDialer(srv.addr, sessionPrefix(t.name)),
		PID:         srv.proc.pid(),
		ProviderPID: prov.pid(),
		MetricsURL:  srv.metrics,
		Stop: func() error {
			return errors.Join(prov.stop(), srv.stop())
		},
		procs: []*child{prov, srv.proc},
	}, nil
}

// noopArgs is the no-op tool's input.
type noopArgs struct {
	Data string `json:"data"`
}

// runToolsdProvider serves the no-op tool through the provider SDK and announces itself
// once toolsd has registered the tool.
func runToolsdProvider(ctx context.Context, c config, ready func(readyInfo)) error {
	p := provider.New("bench-noop")
	p.Add(provider.NewTool(load.NoopTool, "Does nothing and returns ok.",
		func(context.Context, provider.Call, noopArgs) (string, error) { return "ok", nil }))
	errc := make(chan error, 1)
	go func() { errc <- p.Run(ctx, c.target) }()
	select {
	case <-p.Ready():
		ready(readyInfo{})
		return <-errc
	case err := <-errc:
		return errors.Join(errors.New("toolsd provider ended before its tools were registered"), err)
	}
}

// moduleRoot is the directory of the toolsd module's go.mod, wherever the harness runs.
var moduleRoot = sync.OnceValues(func() (string, error) {
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("harness: go env GOMOD: %w", err)
	}
	return filepath.Dir(strings.TrimSpace(string(gomod))), nil
})

// toolsdBinary builds ./cmd/toolsd once per harness run.
var toolsdBinary = sync.OnceValues(func() (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "toolsd-bench-")
	if err != nil {
		return "", fmt.Errorf("harness: %w", err)
	}
	registerCleanup(func() { _ = os.RemoveAll(dir) })
	bin := filepath.Join(dir, "toolsd")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/toolsd")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("harness: build toolsd: %w\n%s", err, out)
	}
	return bin, nil
})

// toolsdServer is one running toolsd process.
type toolsdServer struct {
	proc                   *child
	addr, metrics, dataDir string
}

// startToolsd runs a fresh toolsd on free loopback ports and waits until it serves.
func startToolsd(ctx context.Context, store string) (*toolsdServer, error) {
	bin, err := toolsdBinary()
	if err != nil {
		return nil, err
	}
	listen, err := freePort()
	if err != nil {
		return nil, err
	}
	admin, err := freePort()
	if err != nil {
		return nil, err
	}
	dataDir, err := os.MkdirTemp("", "toolsd-bench-data-")
	if err != nil {
		return nil, fmt.Errorf("harness: %w", err)
	}
	// toolsd logs at its default level, info: a line per call, as a deployment's does. It
	// writes them to a file, as a daemon's log would go to one, not to the harness's
	// terminal; a toolsd that fails to start has its log quoted.
	logPath := filepath.Join(dataDir, "toolsd.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		_ = os.RemoveAll(dataDir)
		return nil, fmt.Errorf("harness: %w", err)
	}
	proc, err := startChildLogging("toolsd", bin, logFile, toolsdArgs(listen, admin, dataDir, store)...)
	_ = logFile.Close() // the child has its own descriptor
	if err != nil {
		_ = os.RemoveAll(dataDir)
		return nil, err
	}
	s := &toolsdServer{proc: proc, addr: listen, metrics: "http://" + admin + "/metrics", dataDir: dataDir}
	err = poll(ctx, proc, listen, func(ctx context.Context, conn *grpc.ClientConn) (bool, error) {
		resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		switch status.Code(err) {
		case codes.OK:
			return resp.GetStatus() == healthpb.HealthCheckResponse_SERVING, nil
		case codes.Unimplemented: // serving, without the health service
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		log, _ := os.ReadFile(logPath)
		_ = s.stop() // err says why it is not serving
		return nil, fmt.Errorf("%w\ntoolsd's log:\n%s", err, log[max(len(log)-4096, 0):])
	}
	return s, nil
}

// stop stops toolsd (see [child.stop]) and removes its data directory.
func (s *toolsdServer) stop() error {
	err := s.proc.stop()
	_ = os.RemoveAll(s.dataDir)
	return err
}

// poll calls check every 50 ms until it reports done, proc exits, ctx ends or
// readyTimeout passes.
func poll(ctx context.Context, proc *child, addr string, check func(context.Context, *grpc.ClientConn) (bool, error)) error {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("harness: dial %s: %w", addr, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		done, err := check(ctx, conn)
		if err != nil || done {
			return err
		}
		select {
		case <-proc.done:
			return fmt.Errorf("harness: %s exited: %w", proc.name, proc.err)
		case <-ctx.Done():
			return fmt.Errorf("harness: %s not ready: %w", proc.name, ctx.Err())
		case <-tick.C:
		}
	}
}

// freePort returns a loopback address with a port that was free a moment ago.
func freePort() (string, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("harness: %w", err)
	}
	defer lis.Close()
	return lis.Addr().String(), nil
}

// runToolsdProbes runs each toolsd-only probe against its own fresh in-memory toolsd. A
// probe that fails is named in the error and left nil; the others still run.
func runToolsdProbes(ctx context.Context, c config) (probeResults, error) {
	var r probeResults
	steps := []probeStep{
		{"schemas_10k_p50_us", &r.Schemas10kP50us, func(s *toolsdServer) (float64, error) {
			lat, err := probe.SchemasLatency(ctx, s.addr, c.schemaTools, c.schemaCalls)
			return us(lat.P50), err
		}},
		{"idle_stream_bytes", &r.IdleStreamBytes, func(s *toolsdServer) (float64, error) {
			return probe.IdleStreamBytes(ctx, s.addr, s.proc.pid(), c.idleStreams)
		}},
		{"inflight_call_bytes", &r.InflightCallBytes, func(s *toolsdServer) (float64, error) {
			return probe.InflightCallBytes(ctx, s.addr, s.proc.pid(), c.inflightCalls)
		}},
	}
	err := runProbeSteps(steps, func() (*toolsdServer, error) { return startToolsd(ctx, "") })
	return r, err
}

// probeStep is one toolsd-only probe: its summary.json key, where its value goes, and
// its measurement of a running toolsd.
type probeStep struct {
	key  string
	into **float64
	run  func(*toolsdServer) (float64, error)
}

// runProbeSteps runs each step against its own server from start and returns the
// failures, each named by its key. A step's value is kept only if it measured and its
// server then stopped cleanly: a toolsd that exited early or non-zero, or had to be
// killed, fails its probe and leaves the value nil, as it fails a workload's run.
func runProbeSteps(steps []probeStep, start func() (*toolsdServer, error)) error {
	var errs []error
	for _, step := range steps {
		if err := runProbeStep(step, start); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", step.key, err))
		}
	}
	return errors.Join(errs...)
}

func runProbeStep(step probeStep, start func() (*toolsdServer, error)) error {
	s, err := start()
	if err != nil {
		return err
	}
	v, err := step.run(s)
	if err := errors.Join(err, s.stop()); err != nil {
		return err
	}
	*step.into = &v
	return nil
}

func ptr(v float64) *float64 { return &v }

// benchConfig is the absolute path of bench/toolsd-bench.yaml in the module toolsd is
// built from, wherever the harness runs (make bench runs it from the repository root,
// its tests from bench/harness).
func benchConfig() string {
	rel := filepath.Join("bench", "toolsd-bench.yaml")
	root, err := moduleRoot()
	if err != nil {
		return rel // toolsd cannot be built either: toolsdBinary says why
	}
	return filepath.Join(root, rel)
}
