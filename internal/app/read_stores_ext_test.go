package app_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/config"
	"github.com/toolsd/toolsd/internal/session"
	"github.com/toolsd/toolsd/pkg/provider"
)

type bigArgs struct {
	Size  int    `json:"size"`
	Label string `json:"label"`
}

// bigTool returns a result of size bytes that names its label.
func bigTool() provider.Tool {
	return provider.NewTool("big", "Returns size bytes.", func(_ context.Context, _ provider.Call, a bigArgs) (string, error) {
		return a.Label + ":" + strings.Repeat("x", max(a.Size-len(a.Label)-1, 0)), nil
	})
}

// storeConfigs are toolsd configs, one per session store, each with its own data_dir;
// "journal-cold" keeps no session in memory, so its reads come from the file.
func storeConfigs(t *testing.T) map[string]string {
	const head = "listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\nlimits: {max_result_bytes: 8MiB}\n"
	return map[string]string{
		"memory":       head + "session: {store: memory}\n",
		"bolt":         head + "session: {store: bolt, durability: nosync}\ndata_dir: " + t.TempDir() + "\n",
		"journal":      head + "session: {store: journal, durability: nosync}\ndata_dir: " + t.TempDir() + "\n",
		"journal-cold": head + "session: {store: journal, durability: nosync, hot_for: 1ns}\ndata_dir: " + t.TempDir() + "\n",
	}
}

func startText(t *testing.T, text string) *env {
	t.Helper()
	cfg, err := config.Parse([]byte(text), "test.yaml")
	if err != nil {
		t.Fatalf("config.Parse() = %v", err)
	}
	return startConfig(t, cfg)
}

// readRange reads a session with from_seq and limit. Events may be as large as the log
// allows (16 MiB), over gRPC's default 4 MiB receive limit.
func readRange(e *env, id string, from uint64, limit uint32) ([]*toolsdv1.SessionEvent, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	stream, err := e.tools.ReadSession(ctx, &toolsdv1.ReadSessionRequest{SessionId: id, FromSeq: from, Limit: limit}, grpc.MaxCallRecvMsgSize(32<<20))
	if err != nil {
		return nil, err
	}
	var out []*toolsdv1.SessionEvent
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, m.GetEvent())
	}
}

// normalized drops what differs between runs of the same history: times and batch ids.
func normalized(evs []*toolsdv1.SessionEvent) []*toolsdv1.SessionEvent {
	out := make([]*toolsdv1.SessionEvent, len(evs))
	for i, ev := range evs {
		c := proto.Clone(ev).(*toolsdv1.SessionEvent)
		c.Time, c.BatchId = nil, ""
		out[i] = c
	}
	return out
}

// checkConsistent checks that evs are seqs from..from+len-1 and that every result cites
// an earlier tool/call of its call id among them (when that call is at or after from).
func checkConsistent(t *testing.T, what string, evs []*toolsdv1.SessionEvent, from uint64) {
	t.Helper()
	calls := map[uint64]string{}
	for i, ev := range evs {
		if want := from + uint64(i); ev.GetSeq() != want {
			t.Fatalf("%s: event %d has seq %d, want %d", what, i, ev.GetSeq(), want)
		}
		switch ev.GetType() {
		case "tool/call":
			calls[ev.GetSeq()] = ev.GetToolCall().GetCallId()
		case "tool/result":
			src := ev.GetSourceEventSeqs()
			if len(src) != 1 || src[0] >= ev.GetSeq() {
				t.Fatalf("%s: result %d cites %v", what, ev.GetSeq(), src)
			}
			if src[0] < from {
				continue
			}
			if id, ok := calls[src[0]]; !ok || id != ev.GetToolResult().GetMessage().GetCallId() {
				t.Fatalf("%s: result %d (call id %q) cites seq %d, which is not its call", what, ev.GetSeq(), ev.GetToolResult().GetMessage().GetCallId(), src[0])
			}
		}
	}
}

// TestReadSessionIsTheSameFromEveryStore runs one history on each store and reads it
// back over gRPC whole and in ranges: every store must give the same events, with
// dense seqs, and results of megabytes neither skipped nor repeated.
func TestReadSessionIsTheSameFromEveryStore(t *testing.T) {
	const id = "s-stores"
	batches := []*toolsdv1.Batch{
		{SessionId: id, Turn: 1, Calls: []*toolsdv1.ToolCall{
			call("b0", "big", `{"size":2097152,"label":"b0"}`), // 2 MiB: most of a page after small ones
			call("b1", "big", `{"size":10,"label":"b1"}`),
			call("u0", "nope", `{}`),
			call("b2", "big", `{"size":1048576,"label":"b2"}`),
		}},
	}
	for step := range uint64(3) { // 768 small events: more than the first two pages (4, 512)
		b := &toolsdv1.Batch{SessionId: id, Turn: 2, Step: step}
		for i := range 128 {
			b.Calls = append(b.Calls, call(fmt.Sprintf("s%d-%d", step, i), "big", fmt.Sprintf(`{"size":%d,"label":"s%d-%d"}`, 1+i*7, step, i)))
		}
		batches = append(batches, b)
	}
	batches = append(batches, &toolsdv1.Batch{SessionId: id, Turn: 3, Calls: []*toolsdv1.ToolCall{
		call("b3", "big", `{"size":1048576,"label":"b3"}`), // large ones after many small ones
		call("b4", "big", `{"size":20,"label":"b4"}`),
	}})
	total := 0
	for _, b := range batches {
		total += 2 * len(b.Calls)
	}

	var (
		first     string
		reference []*toolsdv1.SessionEvent
	)
	for name, text := range storeConfigs(t) {
		e := startText(t, text)
		runProvider(t, e.app.Addr(), bigTool())
		for _, b := range batches {
			e.mustExecute(t, b, batchOptions{callOpts: []grpc.CallOption{grpc.MaxCallRecvMsgSize(32 << 20)}})
		}
		all, err := readRange(e, id, 0, 0)
		if err != nil {
			t.Fatalf("%s: ReadSession(%s) = %v", name, id, err)
		}
		if len(all) != total {
			t.Fatalf("%s: ReadSession(%s) returned %d events, want %d", name, id, len(all), total)
		}
		checkConsistent(t, name, all, 1)
		got := normalized(all)
		if reference == nil {
			first, reference = name, got
		} else if !sameEvents(reference, got) {
			diff := cmp.Diff(reference, got, protocmp.Transform())
			t.Errorf("ReadSession(%s) from %s differs from %s (-%s +%s):\n%.2000s", id, name, first, first, name, diff)
		}

		n := uint64(total)
		for _, r := range []struct {
			from  uint64
			limit uint32
		}{
			{0, 1}, {1, 1}, {1, 2}, {2, 3}, {3, 5}, {4, 1}, {5, 600}, {7, 1000}, {n, 0}, {n, 1}, {n, math.MaxUint32},
			{n + 1, 0}, {n + 1, 5}, {math.MaxUint64, 0}, {math.MaxUint64, math.MaxUint32}, {0, math.MaxUint32}, {n - 1, 0},
		} {
			evs, err := readRange(e, id, r.from, r.limit)
			if err != nil {
				t.Fatalf("%s: ReadSession(from %d, limit %d) = %v", name, r.from, r.limit, err)
			}
			lo := min(max(r.from, 1)-1, n)
			hi := n
			if r.limit > 0 {
				hi = min(n, lo+uint64(r.limit))
			}
			if sameEvents(all[lo:hi], evs) {
				continue // cmp.Diff through protocmp is slow: only for the message
			}
			if diff := cmp.Diff(all[lo:hi], evs, protocmp.Transform(), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s: ReadSession(from %d, limit %d) (-want +got):\n%.2000s", name, r.from, r.limit, diff)
			}
		}
	}
}

// TestReadSessionShowsRecoveredResultsOnce: a call a crash left open gets one synthetic
// ABORTED result marked recovered at the next start, and no more at the one after.
func TestReadSessionShowsRecoveredResultsOnce(t *testing.T) {
	for _, store := range []string{"bolt", "journal"} {
		t.Run(store, func(t *testing.T) {
			dir := t.TempDir()
			open := func() (session.Store, error) {
				if store == "bolt" {
					return session.Open(dir, session.WithDurability(session.SyncNone))
				}
				return session.OpenJournal(dir, session.WithDurability(session.SyncNone))
			}
			s, err := open()
			if err != nil {
				t.Fatalf("open %s = %v", store, err)
			}
			// What a crash leaves: two calls logged, one of them answered.
			if _, err := s.Append(context.Background(), "s-crash",
				session.Event{Type: session.TypeToolCall, BatchID: "b", Call: &session.CallRecord{CallID: "c0", Name: "t", Arguments: `{}`}},
				session.Event{Type: session.TypeToolCall, BatchID: "b", Call: &session.CallRecord{CallID: "c1", Name: "t", Arguments: `{}`}},
			); err != nil {
				t.Fatalf("Append() = %v", err)
			}
			if _, err := s.Append(context.Background(), "s-crash",
				session.Event{Type: session.TypeToolResult, BatchID: "b", SourceSeqs: []uint64{1}, Result: &session.ResultRecord{CallID: "c0", Content: "ok"}},
			); err != nil {
				t.Fatalf("Append() = %v", err)
			}
			if err := s.Close(); err != nil {
				t.Fatalf("Close() = %v", err)
			}

			text := fmt.Sprintf("listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\nsession: {store: %s, durability: nosync}\ndata_dir: %s\n", store, dir)
			var runs [][]*toolsdv1.SessionEvent
			for range 2 {
				cfg, err := config.Parse([]byte(text), "test.yaml")
				if err != nil {
					t.Fatalf("config.Parse() = %v", err)
				}
				a, stop, runErr := runApp(t, cfg)
				conn := dial(t, a.Addr())
				e := &env{app: a, conn: conn, tools: toolsdv1.NewToolServiceClient(conn)}
				evs := e.readSession(t, "s-crash")
				stop()
				if err := <-runErr; err != nil {
					t.Fatalf("App.Run() = %v", err)
				}
				runs = append(runs, evs)
			}
			for i, evs := range runs {
				checkConsistent(t, fmt.Sprint("run ", i), evs, 1)
				if len(evs) != 4 {
					t.Fatalf("run %d: ReadSession(s-crash) = %d events, want 4: %v", i, len(evs), evs)
				}
				r := evs[3].GetToolResult()
				if !r.GetRecovered() || r.GetError().GetCode() != "ABORTED" || r.GetMessage().GetCallId() != "c1" || evs[3].GetSourceEventSeqs()[0] != 2 {
					t.Errorf("run %d: event 4 = %v, want c1's recovered ABORTED result", i, evs[3])
				}
				if evs[2].GetToolResult().GetRecovered() {
					t.Errorf("run %d: c0's own result is flagged recovered", i)
				}
			}
			if diff := cmp.Diff(runs[0], runs[1], protocmp.Transform()); diff != "" {
				t.Errorf("ReadSession(s-crash) changed across a restart (-first +second):\n%s", diff)
			}
		})
	}
}

// TestReadSessionWhileAppending reads a session over and over while batches append to
// it: every read is a consistent prefix (dense seqs from 1, no result without its
// call), on every store.
func TestReadSessionWhileAppending(t *testing.T) {
	for name, text := range storeConfigs(t) {
		t.Run(name, func(t *testing.T) {
			e := startText(t, text)
			runProvider(t, e.app.Addr(), bigTool())
			done := make(chan struct{})
			reads := make(chan error, 1)
			go func() {
				var prev int
				for {
					select {
					case <-done:
						reads <- nil
						return
					default:
					}
					evs, err := readRange(e, "s-live", 0, 0)
					if err != nil {
						reads <- err
						return
					}
					if len(evs) < prev {
						reads <- fmt.Errorf("a read returned %d events after one returned %d", len(evs), prev)
						return
					}
					prev = len(evs)
					for i, ev := range evs {
						if ev.GetSeq() != uint64(i+1) {
							reads <- fmt.Errorf("event %d has seq %d", i, ev.GetSeq())
							return
						}
						if src := ev.GetSourceEventSeqs(); ev.GetType() == "tool/result" &&
							(len(src) != 1 || src[0] >= ev.GetSeq() || evs[src[0]-1].GetToolCall().GetCallId() != ev.GetToolResult().GetMessage().GetCallId()) {
							reads <- fmt.Errorf("result %d cites %v, not its call", ev.GetSeq(), src)
							return
						}
					}
				}
			}()
			for step := range uint64(4) {
				b := &toolsdv1.Batch{SessionId: "s-live", Step: step}
				for i := range 64 {
					b.Calls = append(b.Calls, call(fmt.Sprintf("c%d-%d", step, i), "big", fmt.Sprintf(`{"size":%d,"label":"x"}`, 1+i*997)))
				}
				e.mustExecute(t, b, batchOptions{})
			}
			close(done)
			if err := <-reads; err != nil {
				t.Fatalf("ReadSession(s-live) while appending: %v", err)
			}
		})
	}
}

// sameEvents reports whether a and b hold equal events in the same order.
func sameEvents(a, b []*toolsdv1.SessionEvent) bool {
	return slices.EqualFunc(a, b, func(x, y *toolsdv1.SessionEvent) bool { return proto.Equal(x, y) })
}
