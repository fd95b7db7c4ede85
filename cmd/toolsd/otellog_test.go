package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
)

// TestTracingErrorsAreLogLines: with tracing on and no collector listening, the trace
// exporter's failures are toolsd log lines (JSON, as every other line of -log-format
// json), not OpenTelemetry's own plain-text lines written to stderr past the logger,
// which a log pipeline reading JSON cannot parse. The spans of the call are exported
// at shutdown, into a port nobody listens on.
func TestTracingErrorsAreLogLines(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	_ = l.Close()
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://"+closed+"/v1/traces")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "2000")
	cfg := filepath.Join(t.TempDir(), "toolsd.yaml")
	if err := os.WriteFile(cfg, []byte("tracing:\n  enabled: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	d := startDaemon(t, "-config", cfg, "-ephemeral", "-example-provider", "-notes-file", filepath.Join(t.TempDir(), "notes.txt"))
	c := dial(t, d.addr)
	waitFor(t, "the example provider's tools", func() bool {
		r, err := c.Schemas(context.Background(), &toolsdv1.SchemasRequest{})
		return err == nil && len(r.GetTools()) > 0
	})
	stream, err := c.ExecuteBatch(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&toolsdv1.ExecuteBatchRequest{Msg: &toolsdv1.ExecuteBatchRequest_Batch{Batch: &toolsdv1.Batch{
		SessionId: "traced",
		Calls:     []*toolsdv1.ToolCall{{CallId: "c1", Name: "echo", ArgumentsJson: `{"text": "hi"}`}},
	}}}); err != nil {
		t.Fatal(err)
	}
	for {
		m, err := stream.Recv()
		if err != nil {
			t.Fatalf("ExecuteBatch.Recv() = %v before settled", err)
		}
		if m.GetSettled() != nil {
			break
		}
	}
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	d.wait(t)

	d.mu.Lock()
	defer d.mu.Unlock()
	for _, line := range d.raw {
		if !strings.HasPrefix(line, "{") {
			t.Errorf("toolsd wrote a line that is not a JSON log line: %q", line)
		}
	}
	found := false
	for _, m := range d.logs {
		if e, _ := m["error"].(string); m["msg"] == "tracing failed" && strings.Contains(e, closed) {
			found = true
		}
	}
	if !found {
		t.Errorf(`toolsd did not log "tracing failed" naming the collector's address %s`, closed)
	}
}
