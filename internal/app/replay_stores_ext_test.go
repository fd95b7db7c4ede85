package app_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
)

// readMessages is what ReadSession answers req with: its messages, then its error
// (nil at the stream's end).
func readMessages(t *testing.T, e *env, req *toolsdv1.ReadSessionRequest) ([]*toolsdv1.ReadSessionResponse, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	stream, err := e.tools.ReadSession(ctx, req)
	if err != nil {
		return nil, err
	}
	var out []*toolsdv1.ReadSessionResponse
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, m)
	}
}

// TestWatchSessionReplaysWhatReadSessionReads checks the replay contract a client sees
// on every store, with a session id and call ids at their 256-byte limit: a watch from
// any seq, resumed with the epoch it read, sends what ReadSession sends from there,
// then the next batch's events live, with no gap or duplicate at the hand-over; a
// DeleteSession ends it with NOT_FOUND (SESSION_DELETED), and the epoch tells the id's
// next session from the deleted one to a reader and to a watcher waiting past its end.
func TestWatchSessionReplaysWhatReadSessionReads(t *testing.T) {
	id := strings.Repeat("é", 128) // 256 bytes
	callID := func(i int) string { return fmt.Sprintf("%0256d", i) }
	for name, text := range storeConfigs(t) {
		t.Run(name, func(t *testing.T) {
			e := startText(t, text)
			runProvider(t, e.app.Addr(), bigTool())
			b := &toolsdv1.Batch{SessionId: id, Turn: 1}
			for i := range 10 {
				b.Calls = append(b.Calls, call(callID(i), "big", fmt.Sprintf(`{"size":%d,"label":"x"}`, 1+i*1000)))
			}
			e.mustExecute(t, b, batchOptions{})
			read, err := readMessages(t, e, &toolsdv1.ReadSessionRequest{SessionId: id})
			if err != nil || len(read) != 20 {
				t.Fatalf("ReadSession() = %d events, %v, want 20", len(read), err)
			}
			epoch := read[0].GetEpoch()
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			for _, from := range []uint64{0, 1, 5, 20} {
				wctx, wcancel := context.WithCancel(ctx)
				w, err := e.tools.WatchSession(wctx, &toolsdv1.WatchSessionRequest{SessionId: id, FromSeq: from, ExpectEpoch: epoch})
				if err != nil {
					t.Fatal(err)
				}
				for i := max(from, 1) - 1; i < 20; i++ {
					m, err := w.Recv()
					if err != nil {
						t.Fatalf("WatchSession(from %d): event %d: %v", from, i+1, err)
					}
					if !proto.Equal(m.GetEvent(), read[i].GetEvent()) || m.GetEpoch() != read[i].GetEpoch() {
						t.Fatalf("WatchSession(from %d) sent %v, ReadSession %v", from, m, read[i])
					}
				}
				wcancel()
			}

			w, err := e.tools.WatchSession(ctx, &toolsdv1.WatchSessionRequest{SessionId: id, FromSeq: 21, ExpectEpoch: epoch})
			if err != nil {
				t.Fatal(err)
			}
			next := &toolsdv1.Batch{SessionId: id, Turn: 2, Calls: []*toolsdv1.ToolCall{call(callID(99), "big", `{"size":3,"label":"y"}`)}}
			e.mustExecute(t, next, batchOptions{})
			for want := uint64(21); want <= 22; want++ {
				if m, err := w.Recv(); err != nil || m.GetEvent().GetSeq() != want || m.GetEpoch() != epoch {
					t.Fatalf("WatchSession(from 21) live = %v, %v, want seq %d of epoch %d", m, err, want, epoch)
				}
			}
			if d, err := e.tools.DeleteSession(ctx, &toolsdv1.DeleteSessionRequest{SessionId: id}); err != nil || d.GetEventsRemoved() != 22 {
				t.Fatalf("DeleteSession() = %v, %v, want 22 events removed", d, err)
			}
			if m, err := w.Recv(); status.Code(err) != codes.NotFound || reason(err) != "SESSION_DELETED" {
				t.Fatalf("WatchSession() after DeleteSession = %v, %v, want NOT_FOUND (SESSION_DELETED)", m, err)
			}
			if got, err := readMessages(t, e, &toolsdv1.ReadSessionRequest{SessionId: id, FromSeq: 23, ExpectEpoch: epoch}); err != nil || len(got) != 0 {
				t.Fatalf("ReadSession(from 23) of the deleted session = %d events, %v, want none", len(got), err)
			}

			waiting, err := e.tools.WatchSession(ctx, &toolsdv1.WatchSessionRequest{SessionId: id, FromSeq: 23, ExpectEpoch: epoch})
			if err != nil {
				t.Fatal(err)
			}
			e.mustExecute(t, next, batchOptions{})
			if m, err := waiting.Recv(); status.Code(err) != codes.FailedPrecondition || reason(err) != "SESSION_RECREATED" {
				t.Errorf("WatchSession(from 23) waiting as the id is recreated = %v, %v, want FAILED_PRECONDITION (SESSION_RECREATED)", m, err)
			}
			if _, err := readMessages(t, e, &toolsdv1.ReadSessionRequest{SessionId: id, FromSeq: 1, ExpectEpoch: epoch}); status.Code(err) != codes.FailedPrecondition || reason(err) != "SESSION_RECREATED" {
				t.Errorf("ReadSession() of the recreated id with the old epoch = %v, want FAILED_PRECONDITION (SESSION_RECREATED)", err)
			}
			again, err := readMessages(t, e, &toolsdv1.ReadSessionRequest{SessionId: id})
			if err != nil || len(again) != 2 || again[0].GetEvent().GetSeq() != 1 || again[0].GetEpoch() == epoch {
				t.Errorf("ReadSession() of the recreated id = %v, %v, want seqs 1 and 2 of a new epoch", again, err)
			}
		})
	}
}
