package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/registry"
	"github.com/toolsd/toolsd/internal/server"
	"github.com/toolsd/toolsd/internal/session"
)

// endByClient ends a running server stream as its client would, at once for want
// Canceled, else by letting ctx's deadline pass; waits for its handler to return; and
// checks that toolsd counted the RPC of method with want, and that the client's recv
// ends with it.
func endByClient(t *testing.T, ctx context.Context, cancel context.CancelFunc, want codes.Code, reg *prometheus.Registry, ends rpcEnds, method string, recv func() error) {
	t.Helper()
	if want == codes.Canceled {
		cancel()
	}
	<-ctx.Done()
	<-ends // the handler returned
	if got := rpcCount(t, reg, method, want.String()); got != 1 {
		t.Errorf("grpc_server_handled_total{grpc_method=%s,grpc_code=%v} = %v, want 1 (OK: %v)", method, want, got, rpcCount(t, reg, method, "OK"))
	}
	var err error
	for err == nil {
		err = recv()
	}
	if status.Code(err) != want {
		t.Errorf("%s: Recv() = %v, want %v", method, err, want)
	}
}

// TestReaderWhoseDeadlinePassesIsDeadlineExceeded: a ReadSession whose client's
// deadline passes while toolsd waits to send it more is counted DEADLINE_EXCEEDED, as
// the client got: the client resets the stream when its deadline passes, often before
// toolsd's timer for it fires, and the failed Send's Canceled was the RPC's status. A
// reader that cancels is still counted CANCELED.
func TestReaderWhoseDeadlinePassesIsDeadlineExceeded(t *testing.T) {
	tests := map[string]struct {
		timeout time.Duration // the client's; it cancels at once when it is an hour
		want    codes.Code
	}{
		"deadline passes": {timeout: time.Second, want: codes.DeadlineExceeded},
		"cancelled":       {timeout: time.Hour, want: codes.Canceled},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			const n = 200 // 800 KiB, far more than the client's window and the stream's write quota
			tools, reg, ends := serveWatch(t, watchedSession(t, n), time.Hour, nil)
			ctx, cancel := context.WithTimeout(t.Context(), tc.timeout)
			defer cancel()
			r, err := tools.ReadSession(ctx, &toolsdv1.ReadSessionRequest{SessionId: "s"})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := r.Recv(); err != nil { // the read is running; the client reads no more
				t.Fatalf("ReadSession(s).Recv() = %v", err)
			}
			endByClient(t, ctx, cancel, tc.want, reg, ends, "ReadSession", func() error { _, err := r.Recv(); return err })
		})
	}
}

// TestWatcherWhoseDeadlinePassesIsDeadlineExceeded: a WatchSession whose client's
// deadline passes is counted DEADLINE_EXCEEDED, as the client got, and one its client
// cancels CANCELED, whether the watch waits for the session's next event or for the
// client to take the events on their way; the handler answered OK for both, so toolsd's
// log line and metrics said the watch had ended well.
func TestWatcherWhoseDeadlinePassesIsDeadlineExceeded(t *testing.T) {
	tests := map[string]struct {
		events  int           // in the session; 200 are 800 KiB, more than the client's window
		timeout time.Duration // the client's; it cancels at once when it is an hour
		want    codes.Code
	}{
		"deadline passes while waiting": {events: 2, timeout: time.Second, want: codes.DeadlineExceeded},
		"deadline passes while sending": {events: 200, timeout: time.Second, want: codes.DeadlineExceeded},
		"cancelled while waiting":       {events: 2, timeout: time.Hour, want: codes.Canceled},
		"cancelled while sending":       {events: 200, timeout: time.Hour, want: codes.Canceled},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tools, reg, ends := serveWatch(t, watchedSession(t, tc.events), time.Hour, nil)
			ctx, cancel := context.WithTimeout(t.Context(), tc.timeout)
			defer cancel()
			w, err := tools.WatchSession(ctx, &toolsdv1.WatchSessionRequest{SessionId: "s"})
			if err != nil {
				t.Fatal(err)
			}
			want := 1 // the watch is running; the client reads no more
			if tc.events < 10 {
				want = tc.events // the watch waits for the session's next event
			}
			for range want {
				if _, err := w.Recv(); err != nil {
					t.Fatalf("WatchSession(s).Recv() = %v", err)
				}
			}
			endByClient(t, ctx, cancel, tc.want, reg, ends, "WatchSession", func() error { _, err := w.Recv(); return err })
		})
	}
}

// TestSchemaWatcherWhoseDeadlinePassesIsDeadlineExceeded: a WatchSchemas its client
// ends is counted as the client reads it, DEADLINE_EXCEEDED for its deadline and
// CANCELED for a cancel, as a WatchSession is; the handler answered OK for any watch
// whose stream had ended.
func TestSchemaWatcherWhoseDeadlinePassesIsDeadlineExceeded(t *testing.T) {
	tests := map[string]struct {
		timeout time.Duration // the client's; it cancels at once when it is an hour
		want    codes.Code
	}{
		"deadline passes": {timeout: time.Second, want: codes.DeadlineExceeded},
		"cancelled":       {timeout: time.Hour, want: codes.Canceled},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			mem := session.NewMemory()
			t.Cleanup(func() { _ = mem.Close() })
			reg := registry.New(registry.WithLogger(zap.NewNop()))
			tools, metrics, ends := serveDeps(t, server.Deps{Registry: reg, Sessions: mem, Limits: server.Limits{WriteTimeout: time.Hour}})
			ctx, cancel := context.WithTimeout(t.Context(), tc.timeout)
			defer cancel()
			w, err := tools.WatchSchemas(ctx, &toolsdv1.WatchSchemasRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.Recv(); err != nil { // the first fingerprint; then the watch waits
				t.Fatalf("WatchSchemas().Recv() = %v", err)
			}
			endByClient(t, ctx, cancel, tc.want, metrics, ends, "WatchSchemas", func() error { _, err := w.Recv(); return err })
		})
	}
}
