package app_test

import (
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// TestMaxConnections: toolsd's gRPC listener keeps at most limits.max_connections open;
// one more is closed before it reads anything, counted in
// toolsd_server_connections_refused_total, and toolsd_server_connections follows the
// open ones back to 0, which lets a new client in.
func TestMaxConnections(t *testing.T) {
	e := start(t, "limits: {max_connections: 1}\n")
	if _, err := healthpb.NewHealthClient(e.conn).Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("health Check() = %v, want SERVING", err)
	}
	if got := metricValue(t, e.app, "toolsd_server_connections"); got != 1 {
		t.Errorf("toolsd_server_connections = %v with one client, want 1", got)
	}
	over, err := net.Dial("tcp", e.app.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = over.Close() }()
	_ = over.SetReadDeadline(time.Now().Add(20 * time.Second)) // only a hang reaches it
	if n, err := over.Read(make([]byte, 1)); n != 0 || !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("Read() on a connection over max_connections = %d, %v; want it closed by toolsd", n, err)
	}
	if got := metricValue(t, e.app, "toolsd_server_connections_refused_total"); got != 1 {
		t.Errorf("toolsd_server_connections_refused_total = %v, want 1", got)
	}
	_ = e.conn.Close()
	waitFor(t, "toolsd_server_connections back to 0", func() bool {
		return metricValue(t, e.app, "toolsd_server_connections") == 0
	})
	if _, err := healthpb.NewHealthClient(dial(t, e.app.Addr())).Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("health Check() of a new client once the first left = %v, want SERVING", err)
	}
}
