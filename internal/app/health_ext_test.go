package app_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/pkg/provider"
)

// healthNames are the names the health service answers for: the whole server ("") and
// each toolsd service, as generated.
var healthNames = []string{
	"",
	toolsdv1.ToolService_ServiceDesc.ServiceName,
	toolsdv1.ProviderService_ServiceDesc.ServiceName,
	toolsdv1.HookService_ServiceDesc.ServiceName,
}

// toolsdServices lists, through server reflection, the toolsd services conn's server
// serves.
func toolsdServices(tb testing.TB, conn *grpc.ClientConn) []string {
	tb.Helper()
	stream, err := reflectionv1.NewServerReflectionClient(conn).ServerReflectionInfo(tb.Context())
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = stream.CloseSend() }()
	if err := stream.Send(&reflectionv1.ServerReflectionRequest{MessageRequest: &reflectionv1.ServerReflectionRequest_ListServices{}}); err != nil {
		tb.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		tb.Fatalf("ServerReflectionInfo list services = %v", err)
	}
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		if strings.HasPrefix(s.GetName(), "toolsd.") {
			names = append(names, s.GetName())
		}
	}
	return names
}

// checkAll is the health Check status of every name in healthNames.
func checkAll(tb testing.TB, conn *grpc.ClientConn) map[string]string {
	tb.Helper()
	got := map[string]string{}
	for _, name := range healthNames {
		resp, err := healthpb.NewHealthClient(conn).Check(tb.Context(), &healthpb.HealthCheckRequest{Service: name})
		if err != nil {
			got[name] = status.Code(err).String()
			continue
		}
		got[name] = resp.GetStatus().String()
	}
	return got
}

// allNamed is a checkAll answer with every name in healthNames at st.
func allNamed(st healthpb.HealthCheckResponse_ServingStatus) map[string]string {
	want := map[string]string{}
	for _, name := range healthNames {
		want[name] = st.String()
	}
	return want
}

// TestHealthPerService: load balancers and Kubernetes gRPC probes check a service by
// name, so every service toolsd serves answers SERVING once it is ready, as the whole
// server ("") does, to Check, Watch and List; a name toolsd does not serve is unknown,
// as grpc-go's health server says it.
func TestHealthPerService(t *testing.T) {
	e := start(t, "")
	served := toolsdServices(t, e.conn)
	if want := healthNames[1:]; !cmp.Equal(slices.Sorted(slices.Values(want)), served) {
		t.Fatalf("toolsd services listed by reflection = %v, want %v: every one needs its health name", served, want)
	}
	if diff := cmp.Diff(allNamed(healthpb.HealthCheckResponse_SERVING), checkAll(t, e.conn)); diff != "" {
		t.Errorf("health Check() per service once ready (-want +got):\n%s", diff)
	}
	health := healthpb.NewHealthClient(e.conn)
	for _, name := range healthNames {
		watch, err := health.Watch(t.Context(), &healthpb.HealthCheckRequest{Service: name})
		if err != nil {
			t.Fatal(err)
		}
		if resp, err := watch.Recv(); err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health Watch(%q).Recv() = %v, %v, want SERVING", name, resp, err)
		}
	}
	list, err := health.List(t.Context(), &healthpb.HealthListRequest{})
	if err != nil {
		t.Fatalf("health List() = %v", err)
	}
	listed := map[string]string{}
	for name, st := range list.GetStatuses() {
		listed[name] = st.GetStatus().String()
	}
	if diff := cmp.Diff(allNamed(healthpb.HealthCheckResponse_SERVING), listed); diff != "" {
		t.Errorf("health List() (-want +got):\n%s", diff)
	}

	const unknown = "toolsd.v1.NoSuchService"
	if resp, err := health.Check(t.Context(), &healthpb.HealthCheckRequest{Service: unknown}); status.Code(err) != codes.NotFound {
		t.Errorf("health Check(%q) = %v, %v, want NotFound", unknown, resp, err)
	}
	watch, err := health.Watch(t.Context(), &healthpb.HealthCheckRequest{Service: unknown})
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := watch.Recv(); err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVICE_UNKNOWN {
		t.Errorf("health Watch(%q).Recv() = %v, %v, want SERVICE_UNKNOWN", unknown, resp, err)
	}
}

// TestHealthPerServiceThroughTheDrain: when shutdown begins, every service name goes
// NOT_SERVING with the whole server, while a batch still drains (to Check and to open
// Watch streams alike), and its Watch streams end with Unavailable (SHUTTING_DOWN) at
// the end of the drain, as the whole server's do.
func TestHealthPerServiceThroughTheDrain(t *testing.T) {
	a, cancel, runErr := runApp(t, durableConfig(t, t.TempDir(), "timeouts: {shutdown: 1m}\n"))
	conn := dial(t, a.Addr())
	e := &env{app: a, conn: conn, tools: toolsdv1.NewToolServiceClient(conn)}
	started, release := make(chan struct{}), make(chan struct{})
	wait := provider.NewTool("wait", "Answers once released.", func(context.Context, provider.Call, struct{}) (string, error) {
		close(started)
		<-release
		return "released", nil
	})
	runProvider(t, a.Addr(), wait)

	health := healthpb.NewHealthClient(conn)
	watches := make([]healthpb.Health_WatchClient, len(healthNames))
	for i, name := range healthNames {
		w, err := health.Watch(t.Context(), &healthpb.HealthCheckRequest{Service: name})
		if err != nil {
			t.Fatal(err)
		}
		if resp, err := w.Recv(); err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("health Watch(%q).Recv() = %v, %v, want SERVING", name, resp, err)
		}
		watches[i] = w
	}
	done := make(chan error, 1)
	go func() {
		_, err := e.execute(t, &toolsdv1.Batch{SessionId: "health-drain", Calls: []*toolsdv1.ToolCall{call("w", "wait", "{}")}}, batchOptions{})
		done <- err
	}()
	<-started

	cancel() // what SIGTERM does
	for i, name := range healthNames {
		if resp, err := watches[i].Recv(); err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
			t.Errorf("health Watch(%q).Recv() once the drain began = %v, %v, want NOT_SERVING", name, resp, err)
		}
	}
	if diff := cmp.Diff(allNamed(healthpb.HealthCheckResponse_NOT_SERVING), checkAll(t, conn)); diff != "" {
		t.Errorf("health Check() per service while draining (-want +got):\n%s", diff)
	}
	if code, _ := scrape(t, a.AdminAddr(), "/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz while draining = %d, want 503", code)
	}

	close(release)
	if err := <-done; err != nil {
		t.Errorf("ExecuteBatch() through the drain = %v", err)
	}
	for i, name := range healthNames {
		if resp, err := watches[i].Recv(); status.Code(err) != codes.Unavailable || reason(err) != "SHUTTING_DOWN" {
			t.Errorf("health Watch(%q).Recv() at the end of shutdown = %v, %v, want Unavailable with reason SHUTTING_DOWN", name, resp, err)
		}
	}
	awaitRun(t, runErr)
}
