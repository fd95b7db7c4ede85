package node_test

import (
	"encoding/json"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
)

// The tests here run testdata/provider.mjs (provider.mjs with tools only they need)
// against a fake toolsd that they drive message by message, to see exactly what
// provider.mjs sends in cases toolsd cannot be made to produce, or does not show.

// TestNodeProviderAnswersCancelledCalls: a call that stops because toolsd cancelled it
// is answered cancelled and as a failure with a message (so that, were the cancel not
// toolsd's, it could not read as an empty success); a tool that fails on its own after
// the cancel is answered with its failure, not as cancelled.
func TestNodeProviderAnswersCancelledCalls(t *testing.T) {
	_, s := welcomedNode(t, 1<<20, "testdata/provider.mjs")

	s.send(t, execute(1, "wait", `{"ms": 50000}`))
	s.send(t, execute(2, "fail_on_cancel", `{}`))
	for _, id := range []uint64{1, 2} {
		s.next(t, func(m *toolsdv1.ProviderServiceConnectRequest) bool { return m.GetProgress().GetRequestId() == id })
		s.send(t, &toolsdv1.ProviderServiceConnectResponse{Msg: &toolsdv1.ProviderServiceConnectResponse_Cancel{
			Cancel: &toolsdv1.CancelExecution{RequestId: id, Reason: "test"},
		}})
	}
	results := make(map[uint64]*toolsdv1.ExecuteResult)
	for len(results) < 2 {
		r := s.next(t, func(m *toolsdv1.ProviderServiceConnectRequest) bool { return m.GetResult() != nil }).GetResult()
		results[r.GetRequestId()] = r
	}
	if r := results[1]; !r.GetCancelled() || !r.GetIsError() || len(r.GetErrorMessage()) == 0 {
		t.Errorf("result of the cancelled wait = %v, want cancelled, is_error and an error_message", r)
	}
	if r := results[2]; r.GetCancelled() || !r.GetIsError() || string(r.GetErrorMessage()) != "cleanup failed after the cancel" {
		t.Errorf("result of fail_on_cancel = %v, want is_error with its own message and not cancelled", r)
	}
}

// TestNodeProviderRefusesAToolItDoesNotHave: a call for a tool the provider does not
// have (only a broken or hostile toolsd sends one), among them names of members every
// JavaScript object inherits, is answered as a failure naming the provider and the tool,
// as the Go SDK answers it, not with JavaScript's own error text about a missing run.
func TestNodeProviderRefusesAToolItDoesNotHave(t *testing.T) {
	_, s := welcomedNode(t, 1<<20, "provider.mjs")

	names := []string{"nope", "constructor", "__proto__", "toString", "hasOwnProperty", "valueOf"}
	for i, name := range names {
		s.send(t, execute(uint64(i+1), name, `{}`))
	}
	results := make(map[uint64]*toolsdv1.ExecuteResult)
	for len(results) < len(names) {
		r := s.next(t, func(m *toolsdv1.ProviderServiceConnectRequest) bool { return m.GetResult() != nil }).GetResult()
		results[r.GetRequestId()] = r
	}
	for i, name := range names {
		r := results[uint64(i+1)]
		want := `provider "node-example" has no tool "` + name + `"`
		if !r.GetIsError() || r.GetCancelled() || r.GetInvalidArguments() || string(r.GetErrorMessage()) != want {
			t.Errorf("result of a call for %q = %v, want is_error with error_message %q", name, r, want)
		}
	}
}

// TestNodeProviderSurvivesAnUnprintableThrow: a tool that throws a value String()
// cannot print (an object without a prototype, a message getter that throws) fails its
// call with a generic message; the provider keeps serving the calls after it.
func TestNodeProviderSurvivesAnUnprintableThrow(t *testing.T) {
	_, s := welcomedNode(t, 1<<20, "testdata/provider.mjs")

	s.send(t, execute(1, "throw_odd", `{"kind": "null-prototype"}`))
	s.send(t, execute(2, "throw_odd", `{"kind": "getter"}`))
	s.send(t, execute(3, "shout", `{"text": "still here"}`))
	results := make(map[uint64]*toolsdv1.ExecuteResult)
	for len(results) < 3 {
		r := s.next(t, func(m *toolsdv1.ProviderServiceConnectRequest) bool { return m.GetResult() != nil }).GetResult()
		results[r.GetRequestId()] = r
	}
	for id := uint64(1); id <= 2; id++ {
		if r := results[id]; !r.GetIsError() || r.GetCancelled() || string(r.GetErrorMessage()) != "the tool failed" {
			t.Errorf("result %d = %v, want is_error with error_message %q", id, r, "the tool failed")
		}
	}
	if r := results[3]; r.GetIsError() || string(r.GetContent()) != "STILL HERE" {
		t.Errorf("result of the call after them = %v, want STILL HERE", r)
	}
}

// TestNodeProviderIgnoresADuplicateRequestID: an execute whose request id is already in
// flight (only a broken or hostile toolsd sends one) starts nothing and is not
// answered, as the Go SDK ignores it: the first call keeps the id, so toolsd's cancel
// reaches it and its answer is the one sent.
func TestNodeProviderIgnoresADuplicateRequestID(t *testing.T) {
	_, s := welcomedNode(t, 1<<20, "testdata/provider.mjs")

	s.send(t, execute(1, "wait", `{"ms": 50000}`))
	s.next(t, func(m *toolsdv1.ProviderServiceConnectRequest) bool { return m.GetProgress().GetRequestId() == 1 })
	s.send(t, execute(1, "shout", `{"text": "second"}`))
	s.send(t, execute(1, "nope", `{}`))
	s.send(t, &toolsdv1.ProviderServiceConnectResponse{Msg: &toolsdv1.ProviderServiceConnectResponse_Cancel{
		Cancel: &toolsdv1.CancelExecution{RequestId: 1, Reason: "test"},
	}})
	r := s.next(t, func(m *toolsdv1.ProviderServiceConnectRequest) bool { return m.GetResult() != nil }).GetResult()
	if r.GetRequestId() != 1 || !r.GetCancelled() {
		t.Errorf("first result = %v, want request 1's cancelled answer from the first call (wait)", r)
	}
}

// TestNodeProviderDropsProgressAfterACancel: once toolsd has cancelled a call, the
// progress its tool still reports is not sent, as the Go SDK drops it; the call's answer
// is.
func TestNodeProviderDropsProgressAfterACancel(t *testing.T) {
	_, s := welcomedNode(t, 1<<20, "testdata/provider.mjs")

	s.send(t, execute(1, "report_after_cancel", `{}`))
	s.next(t, func(m *toolsdv1.ProviderServiceConnectRequest) bool { return m.GetProgress().GetRequestId() == 1 })
	s.send(t, &toolsdv1.ProviderServiceConnectResponse{Msg: &toolsdv1.ProviderServiceConnectResponse_Cancel{
		Cancel: &toolsdv1.CancelExecution{RequestId: 1, Reason: "test"},
	}})
	// The tool reports its progress before it returns: it would come before the result.
	m := s.next(t, func(m *toolsdv1.ProviderServiceConnectRequest) bool {
		return m.GetProgress() != nil || m.GetResult() != nil
	})
	if p := m.GetProgress(); p != nil {
		t.Errorf("after the cancel the provider sent progress %q, want it dropped", p.GetMessage())
	} else if !m.GetResult().GetCancelled() {
		t.Errorf("result of the cancelled call = %v, want cancelled", m.GetResult())
	}
}

// TestNodeProviderWarnsOfAQuarantinedTool: a registration toolsd accepts but holds
// back (quarantined: registry.pinning is quarantine and the name is pinned to another
// definition) is logged as held back, as the Go SDK warns, not as registered.
func TestNodeProviderWarnsOfAQuarantinedTool(t *testing.T) {
	provider, s := welcomedNode(t, 1<<20, "provider.mjs")

	ref := s.next(t, func(m *toolsdv1.ProviderServiceConnectRequest) bool { return m.GetRegister() != nil }).GetRegister().GetRef()
	s.send(t, &toolsdv1.ProviderServiceConnectResponse{Msg: &toolsdv1.ProviderServiceConnectResponse_RegisterResult{
		RegisterResult: &toolsdv1.RegisterToolsResult{Ref: ref, Tools: []*toolsdv1.ToolRegistrationStatus{
			{Name: "shout", ContentHash: "abc", Quarantined: true},
			{Name: "wait", ContentHash: "def"},
		}},
	}})
	// Both lines are printed for the same answer, shout's first, but to standard error
	// and standard output, which the test reads apart: wait for each.
	provider.waitFor(t, 1, "provider: registered wait")
	provider.stderr.waitForPrefix(t, 1, "provider: shout is held back")
	if out := provider.String(); strings.Contains(out, "provider: registered shout\n") {
		t.Errorf("provider logged the quarantined shout as registered; output:\n%s", out)
	}
}

// TestNodeProviderWarnsOnStderr: what the Go SDK warns of goes to standard error, where
// a user looks for trouble, not to standard output among the routine lines: a tool
// toolsd refused (never called, so this line is all its author sees), one held back by
// pinning. Routine lines (a goodbye, say) stay on standard output.
func TestNodeProviderWarnsOnStderr(t *testing.T) {
	provider, s := welcomedNode(t, 1<<20, "provider.mjs")

	ref := s.next(t, func(m *toolsdv1.ProviderServiceConnectRequest) bool { return m.GetRegister() != nil }).GetRegister().GetRef()
	s.send(t, &toolsdv1.ProviderServiceConnectResponse{Msg: &toolsdv1.ProviderServiceConnectResponse_RegisterResult{
		RegisterResult: &toolsdv1.RegisterToolsResult{Ref: ref, Tools: []*toolsdv1.ToolRegistrationStatus{
			{Name: "shout", ErrorCode: "INVALID_ARGUMENT", ErrorMessage: "registry: invalid schema: test"},
			{Name: "wait", ContentHash: "def", Quarantined: true},
		}},
	}})
	provider.stderr.waitFor(t, 1, "provider: shout refused: INVALID_ARGUMENT registry: invalid schema: test")
	provider.stderr.waitForPrefix(t, 1, "provider: wait is held back")
	if err := s.stream.Send(&toolsdv1.ProviderServiceConnectResponse{Msg: &toolsdv1.ProviderServiceConnectResponse_Goodbye{
		Goodbye: &toolsdv1.ServerGoodbye{Reason: "test"},
	}}); err != nil {
		t.Fatal(err)
	}
	provider.waitFor(t, 1, "provider: toolsd is going away: test")
	if strings.Contains(provider.stderr.String(), "going away") {
		t.Errorf("the goodbye, a routine line, went to standard error:\n%s", provider.stderr)
	}
}

// TestNodeProviderSplitsItsRegistration: as the Go SDK does, the provider registers its
// tools in messages of at most 1 MiB of definitions, or the welcome's max_result_bytes
// if that is smaller (a definition larger than that goes alone): a message over
// toolsd's receive limit would end the stream, and again after every reconnect.
func TestNodeProviderSplitsItsRegistration(t *testing.T) {
	node, npm := requireNode(t)
	installDeps(t, npm)
	longScope := strings.TrimSuffix(strings.Repeat(strings.Repeat("s", 60)+"/", 8), "/") // 487 bytes
	for name, tc := range map[string]struct {
		maxResult uint64
		scope     string
	}{
		"1 MiB":                             {1 << 20, ""},
		"max_result_bytes 1000":             {1000, ""},
		"max_result_bytes 1000, long scope": {1000, longScope},
	} {
		t.Run(name, func(t *testing.T) {
			fake := startFakeToolsd(t, false)
			startNode(t, node, "testdata/provider.mjs", "--addr", fake.addr, "--scope", tc.scope)
			s := fake.accept(t)
			s.welcome(t, tc.maxResult)
			budget := min(1<<20, tc.maxResult)

			// testdata/provider.mjs adds large_1 to large_5 (300,000 bytes each) last.
			registered := make(map[string]bool)
			for !registered["large_5"] {
				m := s.next(t, func(m *toolsdv1.ProviderServiceConnectRequest) bool { return m.GetRegister() != nil })
				defs := m.GetRegister().GetTools()
				var names []string
				for _, d := range defs {
					names = append(names, d.GetName())
					registered[d.GetName()] = true
				}
				if size := proto.Size(m); len(defs) > 1 && uint64(size) > budget {
					t.Errorf("a register message of %d bytes (%v), want at most %d or a single definition", size, names, budget)
				}
				if got := m.GetRegister().GetScope(); got != tc.scope {
					t.Errorf("registered in scope %q, want %q", got, tc.scope)
				}
			}
			for _, name := range []string{"shout", "wait", "large_1", "large_2", "large_3", "large_4"} {
				if !registered[name] {
					t.Errorf("the provider did not register %s", name)
				}
			}
		})
	}
}

// TestNodeProviderDrainsOnShutdown: on SIGINT, as the Go SDK does, the provider takes
// no more calls and cancels the running ones, but keeps its stream open for the shutdown
// grace: a call that finishes in time is answered, one that stopped because of the
// shutdown or is still running after the grace is not (toolsd fails it with
// PROVIDER_GONE as the stream closes), and then the provider half-closes the stream.
func TestNodeProviderDrainsOnShutdown(t *testing.T) {
	node, npm := requireNode(t)
	installDeps(t, npm)
	for name, tc := range map[string]struct {
		grace   string
		answers bool // whether stop_slowly, 1 s after the signal, is answered
	}{
		"within the grace": {grace: "60000", answers: true},
		"after the grace":  {grace: "0"},
		// Longer than a Node timer holds (2^31-1 ms), which would fire it after 1 ms.
		"within a grace of 2^31 ms": {grace: "2147483648", answers: true},
	} {
		t.Run(name, func(t *testing.T) {
			fake := startFakeToolsd(t, false)
			provider := startNode(t, node, "testdata/provider.mjs", "--addr", fake.addr, "--shutdown-grace-ms", tc.grace)
			s := fake.accept(t)
			s.welcome(t, 1<<20)

			s.send(t, execute(1, "stop_slowly", `{"ms": 1000}`))
			s.send(t, execute(2, "wait", `{"ms": 50000}`))
			for _, id := range []uint64{1, 2} {
				s.next(t, func(m *toolsdv1.ProviderServiceConnectRequest) bool { return m.GetProgress().GetRequestId() == id })
			}
			provider.interrupt(t)
			// Sent once the provider has taken the signal (a message and a signal reach
			// its event loop in either order): not started. (It may also arrive after the
			// half-close, or, with no grace, find the stream already gone with the
			// provider: then it reaches no one, which is as good.)
			provider.waitForPrefix(t, 1, "provider: shutting down: 2 calls running")
			if err := s.stream.Send(execute(3, "shout", `{"text": "too late"}`)); err != nil {
				if status.Code(err) != codes.Canceled {
					t.Fatalf("sending the call after the signal: %v, want it sent or the stream gone (Canceled)", err)
				}
				t.Logf("the call after the signal found the stream gone: %v", err)
			}
			answered := make(map[uint64]*toolsdv1.ExecuteResult)
			for _, m := range s.rest(t) {
				if r := m.GetResult(); r != nil {
					answered[r.GetRequestId()] = r
				}
			}
			if r, ok := answered[1]; ok != tc.answers || (ok && string(r.GetContent()) != "stopped 1000 ms after the cancel") {
				t.Errorf("with a shutdown grace of %s ms, stop_slowly answered = %v (%v), want %t", tc.grace, ok, r, tc.answers)
			}
			for _, id := range []uint64{2, 3} {
				if r, ok := answered[id]; ok {
					t.Errorf("call %d was answered %v, want no answer (toolsd fails it with PROVIDER_GONE)", id, r)
				}
			}
			if !tc.answers {
				provider.waitFor(t, 1, "provider: call 1 still running after the shutdown grace: not answering it")
			}
		})
	}
}

// TestNodeProviderExitsWithACallStillRunning: on SIGINT, once the shutdown grace is
// over and the stream closed, the provider exits even while a tool that does not stop on
// its signal still runs, as the Go SDK's Run returns and leaves such a handler running
// (toolsd fails its call with PROVIDER_GONE). Its pending work kept Node's event loop,
// and so the process, alive, with SIGINT and SIGTERM caught and doing nothing more.
func TestNodeProviderExitsWithACallStillRunning(t *testing.T) {
	provider, s := welcomedNode(t, 1<<20, "testdata/provider.mjs", "--shutdown-grace-ms", "0")

	s.send(t, execute(1, "ignore_cancel", `{}`))
	s.next(t, func(m *toolsdv1.ProviderServiceConnectRequest) bool { return m.GetProgress().GetRequestId() == 1 })
	provider.interrupt(t)
	provider.waitFor(t, 1, "provider: stopped")
	provider.waitExit(t)
	if code := provider.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("node testdata/provider.mjs after an interrupt exited %d, want 0", code)
	}
}

// TestNodeProviderAnswersACancelDuringShutdown: a call toolsd cancels while the
// provider drains is answered once its tool stops, cancelled, as the Go SDK answers a
// call toolsd told to stop: toolsd waits for that answer (cancel_grace) and records
// ABORTED. Only a call that stopped because of the shutdown alone is left unanswered
// (PROVIDER_GONE as the stream closes).
func TestNodeProviderAnswersACancelDuringShutdown(t *testing.T) {
	provider, s := welcomedNode(t, 1<<20, "testdata/provider.mjs", "--shutdown-grace-ms", "60000")

	s.send(t, execute(1, "stop_on_cue", `{}`))
	s.next(t, func(m *toolsdv1.ProviderServiceConnectRequest) bool { return m.GetProgress().GetRequestId() == 1 })
	provider.interrupt(t)
	provider.waitForPrefix(t, 1, "provider: shutting down: 1 calls running")
	cancelOnCue(t, provider, s)
}

// cancelOnCue cancels request 1, a stop_on_cue call of a provider that is shutting
// down, cues its tool to stop, checks the call is answered cancelled, and returns what
// the provider sent until its stream ended.
func cancelOnCue(t *testing.T, provider *nodeProcess, s *fakeStream) []*toolsdv1.ProviderServiceConnectRequest {
	t.Helper()
	s.send(t, &toolsdv1.ProviderServiceConnectResponse{Msg: &toolsdv1.ProviderServiceConnectResponse_Cancel{
		Cancel: &toolsdv1.CancelExecution{RequestId: 1, Reason: "test"},
	}})
	provider.waitFor(t, 1, "provider: cancel 1: test")
	if err := provider.cmd.Process.Signal(syscall.SIGUSR2); err != nil {
		t.Fatalf("cueing the tool: %v", err)
	}
	rest := s.rest(t)
	var got *toolsdv1.ExecuteResult
	for _, m := range rest {
		if r := m.GetResult(); r != nil {
			got = r
		}
	}
	if got.GetRequestId() != 1 || !got.GetCancelled() {
		t.Errorf("answer to the call toolsd cancelled during the shutdown = %v, want request 1 answered cancelled", got)
	}
	return rest
}

// TestNodeProviderBacksOffFromShortStreams: a stream that toolsd ends right after its
// welcome does not reset the reconnect backoff (as in the Go SDK, only a stream that
// lasted its 5 s maximum does), so the provider backs off instead of reconnecting
// every 100 ms. The delays are read from its log, not measured.
func TestNodeProviderBacksOffFromShortStreams(t *testing.T) {
	node, npm := requireNode(t)
	installDeps(t, npm)
	fake := startFakeToolsd(t, true)
	provider := startNode(t, node, "provider.mjs", "--addr", fake.addr)
	// Doubling from 100 ms, with jitter down to half: the fourth delay is 400 to 800 ms.
	const prefix = "provider: reconnecting in "
	lines := provider.waitForPrefix(t, 4, prefix)
	var delays []int
	for _, line := range lines {
		ms, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(line, prefix), " ms"))
		if err != nil {
			t.Fatalf("provider logged %q: %v", line, err)
		}
		delays = append(delays, ms)
	}
	if got := delays[3]; got < 400 {
		t.Errorf("reconnect delays after streams ended right after their welcome = %v ms, want the fourth at least 400 ms (the backoff grows)", delays)
	}
}

// TestNodeProviderEndsACallWhenItsTimeRunsOut: as the Go SDK ends a handler's context,
// the provider aborts a call's signal when its time runs out, timed from its arrival by
// the request's timeout (or, from a toolsd that sends none, by its deadline), and
// answers it cancelled, which toolsd records TOOL_TIMEOUT even before its own cancel
// comes (a toolsd that is slow to send it, say); it stopped only on toolsd's cancel. A
// timeout longer than a Node timer holds does not end the call at once.
func TestNodeProviderEndsACallWhenItsTimeRunsOut(t *testing.T) {
	_, s := welcomedNode(t, 1<<20, "provider.mjs")

	withTime := func(id uint64, ms int, timeout time.Duration, deadline time.Time) *toolsdv1.ProviderServiceConnectResponse {
		m := execute(id, "wait", `{"ms": `+strconv.Itoa(ms)+`}`)
		if timeout > 0 {
			m.GetExecute().Timeout = durationpb.New(timeout)
		}
		if !deadline.IsZero() {
			m.GetExecute().Deadline = timestamppb.New(deadline)
		}
		return m
	}
	// A deadline an hour past on toolsd's clock, as a clock far ahead of this host's
	// reads: the timeout rules.
	s.send(t, withTime(1, 50000, 300*time.Millisecond, time.Now().Add(time.Hour)))
	s.send(t, withTime(2, 50000, 0, time.Now().Add(300*time.Millisecond)))
	s.send(t, withTime(3, 500, 30*24*time.Hour, time.Time{}))
	results := make(map[uint64]*toolsdv1.ExecuteResult)
	for len(results) < 3 {
		r := s.next(t, func(m *toolsdv1.ProviderServiceConnectRequest) bool { return m.GetResult() != nil }).GetResult()
		results[r.GetRequestId()] = r
	}
	for id := uint64(1); id <= 2; id++ {
		if r := results[id]; !r.GetCancelled() || !r.GetIsError() || len(r.GetErrorMessage()) == 0 {
			t.Errorf("result %d, whose time ran out = %v, want cancelled, is_error and an error_message", id, r)
		}
	}
	if r := results[3]; r.GetIsError() || string(r.GetContent()) != "waited 500 ms" {
		t.Errorf("result of a call with a 30-day timeout = %v, want %q", r, "waited 500 ms")
	}
}

// TestNodeProviderGivesUpAnUnansweredHello: a server that takes the stream and never
// answers the hello (a hung toolsd, whose transport still answers keepalive pings; a
// proxy that holds streams) is given up after the welcome timeout, as the Go SDK's
// WithWelcomeTimeout does, saying so on standard error, and the provider connects again;
// it waited on such a stream for ever, its tools never registered.
func TestNodeProviderGivesUpAnUnansweredHello(t *testing.T) {
	node, npm := requireNode(t)
	installDeps(t, npm)
	fake := startFakeToolsd(t, false)
	provider := startNode(t, node, "provider.mjs", "--addr", fake.addr, "--welcome-timeout-ms", "500")

	first := fake.accept(t)
	first.next(t, func(m *toolsdv1.ProviderServiceConnectRequest) bool { return m.GetHello() != nil })
	second := fake.accept(t) // the provider gave the first stream up and connected again
	provider.stderr.waitForPrefix(t, 1, "provider: no toolsd session: no welcome from toolsd within 500 ms of the hello")
	first.rest(t) // the first stream was ended, not left open
	second.welcome(t, 1<<20)
	second.next(t, func(m *toolsdv1.ProviderServiceConnectRequest) bool { return m.GetRegister() != nil })
}

// TestNodeProviderWithoutAResultLimit: a welcome whose max_result_bytes is 0 announces
// no limit (as the Go SDK reads it); the provider sends its results, not their size.
func TestNodeProviderWithoutAResultLimit(t *testing.T) {
	_, s := welcomedNode(t, 0, "provider.mjs")

	s.send(t, execute(1, "shout", `{"text": "no limit"}`))
	r := s.next(t, func(m *toolsdv1.ProviderServiceConnectRequest) bool { return m.GetResult() != nil }).GetResult()
	if r.GetOversizedBytes() != 0 || string(r.GetContent()) != "NO LIMIT" {
		t.Errorf("result of shout with max_result_bytes 0 = %v, want content %q", r, "NO LIMIT")
	}
}

// TestNodeProviderCapsProgress: a progress message is cut to 64 KiB, or to the welcome's
// max_result_bytes when that is smaller, at a character boundary, as the Go SDK cuts it:
// toolsd forwards no more than 64 KiB, and a message over its receive limit would end
// the stream, failing every call on it.
func TestNodeProviderCapsProgress(t *testing.T) {
	node, npm := requireNode(t)
	installDeps(t, npm)
	text := "x" + strings.Repeat("é", 100_000) // é is two bytes: a cut at an even length splits one
	for name, tc := range map[string]struct {
		maxResult uint64
		want      int
	}{
		"64 KiB":                {maxResult: 1 << 20, want: 64<<10 - 1},
		"max_result_bytes 1000": {maxResult: 1000, want: 999},
	} {
		t.Run(name, func(t *testing.T) {
			fake := startFakeToolsd(t, false)
			startNode(t, node, "testdata/provider.mjs", "--addr", fake.addr)
			s := fake.accept(t)
			s.welcome(t, tc.maxResult)
			args, err := json.Marshal(map[string]string{"text": text})
			if err != nil {
				t.Fatal(err)
			}
			s.send(t, execute(1, "report", string(args)))
			msg := s.next(t, func(m *toolsdv1.ProviderServiceConnectRequest) bool { return m.GetProgress() != nil }).GetProgress().GetMessage()
			if len(msg) != tc.want || !utf8.Valid(msg) || !strings.HasPrefix(text, string(msg)) {
				t.Errorf("progress of %d bytes with max_result_bytes %d = %d bytes (valid UTF-8: %t), want the first %d bytes of the text",
					len(text), tc.maxResult, len(msg), utf8.Valid(msg), tc.want)
			}
			r := s.next(t, func(m *toolsdv1.ProviderServiceConnectRequest) bool { return m.GetResult() != nil }).GetResult()
			if string(r.GetContent()) != "reported" {
				t.Errorf("result of report = %v, want content %q", r, "reported")
			}
		})
	}
}

// fakeToolsd is a ProviderService whose streams the test drives: accept hands it each
// stream that opens. With endAfterWelcome, it
// instead welcomes each stream and ends it at once, with UNAVAILABLE.
type fakeToolsd struct {
	toolsdv1.UnimplementedProviderServiceServer
	addr            string
	streams         chan *fakeStream
	endAfterWelcome bool
}

// fakeStream is one Connect stream of a fakeToolsd. The test sends on it; its messages
// from the provider arrive on msgs, which is closed when the stream ends.
type fakeStream struct {
	stream toolsdv1.ProviderService_ConnectServer
	msgs   chan *toolsdv1.ProviderServiceConnectRequest
}

// welcomedNode runs script (provider.mjs or testdata/provider.mjs, with args) against a
// fake toolsd and welcomes its stream announcing maxResult; it returns the provider's
// process and its stream.
func welcomedNode(t *testing.T, maxResult uint64, script string, args ...string) (*nodeProcess, *fakeStream) {
	t.Helper()
	node, npm := requireNode(t)
	installDeps(t, npm)
	fake := startFakeToolsd(t, false)
	provider := startNode(t, node, script, append([]string{"--addr", fake.addr}, args...)...)
	s := fake.accept(t)
	s.welcome(t, maxResult)
	return provider, s
}

// startFakeToolsd serves a fakeToolsd on loopback until the test ends.
func startFakeToolsd(tb testing.TB, endAfterWelcome bool) *fakeToolsd {
	tb.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	f := &fakeToolsd{addr: lis.Addr().String(), streams: make(chan *fakeStream), endAfterWelcome: endAfterWelcome}
	srv := grpc.NewServer()
	toolsdv1.RegisterProviderServiceServer(srv, f)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	tb.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return f
}

func (f *fakeToolsd) Connect(stream toolsdv1.ProviderService_ConnectServer) error {
	if f.endAfterWelcome {
		if _, err := stream.Recv(); err != nil {
			return err
		}
		err := stream.Send(&toolsdv1.ProviderServiceConnectResponse{Msg: &toolsdv1.ProviderServiceConnectResponse_Welcome{
			Welcome: &toolsdv1.ProviderWelcome{ProviderId: "fake", MaxResultBytes: 1 << 20},
		}})
		if err != nil {
			return err
		}
		return status.Error(codes.Unavailable, "ended right after the welcome")
	}
	s := &fakeStream{stream: stream, msgs: make(chan *toolsdv1.ProviderServiceConnectRequest, 64)}
	defer close(s.msgs)
	select {
	case f.streams <- s:
	case <-stream.Context().Done():
		return nil
	}
	for {
		m, err := stream.Recv()
		if err != nil {
			return nil
		}
		select {
		case s.msgs <- m:
		case <-stream.Context().Done():
			return nil
		}
	}
}

// accept waits up to 20 s for the next stream to open.
func (f *fakeToolsd) accept(tb testing.TB) *fakeStream {
	tb.Helper()
	select {
	case s := <-f.streams:
		return s
	case <-time.After(20 * time.Second):
		tb.Fatal("the provider opened no stream within 20s")
		return nil
	}
}

// next returns the stream's next message that match accepts, skipping the others. It
// waits up to 20 s.
func (s *fakeStream) next(tb testing.TB, match func(*toolsdv1.ProviderServiceConnectRequest) bool) *toolsdv1.ProviderServiceConnectRequest {
	tb.Helper()
	timeout := time.NewTimer(20 * time.Second)
	defer timeout.Stop()
	for {
		select {
		case m, ok := <-s.msgs:
			if !ok {
				tb.Fatal("the stream ended before the message the test waits for")
			}
			if match(m) {
				return m
			}
		case <-timeout.C:
			tb.Fatal("no message the test waits for within 20s")
		}
	}
}

// rest returns the stream's messages until it ends. It waits up to 20 s.
func (s *fakeStream) rest(tb testing.TB) (msgs []*toolsdv1.ProviderServiceConnectRequest) {
	tb.Helper()
	timeout := time.NewTimer(20 * time.Second)
	defer timeout.Stop()
	for {
		select {
		case m, ok := <-s.msgs:
			if !ok {
				return msgs
			}
			msgs = append(msgs, m)
		case <-timeout.C:
			tb.Fatal("the stream did not end within 20s")
			return nil
		}
	}
}

func (s *fakeStream) send(tb testing.TB, m *toolsdv1.ProviderServiceConnectResponse) {
	tb.Helper()
	if err := s.stream.Send(m); err != nil {
		tb.Fatalf("sending %v to the provider: %v", m, err)
	}
}

// welcome awaits the provider's hello and welcomes it with max_result_bytes maxResult.
func (s *fakeStream) welcome(tb testing.TB, maxResult uint64) {
	tb.Helper()
	s.next(tb, func(m *toolsdv1.ProviderServiceConnectRequest) bool { return m.GetHello() != nil })
	s.send(tb, &toolsdv1.ProviderServiceConnectResponse{Msg: &toolsdv1.ProviderServiceConnectResponse_Welcome{
		Welcome: &toolsdv1.ProviderWelcome{ProviderId: "fake", MaxResultBytes: maxResult},
	}})
}

func execute(id uint64, tool, args string) *toolsdv1.ProviderServiceConnectResponse {
	return &toolsdv1.ProviderServiceConnectResponse{Msg: &toolsdv1.ProviderServiceConnectResponse_Execute{
		Execute: &toolsdv1.ExecuteRequest{RequestId: id, Tool: tool, ArgumentsJson: args},
	}}
}

// TestNodeProviderKeepsCancelledWhenOversized: a cancelled call whose answer is over the
// welcome's max_result_bytes goes as its size only, still marked cancelled, so that
// toolsd records ABORTED rather than RESULT_TOO_LARGE, as the Go SDK sends it.
func TestNodeProviderKeepsCancelledWhenOversized(t *testing.T) {
	_, s := welcomedNode(t, 4, "provider.mjs") // 4: less than any cancelled wait's message

	s.send(t, execute(1, "wait", `{"ms": 50000}`))
	s.next(t, func(m *toolsdv1.ProviderServiceConnectRequest) bool { return m.GetProgress().GetRequestId() == 1 })
	s.send(t, &toolsdv1.ProviderServiceConnectResponse{Msg: &toolsdv1.ProviderServiceConnectResponse_Cancel{
		Cancel: &toolsdv1.CancelExecution{RequestId: 1, Reason: "test"},
	}})
	r := s.next(t, func(m *toolsdv1.ProviderServiceConnectRequest) bool { return m.GetResult() != nil }).GetResult()
	if r.GetOversizedBytes() == 0 || !r.GetCancelled() {
		t.Errorf("result of the cancelled wait over max_result_bytes = %v, want oversized_bytes and cancelled", r)
	}
}

// TestNodeProviderSendsAnOversizedSuccessAfterACancelEmpty: toolsd records a success
// that comes after its cancel ABORTED, whatever it carries. One over the welcome's
// max_result_bytes went as its size, not cancelled (the tool did not stop as
// cancelled), which toolsd records RESULT_TOO_LARGE; it now goes as a success without
// its payload, as the Go SDK sends it.
func TestNodeProviderSendsAnOversizedSuccessAfterACancelEmpty(t *testing.T) {
	_, s := welcomedNode(t, 4, "testdata/provider.mjs") // 4: less than stop_slowly's text

	s.send(t, execute(1, "stop_slowly", `{"ms": 0}`))
	s.next(t, func(m *toolsdv1.ProviderServiceConnectRequest) bool { return m.GetProgress().GetRequestId() == 1 })
	s.send(t, &toolsdv1.ProviderServiceConnectResponse{Msg: &toolsdv1.ProviderServiceConnectResponse_Cancel{
		Cancel: &toolsdv1.CancelExecution{RequestId: 1, Reason: "test"},
	}})
	r := s.next(t, func(m *toolsdv1.ProviderServiceConnectRequest) bool { return m.GetResult() != nil }).GetResult()
	if r.GetOversizedBytes() != 0 || r.GetIsError() || len(r.GetContent()) != 0 {
		t.Errorf("result of stop_slowly over max_result_bytes after toolsd's cancel = %v, want an empty success", r)
	}
}

// TestNodeProviderUnregistersOnShutdown: as the Go SDK does, the provider unregisters
// every tool it registered as its shutdown begins, in messages of at most 100 names, so
// that toolsd sends it no new calls while the running ones finish, and registers
// nothing after. toolsd's answer to the unregister is logged as such, not taken for a
// registration; a call toolsd cancels meanwhile is still answered.
func TestNodeProviderUnregistersOnShutdown(t *testing.T) {
	for name, tc := range map[string]struct {
		script  string
		running bool // whether a stop_on_cue call keeps the drain open
	}{
		"a call running": {script: "testdata/provider.mjs", running: true},
		"242 tools":      {script: "testdata/many_tools.mjs"},
	} {
		t.Run(name, func(t *testing.T) {
			provider, s := welcomedNode(t, 1<<20, tc.script, "--shutdown-grace-ms", "60000")
			registered := make(map[string]bool)
			collect := func(m *toolsdv1.ProviderServiceConnectRequest) {
				for _, d := range m.GetRegister().GetTools() {
					registered[d.GetName()] = true
				}
			}
			if tc.running {
				s.send(t, execute(1, "stop_on_cue", `{}`))
				s.next(t, func(m *toolsdv1.ProviderServiceConnectRequest) bool {
					collect(m)
					return m.GetProgress().GetRequestId() == 1
				})
			} else {
				s.next(t, func(m *toolsdv1.ProviderServiceConnectRequest) bool {
					collect(m)
					return len(registered) == 242
				})
			}
			provider.interrupt(t)

			unregistered := make(map[string]bool)
			var last uint64
			s.next(t, func(m *toolsdv1.ProviderServiceConnectRequest) bool {
				if m.GetRegister() != nil {
					t.Errorf("the provider registered %d tools after its unregister began", len(m.GetRegister().GetTools()))
				}
				if u := m.GetUnregister(); u != nil {
					if n := len(u.GetNames()); n > 100 {
						t.Errorf("an unregister names %d tools, want at most 100", n)
					}
					for _, n := range u.GetNames() {
						unregistered[n] = true
					}
					last = u.GetRef()
				}
				return len(unregistered) >= len(registered)
			})
			for n := range registered {
				if !unregistered[n] {
					t.Errorf("the provider did not unregister %s", n)
				}
			}
			if !tc.running {
				s.rest(t)
				return
			}
			s.send(t, &toolsdv1.ProviderServiceConnectResponse{Msg: &toolsdv1.ProviderServiceConnectResponse_RegisterResult{
				RegisterResult: &toolsdv1.RegisterToolsResult{Ref: last, Tools: []*toolsdv1.ToolRegistrationStatus{{Name: "shout"}}},
			}})
			provider.waitFor(t, 1, "provider: unregistered shout")
			for _, m := range cancelOnCue(t, provider, s) {
				if m.GetRegister() != nil {
					t.Errorf("the provider registered %d tools after its unregister", len(m.GetRegister().GetTools()))
				}
			}
			if out := provider.String(); strings.Contains(out, "provider: registered shout") {
				t.Errorf("the unregister's answer was logged as a registration; output:\n%s", out)
			}
		})
	}
}

// TestNodeProviderRefusesANonStringReturn: a tool that returns anything but a string
// fails its call with a message naming the tool and what it returned, where a number or
// undefined failed with Node's own TypeError text and an array of numbers was sent as
// the bytes they stand for; the provider serves the calls after it.
func TestNodeProviderRefusesANonStringReturn(t *testing.T) {
	_, s := welcomedNode(t, 1<<20, "testdata/provider.mjs")

	kinds := map[string]string{
		"number":    "a number",
		"undefined": "undefined",
		"null":      "null",
		"array":     "an array",
		"object":    "an object",
		"boolean":   "a boolean",
		"boxed":     "an object",
	}
	ids := make(map[uint64]string)
	id := uint64(0)
	for kind := range kinds {
		id++
		ids[id] = kind
		s.send(t, execute(id, "returns", `{"kind": "`+kind+`"}`))
	}
	id++
	s.send(t, execute(id, "returns", `{"kind": "string"}`))
	results := make(map[uint64]*toolsdv1.ExecuteResult)
	for len(results) < len(kinds)+1 {
		r := s.next(t, func(m *toolsdv1.ProviderServiceConnectRequest) bool { return m.GetResult() != nil }).GetResult()
		results[r.GetRequestId()] = r
	}
	for id, kind := range ids {
		r := results[id]
		want := `tool "returns" returned ` + kinds[kind] + `, not a string`
		if !r.GetIsError() || r.GetCancelled() || len(r.GetContent()) != 0 || string(r.GetErrorMessage()) != want {
			t.Errorf("result of returning %s = %v, want is_error with error_message %q", kind, r, want)
		}
	}
	if r := results[id]; r.GetIsError() || string(r.GetContent()) != "a string" {
		t.Errorf("result of returning a string = %v, want its content", r)
	}
}
