package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"

	"github.com/toolsd/toolsd/bench/mcppeer"
	"github.com/toolsd/toolsd/bench/relay"
)

// roleFunc runs one server or provider process until ctx ends. It calls ready once it
// serves.
type roleFunc func(ctx context.Context, c config, ready func(readyInfo)) error

func init() {
	registerRole("relay-server", runRelayServer)
	registerRole("relay-provider", runRelayProvider)
	registerRole("mcp-server", runMCPServer)
}

// runRole runs c.role until SIGTERM, SIGINT or the end of stdin (the harness is gone).
func runRole(c config) error {
	f, ok := roles[c.role]
	if !ok {
		return fmt.Errorf("unknown role %q", c.role)
	}
	// The handler stays until the process exits: the harness closes stdin and then
	// sends SIGTERM, and a SIGTERM that came after the role returned, with the default
	// action restored, would turn its exit status into a death by the signal, which
	// the harness takes for a clean stop.
	ctx, _ := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { // ends with the process
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	return f(ctx, c, func(info readyInfo) {
		b, _ := json.Marshal(info)
		fmt.Fprintf(os.Stdout, "%s%s\n", readyPrefix, b)
	})
}

func runRelayServer(ctx context.Context, _ config, ready func(readyInfo)) error {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	relay.ApplyRuntime()
	g := grpc.NewServer(relay.ServerOptions()...)
	relay.NewServer().Register(g)
	metrics, err := serveMetrics(ctx)
	if err != nil {
		return err
	}
	errc := make(chan error, 1)
	go func() { errc <- g.Serve(lis) }()
	ready(readyInfo{Addr: lis.Addr().String(), Metrics: metrics})
	select {
	case <-ctx.Done():
		g.Stop()
		return nil
	case err := <-errc:
		return err
	}
}

func runRelayProvider(ctx context.Context, c config, ready func(readyInfo)) error {
	welcomed := make(chan struct{})
	errc := make(chan error, 1)
	go func() { errc <- relay.RunProvider(ctx, c.target, welcomed) }()
	select {
	case <-welcomed:
		ready(readyInfo{})
		return <-errc
	case err := <-errc:
		return errors.Join(errors.New("relay provider ended before welcome"), err)
	}
}

// peerGOGCEnv, when set, is the GOGC of the MCP server alone (the harness's other
// processes keep theirs): toolsd runs at its default runtime.gc_percent of 400 and the
// relay is given the same, while the peer runs at Go's default of 100 as shipped.
const peerGOGCEnv = "HARNESS_PEER_GOGC"

func runMCPServer(ctx context.Context, _ config, ready func(readyInfo)) error {
	if v := os.Getenv(peerGOGCEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return fmt.Errorf("%s=%q: want a positive GOGC", peerGOGCEnv, v)
		}
		debug.SetGCPercent(n)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcppeer.NewHandler())
	srv := &http.Server{Handler: mux}
	metrics, err := serveMetrics(ctx)
	if err != nil {
		return err
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lis) }()
	ready(readyInfo{Addr: "http://" + lis.Addr().String() + "/mcp", Metrics: metrics})
	select {
	case <-ctx.Done():
		return srv.Close() // Shutdown would wait for the sessions' open SSE streams
	case err := <-errc:
		return err
	}
}

// serveMetrics serves the Go runtime collector (the same go_memstats_* series toolsd's
// admin endpoint has) on a loopback port until ctx ends, and returns its URL.
func serveMetrics(ctx context.Context) (string, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector())
	srv := &http.Server{Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{})}
	go func() { _ = srv.Serve(lis) }()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	return "http://" + lis.Addr().String() + "/metrics", nil
}
