package app_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"go.uber.org/zap"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/app"
	"github.com/toolsd/toolsd/internal/config"
	"github.com/toolsd/toolsd/pkg/provider"
)

// noopArgs is the benchmark tool's input, as in bench/harness.
type noopArgs struct {
	Data string `json:"data"`
}

// noopTool is the load harness's tool: it takes {"data": string} and returns "ok".
func noopTool() provider.Tool {
	return provider.NewTool("noop", "Does nothing and returns ok.",
		func(context.Context, provider.Call, noopArgs) (string, error) { return "ok", nil })
}

// benchArgs is a 100-byte arguments document for noop.
var benchArgs = `{"data":"` + strings.Repeat("x", 100-len(`{"data":""}`)) + `"}`

// startBench runs toolsd the way the load harness does (error-level logs, bench limits)
// with the no-op tool served by an SDK provider over loopback.
func startBench(b *testing.B, store string) *env {
	b.Helper()
	text := "listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\nlog: {level: error}\n" +
		"limits: {max_in_flight_per_provider: 4096, max_concurrent_streams: 4096}\n" +
		"session: {store: " + store + "}\ndata_dir: " + b.TempDir() + "\n"
	cfg, err := config.Parse([]byte(text), "bench.yaml")
	if err != nil {
		b.Fatalf("config.Parse() = %v", err)
	}
	a, err := app.New(cfg, app.WithLogger(zap.NewNop()))
	if err != nil {
		b.Fatalf("app.New() = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	b.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			b.Errorf("App.Run() = %v", err)
		}
	})
	runProvider(b, a.Addr(), noopTool())
	return &env{app: a}
}

// runBatch sends one batch on a fresh stream and reads it to its end, checking that
// every result is a success in model order.
func runBatch(ctx context.Context, client toolsdv1.ToolServiceClient, req *toolsdv1.ExecuteBatchRequest) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := client.ExecuteBatch(ctx)
	if err != nil {
		return err
	}
	if err := stream.Send(req); err != nil {
		return err
	}
	if err := stream.CloseSend(); err != nil {
		return err
	}
	results := 0
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			if results != len(req.GetBatch().GetCalls()) {
				return fmt.Errorf("stream ended after %d results", results)
			}
			return nil
		}
		if err != nil {
			return err
		}
		if r := m.GetResult(); r != nil {
			if int(r.GetIndex()) != results || r.GetIsError() {
				return fmt.Errorf("result %d = index %d, error %v %q", results, r.GetIndex(), r.GetIsError(), r.GetContent())
			}
			results++
		}
	}
}

// BenchmarkExecuteBatch is the load harness's agent workload in one process: agents
// (one connection and one session each, GOMAXPROCS×8 of them) send batches of no-op
// calls with 100-byte arguments back to back. It is the profiling vehicle for the
// whole call path (go test -bench ExecuteBatch -cpuprofile): agent, toolsd and the
// SDK provider share the process, so ns/call is the cost of all three.
func BenchmarkExecuteBatch(b *testing.B) {
	for _, store := range []string{"memory", "bolt"} {
		for _, calls := range []int{1, 8} {
			b.Run(fmt.Sprintf("store=%s/calls=%d", store, calls), func(b *testing.B) {
				e := startBench(b, store)
				var agent atomic.Int64
				b.SetParallelism(8)
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					id := agent.Add(1)
					conn := dial(b, e.app.Addr())
					client := toolsdv1.NewToolServiceClient(conn)
					batch := &toolsdv1.Batch{SessionId: "bench-" + strconv.FormatInt(id, 10), Turn: 1}
					for i := range calls {
						batch.Calls = append(batch.Calls, call("call-"+strconv.Itoa(i), "noop", benchArgs))
					}
					req := &toolsdv1.ExecuteBatchRequest{Msg: &toolsdv1.ExecuteBatchRequest_Batch{Batch: batch}}
					for pb.Next() {
						batch.Step++
						if err := runBatch(context.Background(), client, req); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*calls), "ns/call")
			})
		}
	}
}

// TestPprofFollowsConfig checks that /debug/pprof/ is served on the admin listener only
// when debug.pprof is on.
func TestPprofFollowsConfig(t *testing.T) {
	for name, tc := range map[string]struct {
		extra string
		want  int
	}{
		"off by default": {want: http.StatusNotFound},
		"on":             {extra: "debug: {pprof: true}\n", want: http.StatusOK},
	} {
		t.Run(name, func(t *testing.T) {
			e := start(t, tc.extra)
			url := "http://" + e.app.AdminAddr() + "/debug/pprof/cmdline"
			var code int
			waitFor(t, "the admin server", func() bool {
				resp, err := http.Get(url)
				if err != nil {
					return false
				}
				_ = resp.Body.Close()
				code = resp.StatusCode
				return true
			})
			if code != tc.want {
				t.Errorf("GET %s = %d, want %d", url, code, tc.want)
			}
		})
	}
}
