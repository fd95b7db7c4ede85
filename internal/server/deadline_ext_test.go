package server_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
)

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
			if tc.want == codes.Canceled {
				cancel()
			}
			<-ctx.Done()
			<-ends // the handler returned
			if got := rpcCount(t, reg, "ReadSession", tc.want.String()); got != 1 {
				t.Errorf("grpc_server_handled_total{grpc_method=ReadSession,grpc_code=%v} = %v, want 1", tc.want, got)
			}
			for err == nil {
				_, err = r.Recv()
			}
			if status.Code(err) != tc.want {
				t.Errorf("ReadSession(s).Recv() = %v, want %v", err, tc.want)
			}
		})
	}
}
