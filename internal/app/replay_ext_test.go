package app_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/config"
	"github.com/toolsd/toolsd/pkg/provider"
)

// replayConfig is a toolsd on store (memory, bolt or journal; journal-cold keeps no
// session in memory) whose policy gives the calls of replayBatch each way of ending.
func replayConfig(t *testing.T, store string) string {
	text := `
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
policy:
  rules:
    - {tool: echo, when: 'args.text == "deny"', decision: deny, reason: no deny here}
    - {tool: echo, when: 'args.text == "ask"', decision: ask, reason: asking}
  tools:
    sleep: {timeout: 20ms}
    sized: {max_result_bytes: 1KiB}
`
	switch store {
	case "memory":
		return text + "session: {store: memory}\n"
	case "journal-cold":
		return text + "session: {store: journal, durability: nosync, hot_for: 1ns}\ndata_dir: " + t.TempDir() + "\n"
	case "journal-zero":
		return text + "session: {store: journal, durability: nosync, hot_for: 0s}\ndata_dir: " + t.TempDir() + "\n"
	}
	return text + "session: {store: " + store + ", durability: nosync}\ndata_dir: " + t.TempDir() + "\n"
}

// replayTools are the tools of replayBatch.
func replayTools() []provider.Tool {
	return []provider.Tool{
		echoTool(),
		sizedTool("sized"),
		provider.NewTool("fail", "Fails.", func(context.Context, provider.Call, struct{}) (string, error) {
			return "", errors.New("it broke")
		}),
		provider.NewTool("sleep", "Sleeps until cancelled.", func(ctx context.Context, _ provider.Call, _ struct{}) (string, error) {
			<-ctx.Done()
			return "", ctx.Err()
		}),
		provider.NewTool("rich", "Answers with everything.", func(_ context.Context, c provider.Call, _ struct{}) (provider.Result, error) {
			c.Progress("half way", 1, 2)
			return provider.Result{Content: "rich content", Value: map[string]int{"n": 1}, Meta: map[string]string{"m": "v"}, ConcludesTurn: true}, nil
		}),
	}
}

// replayBatch ends its calls in every way a batch can: success, UNKNOWN_TOOL,
// INVALID_ARGUMENTS, TOOL_ERROR, DENIED, approved, APPROVAL_DENIED, TOOL_TIMEOUT,
// RESULT_TOO_LARGE, and a result a post-execute hook replaced and added contexts to.
func replayBatch(id string) *toolsdv1.Batch {
	return &toolsdv1.Batch{SessionId: id, Turn: 3, Step: 7, Calls: []*toolsdv1.ToolCall{
		call("ok", "echo", `{"text":"hello"}`),
		call("unknown", "nope", `{}`),
		call("bad-json", "echo", `{"text":`),
		call("fail", "fail", `{}`),
		call("deny", "echo", `{"text":"deny"}`),
		call("ask-yes", "echo", `{"text":"ask"}`),
		call("ask-no", "echo", `{"text":"ask"}`),
		call("timeout", "sleep", `{}`),
		call("too-large", "sized", `{"bytes":5000}`),
		call("rich", "rich", `{}`),
		call("rewritten", "echo", `{"text":"rewrite me"}`),
	}}
}

// replayHook replaces the content of echo's "rewrite me" and adds two contexts to it,
// and one to rich's result.
func replayHook(t *testing.T, e *env) {
	answerHook(t, dial(t, e.app.Addr()), &toolsdv1.HookHello{
		Name:          "rewriter",
		Subscriptions: []*toolsdv1.HookSubscription{{Stage: toolsdv1.HookStage_HOOK_STAGE_POST_EXECUTE}},
	}, func(req *toolsdv1.HookRequest) *toolsdv1.HookDecision {
		d := &toolsdv1.HookDecision{RequestId: req.GetRequestId()}
		switch req.GetCall().GetCallId() {
		case "rewritten":
			content := "rewritten by the hook"
			d.Verdict, d.ReplaceContent, d.AddContext = toolsdv1.HookVerdict_HOOK_VERDICT_REPLACE, &content, []string{"first context", "second context"}
		case "rich":
			d.AddContext = []string{"rich context"}
		}
		return d
	})
	hooksConnected(t, e)
}

// checkReplay checks that the log of session id is exactly what out delivered: each
// call's tool/call at its accepted seq, each result at its seq citing its call with
// the content, error, meta and concludes_turn the client got, and the settled contexts
// as user/message events citing their results, in order, with no other event.
func checkReplay(t *testing.T, b *toolsdv1.Batch, out *outcome, log []*toolsdv1.SessionEvent) {
	t.Helper()
	bySeq := map[uint64]*toolsdv1.SessionEvent{}
	for _, ev := range log {
		bySeq[ev.GetSeq()] = ev
	}
	seen := map[uint64]bool{}
	at := func(what string, seq uint64, typ string) *toolsdv1.SessionEvent {
		ev := bySeq[seq]
		if ev == nil || ev.GetType() != typ {
			t.Fatalf("%s: the log has %v at seq %d, want a %s", what, ev, seq, typ)
		}
		if ev.GetBatchId() != out.accepted.GetBatchId() || ev.GetTurn() != b.GetTurn() || ev.GetStep() != b.GetStep() {
			t.Errorf("%s: seq %d is of batch %q, turn %d, step %d; want %q, %d, %d", what, seq,
				ev.GetBatchId(), ev.GetTurn(), ev.GetStep(), out.accepted.GetBatchId(), b.GetTurn(), b.GetStep())
		}
		seen[seq] = true
		return ev
	}
	if len(out.accepted.GetCallSeqs()) != len(b.GetCalls()) || len(out.results) != len(b.GetCalls()) {
		t.Fatalf("accepted %d call seqs and %d results for %d calls", len(out.accepted.GetCallSeqs()), len(out.results), len(b.GetCalls()))
	}
	for i, c := range b.GetCalls() {
		ev := at("call "+c.GetCallId(), out.accepted.GetCallSeqs()[i], "tool/call")
		want := &toolsdv1.ToolCallRecord{CallId: c.GetCallId(), Name: c.GetName(), ArgumentsJson: c.GetArgumentsJson()}
		if diff := cmp.Diff(want, ev.GetToolCall(), protocmp.Transform()); diff != "" {
			t.Errorf("call %s's tool/call (-sent +logged):\n%s", c.GetCallId(), diff)
		}
	}
	resultSeq := map[string]uint64{}
	for i, r := range out.results {
		what := "result " + r.GetCallId()
		if r.GetIndex() != uint32(i) || r.GetCallId() != b.GetCalls()[i].GetCallId() || r.GetCallSeq() != out.accepted.GetCallSeqs()[i] {
			t.Errorf("%s: index %d, call seq %d; want %d, %d", what, r.GetIndex(), r.GetCallSeq(), i, out.accepted.GetCallSeqs()[i])
		}
		ev := at(what, r.GetSeq(), "tool/result")
		if !slices.Equal(ev.GetSourceEventSeqs(), []uint64{r.GetCallSeq()}) {
			t.Errorf("%s: logged citing %v, want [%d]", what, ev.GetSourceEventSeqs(), r.GetCallSeq())
		}
		want := &toolsdv1.ToolResultRecord{
			Message:       &toolsdv1.ToolResultMessage{CallId: r.GetCallId(), Content: r.GetContent(), IsError: r.GetIsError()},
			Error:         r.GetError(),
			MetaJson:      r.GetMetaJson(),
			ConcludesTurn: r.GetConcludesTurn(),
		}
		if diff := cmp.Diff(want, ev.GetToolResult(), protocmp.Transform()); diff != "" {
			t.Errorf("%s (-delivered +logged):\n%s", what, diff)
		}
		resultSeq[r.GetCallId()] = r.GetSeq()
	}
	var logged []string
	for _, ev := range log {
		if ev.GetType() != "user/message" {
			continue
		}
		seen[ev.GetSeq()] = true
		logged = append(logged, ev.GetUserMessage().GetContent())
		src := ev.GetSourceEventSeqs()
		if len(src) != 1 || bySeq[src[0]].GetType() != "tool/result" {
			t.Errorf("context %q cites %v, not a result", ev.GetUserMessage().GetContent(), src)
		}
	}
	if diff := cmp.Diff(out.settled.GetAdditionalContexts(), logged); diff != "" {
		t.Errorf("additional contexts (-settled +logged):\n%s", diff)
	}
	for _, ev := range log {
		if !seen[ev.GetSeq()] {
			t.Errorf("the log holds %s at seq %d, which the client never got: %v", ev.GetType(), ev.GetSeq(), ev)
		}
	}
}

// TestReplayIsWhatTheClientGot runs batches whose calls end in every way (then one
// cancelled mid-way, and one whose provider goes) on each store and checks that
// ReadSession gives back exactly what ExecuteBatch delivered; batches refused whole
// leave nothing.
func TestReplayIsWhatTheClientGot(t *testing.T) {
	for _, store := range []string{"memory", "bolt", "journal", "journal-cold", "journal-zero"} {
		t.Run(store, func(t *testing.T) {
			const id = "s-replay"
			e := startText(t, replayConfig(t, store))
			runProvider(t, e.app.Addr(), replayTools()...)
			replayHook(t, e)
			b := replayBatch(id)
			out := e.mustExecute(t, b, batchOptions{approve: func(r *toolsdv1.ApprovalRequest) *toolsdv1.ApprovalDecision {
				return &toolsdv1.ApprovalDecision{CallId: r.GetCallId(), RequestId: r.GetRequestId(), Approved: r.GetCallId() == "ask-yes", Reason: "said " + r.GetCallId()}
			}})
			want := []string{"", "UNKNOWN_TOOL", "INVALID_ARGUMENTS", "TOOL_ERROR", "DENIED", "", "APPROVAL_DENIED", "TOOL_TIMEOUT", "RESULT_TOO_LARGE", "", ""}
			if diff := cmp.Diff(want, resultCodes(out.results)); diff != "" {
				t.Fatalf("codes (-want +got):\n%s", diff)
			}
			log := e.readSession(t, id)
			checkConsistent(t, store, log, 1)
			checkReplay(t, b, out, log)
			if n := len(log); n != 2*len(b.GetCalls())+3 {
				t.Errorf("the log holds %d events, want %d", n, 2*len(b.GetCalls())+3)
			}

			// A batch cancelled mid-way, and one whose provider goes.
			started, stopped := make(chan string, 4), make(chan string, 4)
			_, stopBlock := runProvider(t, e.app.Addr(), blockTool("block", started, stopped))
			b = &toolsdv1.Batch{SessionId: id, Turn: 4, MaxParallel: 1, Calls: []*toolsdv1.ToolCall{
				call("c0", "block", `{"label":"first"}`), call("c1", "block", `{"label":"second"}`), call("c2", "echo", `{"text":"x"}`),
			}}
			out = e.mustExecute(t, b, batchOptions{onAccepted: func(s toolsdv1.ToolService_ExecuteBatchClient) {
				<-started
				_ = s.Send(&toolsdv1.ExecuteBatchRequest{Msg: &toolsdv1.ExecuteBatchRequest_Cancel{Cancel: &toolsdv1.CancelBatch{Reason: "stop"}}})
			}})
			if diff := cmp.Diff([]string{"ABORTED", "ABORTED_BEFORE_DISPATCH", "ABORTED_BEFORE_DISPATCH"}, resultCodes(out.results)); diff != "" {
				t.Fatalf("cancelled batch's codes (-want +got):\n%s", diff)
			}
			<-stopped
			log = e.readSession(t, id)
			checkConsistent(t, store, log, 1)
			checkReplay(t, b, out, log[2*len(replayBatch(id).GetCalls())+3:])

			go func() {
				<-started
				stopBlock()
			}()
			b = &toolsdv1.Batch{SessionId: id, Turn: 5, Calls: []*toolsdv1.ToolCall{call("gone", "block", `{"label":"x"}`), call("after", "echo", `{"text":"y"}`)}}
			before := len(log)
			out = e.mustExecute(t, b, batchOptions{})
			if diff := cmp.Diff([]string{"PROVIDER_GONE", ""}, resultCodes(out.results)); diff != "" {
				t.Fatalf("provider gone batch's codes (-want +got):\n%s", diff)
			}
			log = e.readSession(t, id)
			checkConsistent(t, store, log, 1)
			checkReplay(t, b, out, log[before:])

			// Refused batches log nothing.
			before = len(log)
			for _, bad := range []*toolsdv1.Batch{
				{SessionId: id, Calls: []*toolsdv1.ToolCall{call("d", "echo", `{}`), call("d", "echo", `{}`)}},
				{SessionId: id, Calls: []*toolsdv1.ToolCall{call("", "echo", `{}`)}},
				{SessionId: id},
			} {
				if _, err := e.execute(t, bad, batchOptions{}); err == nil {
					t.Errorf("ExecuteBatch(%v) succeeded, want it refused", bad)
				}
			}
			if log = e.readSession(t, id); len(log) != before {
				t.Errorf("refused batches left %d events in the log", len(log)-before)
			}
		})
	}
}

// readEpochs reads a session whole and returns its events and the epoch of each.
func readEpochs(t *testing.T, e *env, id string) ([]*toolsdv1.SessionEvent, []uint64) {
	t.Helper()
	stream, err := e.tools.ReadSession(t.Context(), &toolsdv1.ReadSessionRequest{SessionId: id})
	if err != nil {
		t.Fatalf("ReadSession(%s) = %v", id, err)
	}
	var (
		evs    []*toolsdv1.SessionEvent
		epochs []uint64
	)
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return evs, epochs
		}
		if err != nil {
			t.Fatalf("ReadSession(%s) = %v", id, err)
		}
		evs, epochs = append(evs, m.GetEvent()), append(epochs, m.GetEpoch())
	}
}

// TestReplayIsTheSameAfterARestart: a durable store's log, read after a restart, is the
// one read before it, event for event and epoch for epoch, and the session goes on from
// its next seq in the same epoch.
func TestReplayIsTheSameAfterARestart(t *testing.T) {
	for _, store := range []string{"bolt", "journal"} {
		t.Run(store, func(t *testing.T) {
			const id = "s-restart"
			cfg, err := config.Parse([]byte(replayConfig(t, store)), "test.yaml")
			if err != nil {
				t.Fatal(err)
			}
			var logs [][]*toolsdv1.SessionEvent
			var epochs [][]uint64
			for life := range 2 {
				a, stop, runErr := runApp(t, cfg)
				conn := dial(t, a.Addr())
				e := &env{app: a, conn: conn, tools: toolsdv1.NewToolServiceClient(conn)}
				_, stopTools := runProvider(t, a.Addr(), replayTools()...)
				if life == 0 {
					replayHook(t, e)
					e.mustExecute(t, replayBatch(id), batchOptions{approve: func(r *toolsdv1.ApprovalRequest) *toolsdv1.ApprovalDecision {
						return &toolsdv1.ApprovalDecision{CallId: r.GetCallId(), RequestId: r.GetRequestId(), Approved: true}
					}})
				}
				evs, eps := readEpochs(t, e, id)
				logs, epochs = append(logs, evs), append(epochs, eps)
				if life == 1 {
					b := &toolsdv1.Batch{SessionId: id, Turn: 9, Calls: []*toolsdv1.ToolCall{call("next", "echo", `{"text":"z"}`)}}
					out := e.mustExecute(t, b, batchOptions{})
					all, eps := readEpochs(t, e, id)
					checkConsistent(t, "after the restart", all, 1)
					checkReplay(t, b, out, all[len(evs):])
					if eps[len(eps)-1] != eps[0] {
						t.Errorf("epoch after the restart = %d, want %d", eps[len(eps)-1], eps[0])
					}
				}
				stopTools()
				stop()
				if err := <-runErr; err != nil {
					t.Fatalf("App.Run() = %v", err)
				}
			}
			if diff := cmp.Diff(logs[0], logs[1], protocmp.Transform()); diff != "" {
				t.Errorf("ReadSession changed across a restart (-before +after):\n%s", diff)
			}
			if diff := cmp.Diff(epochs[0], epochs[1]); diff != "" {
				t.Errorf("epochs changed across a restart (-before +after):\n%s", diff)
			}
		})
	}
}

// watchUntil watches session id from seq from until it has n events, and returns them.
func watchUntil(ctx context.Context, e *env, id string, from uint64, n int) ([]*toolsdv1.SessionEvent, error) {
	stream, err := e.tools.WatchSession(ctx, &toolsdv1.WatchSessionRequest{SessionId: id, FromSeq: from})
	if err != nil {
		return nil, err
	}
	var evs []*toolsdv1.SessionEvent
	for len(evs) < n {
		m, err := stream.Recv()
		if err != nil {
			return evs, err
		}
		evs = append(evs, m.GetEvent())
	}
	return evs, nil
}

// TestWatchIsTheReadWhileAppending: watches started while batches append to a session,
// from its start and from the middle, get exactly the events a read gets afterwards, on
// every store.
func TestWatchIsTheReadWhileAppending(t *testing.T) {
	for _, store := range []string{"memory", "bolt", "journal", "journal-cold", "journal-zero"} {
		t.Run(store, func(t *testing.T) {
			const id, batches, calls = "s-watch", 8, 8
			e := startText(t, replayConfig(t, store))
			runProvider(t, e.app.Addr(), replayTools()...)
			total := batches * calls * 2
			type watched struct {
				from uint64
				evs  []*toolsdv1.SessionEvent
				err  error
			}
			results := make(chan watched, 2*batches)
			for k := range batches {
				for _, from := range []uint64{1, uint64(k*calls*2 + 1)} {
					go func() {
						evs, err := watchUntil(t.Context(), e, id, from, total-int(from)+1)
						results <- watched{from, evs, err}
					}()
				}
				b := &toolsdv1.Batch{SessionId: id, Step: uint64(k)}
				for i := range calls {
					b.Calls = append(b.Calls, call(fmt.Sprintf("c%d-%d", k, i), "echo", fmt.Sprintf(`{"text":"%d"}`, i)))
				}
				e.mustExecute(t, b, batchOptions{})
			}
			all := e.readSession(t, id)
			if len(all) != total {
				t.Fatalf("ReadSession = %d events, want %d", len(all), total)
			}
			for range 2 * batches {
				w := <-results
				if w.err != nil {
					t.Fatalf("watch from %d = %v after %d events", w.from, w.err, len(w.evs))
				}
				if !sameEvents(all[w.from-1:], w.evs) {
					t.Errorf("watch from %d differs from the read:\n%.3000s", w.from, cmp.Diff(all[w.from-1:], w.evs, protocmp.Transform()))
				}
			}
		})
	}
}
