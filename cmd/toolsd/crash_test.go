package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/pkg/provider"
)

type labelArgs struct {
	Label string `json:"label"`
}

// ledger counts every run of every call by label ("session/call_id"), across toolsd
// restarts: it lives in the test process, like the provider.
type ledger struct {
	mu      sync.Mutex
	runs    map[string]int
	blocked map[string]bool
}

func newLedger() *ledger { return &ledger{runs: map[string]int{}, blocked: map[string]bool{}} }

// tools are "fast" (answers at once) and "block" (waits until cancelled).
func (l *ledger) tools() []provider.Tool {
	fast := provider.NewTool("fast", "Answers at once.", func(_ context.Context, _ provider.Call, a labelArgs) (string, error) {
		l.mu.Lock()
		l.runs[a.Label]++
		l.mu.Unlock()
		return "fast:" + a.Label, nil
	})
	block := provider.NewTool("block", "Blocks until cancelled.", func(ctx context.Context, _ provider.Call, a labelArgs) (string, error) {
		l.mu.Lock()
		l.runs[a.Label]++
		l.blocked[a.Label] = true
		l.mu.Unlock()
		<-ctx.Done()
		l.mu.Lock()
		l.blocked[a.Label] = false
		l.mu.Unlock()
		return "", ctx.Err()
	})
	return []provider.Tool{fast, block}
}

func (l *ledger) count(label string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.runs[label]
}

func (l *ledger) isBlocked(labels ...string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range labels {
		if !l.blocked[s] {
			return false
		}
	}
	return true
}

func (l *ledger) snapshot() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.runs)
}

// clientView is what the agent side was told, across restarts: the call seqs of each
// accepted batch and every result received on a stream.
type clientView struct {
	mu       sync.Mutex
	calls    map[string]map[uint64]string               // session → call seq → call id
	results  map[string]map[string]*toolsdv1.ToolResult // session → call id → result
	sessions map[string]bool
	epochs   map[string]uint64 // session → the epoch ReadSession first gave it
	wg       sync.WaitGroup
}

func newClientView() *clientView {
	return &clientView{calls: map[string]map[uint64]string{}, results: map[string]map[string]*toolsdv1.ToolResult{}, sessions: map[string]bool{}, epochs: map[string]uint64{}}
}

func (v *clientView) received(session string, callIDs ...string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, id := range callIDs {
		if v.results[session][id] == nil {
			return false
		}
	}
	return true
}

// batchRun is one ExecuteBatch stream run in the background.
type batchRun struct {
	accepted chan struct{} // closed when the plan is durable
	done     chan struct{} // closed when the stream ended
	err      error         // the stream's end (nil: it settled and ended cleanly)
	settled  bool
}

// batch builds a batch; each call is "tool:id" and carries the label session/id.
func batch(session string, turn uint64, maxParallel uint32, calls ...string) *toolsdv1.Batch {
	b := &toolsdv1.Batch{SessionId: session, Turn: turn, MaxParallel: maxParallel}
	for _, c := range calls {
		name, id, _ := strings.Cut(c, ":")
		b.Calls = append(b.Calls, &toolsdv1.ToolCall{CallId: id, Name: name, ArgumentsJson: fmt.Sprintf(`{"label":%q}`, session+"/"+id)})
	}
	return b
}

// run starts b on its own stream and records what the client is told.
func (v *clientView) run(c toolsdv1.ToolServiceClient, b *toolsdv1.Batch) *batchRun {
	r := &batchRun{accepted: make(chan struct{}), done: make(chan struct{})}
	v.mu.Lock()
	v.sessions[b.GetSessionId()] = true
	v.mu.Unlock()
	v.wg.Add(1)
	go func() {
		defer v.wg.Done()
		defer close(r.done)
		r.err = v.stream(c, b, r)
	}()
	return r
}

func (v *clientView) stream(c toolsdv1.ToolServiceClient, b *toolsdv1.Batch, r *batchRun) error {
	acceptedOnce := sync.OnceFunc(func() { close(r.accepted) })
	defer acceptedOnce()
	stream, err := c.ExecuteBatch(context.Background())
	if err != nil {
		return err
	}
	if err := stream.Send(&toolsdv1.ExecuteBatchRequest{Msg: &toolsdv1.ExecuteBatchRequest_Batch{Batch: b}}); err != nil {
		return err
	}
	if err := stream.CloseSend(); err != nil {
		return err
	}
	s := b.GetSessionId()
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		v.mu.Lock()
		switch msg := m.GetMsg().(type) {
		case *toolsdv1.ExecuteBatchResponse_Accepted:
			if v.calls[s] == nil {
				v.calls[s] = map[uint64]string{}
			}
			for i, seq := range msg.Accepted.GetCallSeqs() {
				v.calls[s][seq] = b.GetCalls()[i].GetCallId()
			}
		case *toolsdv1.ExecuteBatchResponse_Result:
			if v.results[s] == nil {
				v.results[s] = map[string]*toolsdv1.ToolResult{}
			}
			v.results[s][msg.Result.GetCallId()] = msg.Result
		case *toolsdv1.ExecuteBatchResponse_Settled:
			r.settled = true
		}
		v.mu.Unlock()
		if m.GetAccepted() != nil {
			acceptedOnce()
		}
	}
}

// TestKillNineLosesNothing kills toolsd with SIGKILL while batches run, three times at
// different points, and checks after each restart on the same data directory that the
// session log holds every result a client was told about, exactly one result per call,
// and a synthetic ABORTED result (recovered) for every interrupted call, which was never
// run again; and that every event of a session reads with the epoch it had before the
// restarts, which a read resumed with expect_epoch accepts.
func TestKillNineLosesNothing(t *testing.T) {
	for _, store := range []string{"bolt", "journal"} {
		t.Run(store, func(t *testing.T) { testKillNine(t, store) })
	}
}

func testKillNine(t *testing.T, store string) {
	dataDir := t.TempDir()
	led := newLedger()
	view := newClientView()

	rounds := []struct {
		name string
		// load starts batches on a fresh toolsd and kills it; it returns the calls whose
		// recovery is certain (session → call ids).
		load func(t *testing.T, d *daemon, c toolsdv1.ToolServiceClient) map[string][]string
	}{
		{"mid-batch", func(t *testing.T, d *daemon, c toolsdv1.ToolServiceClient) map[string][]string {
			view.run(c, batch("s1", 1, 0, "fast:a", "fast:b", "block:c", "fast:d"))
			view.run(c, batch("s2", 1, 1, "fast:a", "block:b", "fast:c"))
			view.run(c, batch("s3", 1, 0, "block:a", "block:b"))
			waitFor(t, "the first results and the blocking calls", func() bool {
				return view.received("s1", "a", "b") && view.received("s2", "a") &&
					led.isBlocked("s1/c", "s2/b", "s3/a", "s3/b") && led.count("s1/d") == 1
			})
			d.kill(t)
			if n := led.count("s2/c"); n != 0 {
				t.Errorf("s2/c ran %d times before the kill, want 0 (it waits behind s2/b)", n)
			}
			return map[string][]string{"s1": {"c", "d"}, "s2": {"b", "c"}, "s3": {"a", "b"}}
		}},
		{"during a stream of batches", func(t *testing.T, d *daemon, c toolsdv1.ToolServiceClient) map[string][]string {
			// The interrupted session carries on after the restart.
			if r := view.run(c, batch("s1", 2, 0, "fast:e", "fast:f")); !waitDone(r) {
				t.Fatalf("s1 turn 2 = %v, want settled", r.err)
			}
			view.run(c, batch("s5", 1, 0, "block:x"))
			var churned atomic.Int64
			view.wg.Add(1)
			go func() {
				defer view.wg.Done()
				for k := 0; ; k++ {
					ids := make([]string, 4)
					for j := range ids {
						ids[j] = fmt.Sprintf("fast:k%d-%d", k, j)
					}
					if !waitDone(view.run(c, batch("s4", uint64(k+1), 0, ids...))) {
						return
					}
					churned.Add(1)
				}
			}()
			waitFor(t, "batches to flow", func() bool { return churned.Load() >= 3 && led.isBlocked("s5/x") })
			d.kill(t)
			return map[string][]string{"s5": {"x"}}
		}},
		{"right after accepted", func(t *testing.T, d *daemon, c toolsdv1.ToolServiceClient) map[string][]string {
			r := view.run(c, batch("s6", 1, 1, "block:a", "fast:b"))
			<-r.accepted
			view.run(c, batch("s7", 1, 0, "fast:a", "fast:b")) // races the kill
			d.kill(t)
			// Neither call of s6 can have a result: b waits behind a, which blocks.
			return map[string][]string{"s6": {"a", "b"}}
		}},
	}

	var (
		atKill         map[string]int
		wantRecovered  map[string][]string
		recoveredSoFar int
	)
	for i := 0; i <= len(rounds); i++ {
		d := startDaemon(t, "-data-dir", dataDir, "-session-store", store)
		c := dial(t, d.addr)
		stop := runProvider(t, d.addr, led.tools()...)
		if i > 0 {
			// A call through the restarted daemon: the provider is dispatched to again.
			if r := view.run(c, batch(fmt.Sprintf("probe-%d", i), 1, 0, "fast:p")); !waitDone(r) {
				t.Fatalf("probe batch after restart %d = %v, want settled", i, r.err)
			}
			recovered := verifyLog(t, c, view, led, atKill)
			n := 0
			for _, ids := range recovered {
				n += len(ids)
			}
			if got := recoveredLogged(t, d); got != n-recoveredSoFar {
				t.Errorf("restart %d logged %d recovered calls, want %d", i, got, n-recoveredSoFar)
			}
			t.Logf("restart %d: recovered %v", i, recovered)
			recoveredSoFar = n
			for s, ids := range wantRecovered {
				if diff := cmp.Diff(ids, recovered[s]); diff != "" {
					t.Errorf("after %q, recovered calls of %s (-want +got):\n%s", rounds[i-1].name, s, diff)
				}
			}
		}
		if i == len(rounds) {
			stop()
			break
		}
		t.Logf("round %d: %s", i+1, rounds[i].name)
		wantRecovered = rounds[i].load(t, d, c)
		stop()
		view.wg.Wait()
		atKill = led.snapshot()
	}
}

// waitDone waits for the batch's stream to end and reports whether it settled cleanly.
func waitDone(r *batchRun) bool {
	<-r.done
	return r.err == nil && r.settled
}

// waitAbortedByShutdown waits for the batch's stream to end and reports whether it
// settled and then ended as one the shutdown's abort cut short: UNAVAILABLE, reason
// SHUTTING_DOWN.
func waitAbortedByShutdown(r *batchRun) bool {
	<-r.done
	if !r.settled || status.Code(r.err) != codes.Unavailable {
		return false
	}
	for _, d := range status.Convert(r.err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.GetReason() == "SHUTTING_DOWN"
		}
	}
	return false
}

// recoveredLogged is the number of interrupted calls toolsd said it closed at start-up.
func recoveredLogged(t *testing.T, d *daemon) int {
	t.Helper()
	lines := d.logged("closed calls interrupted by a restart with synthetic ABORTED results")
	if len(lines) == 0 {
		return 0
	}
	n, _ := lines[0]["calls"].(float64)
	return int(n)
}

// verifyLog reads back every session the client used and checks the crash guarantees.
// It returns the recovered call ids per session, in log order.
func verifyLog(t *testing.T, c toolsdv1.ToolServiceClient, view *clientView, led *ledger, atKill map[string]int) map[string][]string {
	t.Helper()
	view.mu.Lock()
	defer view.mu.Unlock()
	recovered := map[string][]string{}
	for _, s := range slices.Sorted(maps.Keys(view.sessions)) {
		events := readLog(t, c, view, s)
		bySeq := map[uint64]*toolsdv1.SessionEvent{}
		resultsFor := map[uint64][]*toolsdv1.SessionEvent{}
		for i, ev := range events {
			if ev.GetSeq() != uint64(i+1) {
				t.Errorf("%s: event %d has seq %d, want dense seqs", s, i, ev.GetSeq())
			}
			bySeq[ev.GetSeq()] = ev
			if ev.GetType() == "tool/result" {
				src := ev.GetSourceEventSeqs()
				if len(src) != 1 {
					t.Errorf("%s: result seq %d cites %v, want one call", s, ev.GetSeq(), src)
					continue
				}
				resultsFor[src[0]] = append(resultsFor[src[0]], ev)
			}
		}
		for _, ev := range events {
			switch ev.GetType() {
			case "tool/call":
				rs := resultsFor[ev.GetSeq()]
				if len(rs) != 1 {
					t.Errorf("%s: call %s (seq %d) has %d results, want exactly 1", s, ev.GetToolCall().GetCallId(), ev.GetSeq(), len(rs))
					continue
				}
				if got, want := rs[0].GetToolResult().GetMessage().GetCallId(), ev.GetToolCall().GetCallId(); got != want {
					t.Errorf("%s: result seq %d answers call id %q, want %q", s, rs[0].GetSeq(), got, want)
				}
			case "tool/result":
				if call := bySeq[ev.GetSourceEventSeqs()[0]]; call.GetType() != "tool/call" {
					t.Errorf("%s: result seq %d cites seq %d, which is not a tool/call", s, ev.GetSeq(), ev.GetSourceEventSeqs()[0])
				}
				tr := ev.GetToolResult()
				if !tr.GetRecovered() {
					continue
				}
				id := tr.GetMessage().GetCallId()
				recovered[s] = append(recovered[s], id)
				if code := tr.GetError().GetCode(); code != "ABORTED" || !tr.GetMessage().GetIsError() || !strings.HasPrefix(tr.GetMessage().GetContent(), "Error: ") {
					t.Errorf("%s: recovered result for %s = %v, want an ABORTED error result", s, id, tr)
				}
				if r := view.results[s][id]; r != nil {
					t.Errorf("%s: call %s was recovered after the client received its result %v", s, id, r)
				}
			}
		}
		// Every plan the client saw acknowledged is in the log at the acknowledged seq.
		for seq, id := range view.calls[s] {
			if ev := bySeq[seq]; ev.GetType() != "tool/call" || ev.GetToolCall().GetCallId() != id {
				t.Errorf("%s: accepted call %s at seq %d, log has %v", s, id, seq, ev)
			}
		}
		// Every result the client received is in the log: same seq, same content.
		for id, r := range view.results[s] {
			ev := bySeq[r.GetSeq()]
			tr := ev.GetToolResult()
			if ev.GetType() != "tool/result" || tr.GetMessage().GetCallId() != id ||
				tr.GetMessage().GetContent() != r.GetContent() || tr.GetMessage().GetIsError() != r.GetIsError() ||
				tr.GetError().GetCode() != r.GetError().GetCode() || !slices.Equal(ev.GetSourceEventSeqs(), []uint64{r.GetCallSeq()}) {
				t.Errorf("%s: client received %v at seq %d, log has %v", s, r, r.GetSeq(), ev)
			}
		}
	}
	// Nothing that ran before a kill ran again after the restart.
	for label, n := range atKill {
		if got := led.count(label); got != n {
			t.Errorf("call %s ran %d times, %d before the restart: it was re-run", label, got, n)
		}
	}
	return recovered
}

// readLog reads session s whole and checks its epochs: one for every event, the same
// after each restart as when first read, and a read resumed from seq 2 with it as
// expect_epoch (which reads seq 1 alone for the epoch, from the file in a cold journal
// session) gets the rest of the log. view.mu is held.
func readLog(t *testing.T, c toolsdv1.ToolServiceClient, view *clientView, s string) []*toolsdv1.SessionEvent {
	t.Helper()
	events, epochs := readSession(t, c, &toolsdv1.ReadSessionRequest{SessionId: s})
	if len(events) == 0 {
		return nil
	}
	epoch, seen := view.epochs[s]
	if !seen {
		epoch = epochs[0]
		view.epochs[s] = epoch
	}
	for i, e := range epochs {
		if e != epoch {
			t.Errorf("%s: event seq %d has epoch %d, want %d (the session's since it was first read)", s, events[i].GetSeq(), e, epoch)
		}
	}
	rest, restEpochs := readSession(t, c, &toolsdv1.ReadSessionRequest{SessionId: s, FromSeq: 2, ExpectEpoch: epoch})
	if len(rest) != len(events)-1 || slices.ContainsFunc(restEpochs, func(e uint64) bool { return e != epoch }) {
		t.Errorf("%s: ReadSession(from 2, expect_epoch %d) = %d events with epochs %v, want %d with that epoch", s, epoch, len(rest), restEpochs, len(events)-1)
	}
	return events
}
