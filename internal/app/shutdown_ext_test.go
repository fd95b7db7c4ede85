package app_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime/trace"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	reflectionv1alpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/grpc/status"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/app"
	"github.com/toolsd/toolsd/internal/config"
	"github.com/toolsd/toolsd/pkg/provider"
)

// TestGracefulShutdownWithCallsInFlight cancels Run (the SIGTERM path) while two batches
// run: readiness drops, new batches are refused, a call that finishes within the
// shutdown deadline commits normally, the calls still running at the deadline are
// aborted and logged (their batch's RPC ends UNAVAILABLE after its settled), the
// provider is told, and Run returns nil.
func TestGracefulShutdownWithCallsInFlight(t *testing.T) {
	cfg := durableConfig(t, t.TempDir(), "timeouts: {shutdown: 1s}\n")
	a, cancel, runErr := runApp(t, cfg)
	conn := dial(t, a.Addr())
	e := &env{app: a, conn: conn, tools: toolsdv1.NewToolServiceClient(conn)}

	started, stopped := make(chan string, 4), make(chan string, 4)
	release := make(chan struct{})
	finish := provider.NewTool("finish", "Answers once released.", func(ctx context.Context, _ provider.Call, a blockArgs) (string, error) {
		started <- a.Label
		select {
		case <-release:
			return "finished " + a.Label, nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	})
	core, providerLogs := observer.New(zap.InfoLevel)
	stopProvider := runProviderWith(t, a.Addr(), []provider.Option{provider.WithLogger(zap.New(core))}, finish, blockTool("block", started, stopped))

	type result struct {
		out *outcome
		err error
	}
	run := func(b *toolsdv1.Batch) <-chan result {
		ch := make(chan result, 1)
		go func() {
			out, err := e.execute(t, b, batchOptions{})
			ch <- result{out, err}
		}()
		return ch
	}
	finishing := run(&toolsdv1.Batch{SessionId: "drain-finish", Calls: []*toolsdv1.ToolCall{call("f", "finish", `{"label":"f"}`)}})
	blocking := run(&toolsdv1.Batch{SessionId: "drain-block", MaxParallel: 1, Calls: []*toolsdv1.ToolCall{
		call("b1", "block", `{"label":"b1"}`), call("b2", "block", `{"label":"b2"}`),
	}})
	got := []string{<-started, <-started}
	slices.Sort(got)
	if want := []string{"b1", "f"}; !slices.Equal(got, want) {
		t.Fatalf("started calls = %v, want %v", got, want)
	}

	cancel() // what SIGTERM does in cmd/toolsd
	health := healthpb.NewHealthClient(conn)
	waitFor(t, "health NOT_SERVING", func() bool {
		resp, err := health.Check(context.Background(), &healthpb.HealthCheckRequest{})
		return err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_NOT_SERVING
	})
	resp, err := http.Get("http://" + a.AdminAddr() + "/readyz")
	if err != nil {
		t.Fatalf("GET /readyz while draining = %v", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("GET /readyz while draining = %d, want 503", resp.StatusCode)
	}
	_, err = e.execute(t, &toolsdv1.Batch{SessionId: "drain-late", Calls: []*toolsdv1.ToolCall{call("l", "finish", `{"label":"late"}`)}}, batchOptions{})
	if status.Code(err) != codes.Unavailable || reason(err) != "SHUTTING_DOWN" {
		t.Errorf("ExecuteBatch() while draining = %v, want Unavailable with reason SHUTTING_DOWN", err)
	}
	close(release) // the finishing call ends well within the deadline

	f := <-finishing
	if f.err != nil || f.out.settled == nil || f.out.settled.GetCancelled() {
		t.Fatalf("finishing batch = %v, settled %v; want OK, settled not cancelled", f.err, f.out.settled)
	}
	if got := f.out.results; len(got) != 1 || got[0].GetIsError() || got[0].GetContent() != "finished f" {
		t.Errorf("finishing batch results = %v, want one success %q", got, "finished f")
	}
	// The abort is toolsd's, not the client's: after its results and settled, the RPC
	// ends UNAVAILABLE (SHUTTING_DOWN), so that the loop knows to run them elsewhere.
	b := <-blocking
	if status.Code(b.err) != codes.Unavailable || reason(b.err) != "SHUTTING_DOWN" || b.out.settled == nil || !b.out.settled.GetCancelled() {
		t.Fatalf("blocking batch = %v, settled %v; want settled cancelled, then Unavailable with reason SHUTTING_DOWN", b.err, b.out.settled)
	}
	if diff := cmp.Diff([]string{"ABORTED", "ABORTED_BEFORE_DISPATCH"}, resultCodes(b.out.results)); diff != "" {
		t.Errorf("blocking batch codes (-want +got):\n%s", diff)
	}
	if label := <-stopped; label != "b1" {
		t.Errorf("provider saw the cancellation of %q, want b1", label)
	}
	awaitRun(t, runErr)
	// The goodbye is sent before Run returns; the provider reads it on its own time.
	waitFor(t, "the provider to read toolsd's goodbye", func() bool {
		return providerLogs.FilterMessage("toolsd is shutting down").Len() > 0
	})
	if n := providerLogs.FilterMessage("toolsd is shutting down").Len(); n != 1 {
		t.Errorf("provider saw %d goodbyes, want 1", n)
	}
	stopProvider()

	// Everything is in the durable log, closed normally: nothing to recover.
	again := startConfig(t, durableConfig(t, cfg.DataDir, ""))
	assertCompleteLog(t, again, "drain-finish", 1)
	assertCompleteLog(t, again, "drain-block", 2)
	if events := again.readSession(t, "drain-late"); len(events) != 0 {
		t.Errorf("the refused batch logged %d events, want none", len(events))
	}
	var codesInLog []string
	for _, ev := range again.readSession(t, "drain-block") {
		if r := ev.GetToolResult(); r != nil {
			codesInLog = append(codesInLog, r.GetError().GetCode())
			if r.GetRecovered() {
				t.Errorf("result %v is recovered, want it written before the shutdown finished", r)
			}
		}
	}
	if diff := cmp.Diff([]string{"ABORTED", "ABORTED_BEFORE_DISPATCH"}, codesInLog); diff != "" {
		t.Errorf("logged codes (-want +got):\n%s", diff)
	}
}

// startedRPCs counts the RPCs of method whose handler started, from toolsd's metrics.
func startedRPCs(tb testing.TB, a *app.App, method string) int {
	tb.Helper()
	return rpcCount(tb, a, "grpc_server_started_total", "grpc_method", method)
}

// rpcCount sums the counter family's series whose labels have the given values
// (name, value pairs).
func rpcCount(tb testing.TB, a *app.App, family string, labels ...string) int {
	tb.Helper()
	return int(metricValue(tb, a, family, labels...))
}

// durableConfig is baseConfig with the bolt session store in dataDir, then extra.
func durableConfig(tb testing.TB, dataDir, extra string) *config.Config {
	tb.Helper()
	text := fmt.Sprintf("listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\nsession: {store: bolt, durability: nosync}\ndata_dir: %s\n%s", dataDir, extra)
	cfg, err := config.Parse([]byte(text), "test.yaml")
	if err != nil {
		tb.Fatalf("config.Parse() = %v", err)
	}
	return cfg
}

// runProviderWith is runProvider with provider options.
func runProviderWith(tb testing.TB, addr string, opts []provider.Option, tools ...provider.Tool) (stop func()) {
	tb.Helper()
	p := provider.New("test", append([]provider.Option{provider.WithBackoff(10*time.Millisecond, 50*time.Millisecond)}, opts...)...)
	p.Add(tools...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = p.Run(ctx, addr)
	}()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	tb.Cleanup(stop)
	select {
	case <-p.Ready():
	case <-time.After(10 * time.Second):
		tb.Fatal("provider did not register within 10s")
	}
	return stop
}

// reason is the ErrorInfo reason of a status error ("" if none).
func reason(err error) string {
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.GetReason()
		}
	}
	return ""
}

// TestShutdownEndsIdleStreams checks that shutdown itself ends the streams that never
// end on their own: an open WatchSession and an ExecuteBatch stream whose batch never
// came. Left to the gRPC server, they would hold its graceful stop (and the idle batch
// also the drain) until the fallback timers, long past the shutdown deadline.
func TestShutdownEndsIdleStreams(t *testing.T) {
	a, cancel, runErr := runApp(t, durableConfig(t, t.TempDir(), "timeouts: {shutdown: 100ms}\n"))
	conn := dial(t, a.Addr())
	e := &env{app: a, conn: conn, tools: toolsdv1.NewToolServiceClient(conn)}
	e.mustExecute(t, &toolsdv1.Batch{SessionId: "watched", Calls: []*toolsdv1.ToolCall{call("c", "nope", "{}")}}, batchOptions{})
	watch, err := e.tools.WatchSession(context.Background(), &toolsdv1.WatchSessionRequest{SessionId: "watched"})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // the call and its result: the watch is live and now waits for more
		if _, err := watch.Recv(); err != nil {
			t.Fatalf("WatchSession().Recv() = %v", err)
		}
	}
	idle, err := e.tools.ExecuteBatch(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the idle batch stream to reach its handler", func() bool { return startedRPCs(t, a, "ExecuteBatch") == 2 })
	cancel()
	awaitRun(t, runErr)
	// Ended by toolsd, not by the gRPC server's hard stop after its grace timer.
	if _, err := watch.Recv(); status.Code(err) != codes.Unavailable || reason(err) != "SHUTTING_DOWN" {
		t.Errorf("WatchSession().Recv() after shutdown = %v, want Unavailable with reason SHUTTING_DOWN", err)
	}
	if _, err := idle.Recv(); status.Code(err) != codes.Unavailable || reason(err) != "SHUTTING_DOWN" {
		t.Errorf("idle ExecuteBatch().Recv() after shutdown = %v, want Unavailable with reason SHUTTING_DOWN", err)
	}
}

// TestExampleProviderOutlivesTheDrain: the bundled example provider (make run) is a
// provider like any other at shutdown: a call running on it when the signal comes
// finishes within the shutdown deadline instead of failing with PROVIDER_GONE.
func TestExampleProviderOutlivesTheDrain(t *testing.T) {
	cfg, err := config.Parse([]byte(baseConfig+"timeouts: {shutdown: 30s}\n"), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	a, cancel, runErr := runApp(t, cfg, app.WithExampleProvider(t.TempDir()+"/notes.txt"))
	conn := dial(t, a.Addr())
	e := &env{app: a, conn: conn, tools: toolsdv1.NewToolServiceClient(conn)}
	waitFor(t, "the example tools", func() bool { return slices.Contains(e.schemaNames(t, ""), "sleep") })

	done := make(chan *outcome, 1)
	go func() {
		out, err := e.execute(t, &toolsdv1.Batch{SessionId: "example-drain", Calls: []*toolsdv1.ToolCall{call("s", "sleep", `{"ms":300}`)}}, batchOptions{})
		if err != nil {
			t.Errorf("ExecuteBatch() = %v", err)
		}
		done <- out
	}()
	waitFor(t, "the call to start", func() bool { return rpcCount(t, a, "toolsd_scheduler_calls_started_total") == 1 })
	cancel() // what SIGINT does under make run
	if out := <-done; out == nil || len(out.results) != 1 || out.results[0].GetIsError() {
		t.Errorf("sleep during the drain = %+v, want its result", out)
	}
	if err := <-runErr; err != nil {
		t.Errorf("App.Run() = %v, want nil", err)
	}
}

// TestShutdownEndsHealthWatches: a health Watch stream (gRPC client-side health
// checking keeps one open per connection) sees NOT_SERVING when the drain begins and is
// ended by shutdown with Unavailable (SHUTTING_DOWN). Left open, it would hold the gRPC
// server's graceful stop until its fallback timer and be cut off by the hard stop.
func TestShutdownEndsHealthWatches(t *testing.T) {
	a, cancel, runErr := runApp(t, durableConfig(t, t.TempDir(), "timeouts: {shutdown: 100ms}\n"))
	conn := dial(t, a.Addr())
	watch, err := healthpb.NewHealthClient(conn).Watch(context.Background(), &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := watch.Recv(); err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health Watch().Recv() = %v, %v, want SERVING", resp, err)
	}
	cancel()
	if resp, err := watch.Recv(); err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("health Watch().Recv() after shutdown began = %v, %v, want NOT_SERVING", resp, err)
	}
	resp, err := watch.Recv()
	if status.Code(err) != codes.Unavailable || reason(err) != "SHUTTING_DOWN" {
		t.Errorf("health Watch().Recv() at the end of shutdown = %v, %v, want Unavailable with reason SHUTTING_DOWN", resp, err)
	}
	awaitRun(t, runErr)
}

// TestShutdownEndsReflectionStreams: server reflection streams (grpcurl, grpcui and IDEs
// keep one open while they run), v1 and v1alpha, are ended by shutdown with Unavailable
// (SHUTTING_DOWN), so the gRPC server's graceful stop finishes without its hard stop.
// Left open, they held it until the fallback timer, which then cut them off.
func TestShutdownEndsReflectionStreams(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	a, cancel, runErr := runApp(t, durableConfig(t, t.TempDir(), "timeouts: {shutdown: 100ms}\n"), app.WithLogger(zap.New(core)))
	conn := dial(t, a.Addr())
	ctx, stop := context.WithTimeout(context.Background(), time.Minute) // a safety net
	defer stop()
	v1, err := reflectionv1.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	v1alpha, err := reflectionv1alpha.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	list := &reflectionv1.ServerReflectionRequest{MessageRequest: &reflectionv1.ServerReflectionRequest_ListServices{}}
	if err := v1.Send(list); err != nil {
		t.Fatal(err)
	}
	if resp, err := v1.Recv(); err != nil || !slices.ContainsFunc(resp.GetListServicesResponse().GetService(), func(s *reflectionv1.ServiceResponse) bool {
		return s.GetName() == "toolsd.v1.ToolService"
	}) {
		t.Fatalf("v1 ServerReflectionInfo list services = %v, %v, want toolsd.v1.ToolService listed", resp, err)
	}
	if err := v1alpha.Send(&reflectionv1alpha.ServerReflectionRequest{MessageRequest: &reflectionv1alpha.ServerReflectionRequest_ListServices{}}); err != nil { //nolint:staticcheck // v1alpha on purpose: grpcurl and grpcui still fall back to it
		t.Fatal(err)
	}
	if _, err := v1alpha.Recv(); err != nil {
		t.Fatalf("v1alpha ServerReflectionInfo list services = %v", err)
	}
	cancel()
	if err := <-runErr; err != nil {
		t.Errorf("App.Run() = %v, want nil", err)
	}
	if n := logs.FilterMessage("graceful stop timed out; closing the remaining streams").Len(); n != 0 {
		t.Error("shutdown fell back to the gRPC server's hard stop, want the reflection streams ended before it")
	}
	if _, err := v1.Recv(); status.Code(err) != codes.Unavailable || reason(err) != "SHUTTING_DOWN" {
		t.Errorf("v1 ServerReflectionInfo().Recv() after shutdown = %v, want Unavailable with reason SHUTTING_DOWN", err)
	}
	if _, err := v1alpha.Recv(); status.Code(err) != codes.Unavailable || reason(err) != "SHUTTING_DOWN" {
		t.Errorf("v1alpha ServerReflectionInfo().Recv() after shutdown = %v, want Unavailable with reason SHUTTING_DOWN", err)
	}
}

// TestShutdownEndsAdminRequests: an admin request still running once shutdown has
// waited for the admin server (an execution trace asked for an hour on /debug/pprof/)
// is cut off, so that nothing of it runs on after Run returned: the admin server's
// Shutdown leaves such a request to its handler.
func TestShutdownEndsAdminRequests(t *testing.T) {
	cfg, err := config.Parse([]byte(baseConfig+"debug: {pprof: true}\n"), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	a, cancel, runErr := runApp(t, cfg)
	client := &http.Client{Transport: &http.Transport{}}
	ended := make(chan error, 1)
	go func() {
		resp, err := client.Get("http://" + a.AdminAddr() + "/debug/pprof/trace?seconds=3600")
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
		ended <- err
	}()
	waitFor(t, "the trace to start", trace.IsEnabled)
	cancel()
	if err := <-runErr; err != nil {
		t.Errorf("App.Run() = %v, want nil", err)
	}
	waitFor(t, "the trace request to end", func() bool { return len(ended) == 1 })
	waitFor(t, "the trace handler to stop tracing", func() bool { return !trace.IsEnabled() })
}
