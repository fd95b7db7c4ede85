package app_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/app"
	"github.com/toolsd/toolsd/pkg/provider"
)

// seriesOf returns family's series whose labels have the given values (name, value
// pairs).
func seriesOf(tb testing.TB, a *app.App, family string, labels ...string) []*dto.Metric {
	tb.Helper()
	families, err := a.Metrics().Gather()
	if err != nil {
		tb.Fatal(err)
	}
	var out []*dto.Metric
	for _, f := range families {
		if f.GetName() != family {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				if !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool {
					return l.GetName() == labels[i] && l.GetValue() == labels[i+1]
				}) {
					continue series
				}
			}
			out = append(out, m)
		}
	}
	return out
}

// metricValue sums family's series whose labels have the given values (name, value
// pairs): a gauge's or counter's value, a histogram's sample count.
func metricValue(tb testing.TB, a *app.App, family string, labels ...string) float64 {
	tb.Helper()
	n := 0.0
	for _, m := range seriesOf(tb, a, family, labels...) {
		switch {
		case m.GetGauge() != nil:
			n += m.GetGauge().GetValue()
		case m.GetCounter() != nil:
			n += m.GetCounter().GetValue()
		case m.GetHistogram() != nil:
			n += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return n
}

// loadGauges are the gauges that must read 0 once nothing runs.
var loadGauges = []string{
	"toolsd_pipeline_calls_in_flight",
	"toolsd_pipeline_dispatches_in_flight",
	"toolsd_scheduler_running_calls",
	"toolsd_pipeline_approvals_pending",
}

// waitIdleGauges waits until every load gauge reads 0: a batch's last gauge update may
// follow the result its client received.
func waitIdleGauges(tb testing.TB, a *app.App) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		busy := ""
		for _, g := range loadGauges {
			if v := metricValue(tb, a, g); v != 0 {
				busy = g
				break
			}
		}
		if busy == "" {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s = %v, want 0 once every batch has ended", busy, metricValue(tb, a, busy))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// counters snapshots counter values so that a test can assert exact deltas.
type counters struct {
	a    *app.App
	base map[string]float64
}

type series struct {
	family string
	labels []string
}

func snapshot(tb testing.TB, a *app.App, ss ...series) *counters {
	tb.Helper()
	c := &counters{a: a, base: map[string]float64{}}
	for _, s := range ss {
		c.base[key(s)] = metricValue(tb, a, s.family, s.labels...)
	}
	return c
}

func key(s series) string { return s.family + "|" + joinLabels(s.labels) }

func joinLabels(l []string) string {
	out := ""
	for _, x := range l {
		out += x + ","
	}
	return out
}

// delta is how far s moved since the snapshot.
func (c *counters) delta(tb testing.TB, s series) float64 {
	tb.Helper()
	return metricValue(tb, c.a, s.family, s.labels...) - c.base[key(s)]
}

func expectDeltas(tb testing.TB, c *counters, want map[*series]float64) {
	tb.Helper()
	for s, w := range want {
		if got := c.delta(tb, *s); got != w {
			tb.Errorf("%s%v moved by %v, want %v", s.family, s.labels, got, w)
		}
	}
}

// TestMetricsAfterCancelMidBatch: a batch cancelled while its first call runs, with
// the pool at one call, starts one call and skips the rest; the load gauges come back
// to 0 and every counter moves by exactly its calls.
func TestMetricsAfterCancelMidBatch(t *testing.T) {
	e := start(t, "limits: {cancel_grace: 5s}\n")
	started, stopped := make(chan string, 8), make(chan string, 8)
	runProvider(t, e.app.Addr(), blockTool("block", started, stopped))
	var (
		callsAll   = series{"toolsd_pipeline_calls_total", nil}
		aborted    = series{"toolsd_pipeline_calls_total", []string{"tool", "block", "code", "ABORTED"}}
		startedC   = series{"toolsd_scheduler_calls_started_total", nil}
		skipped    = series{"toolsd_scheduler_calls_skipped_total", nil}
		durations  = series{"toolsd_pipeline_call_duration_seconds", []string{"tool", "block"}}
		dispatchSt = series{"toolsd_pipeline_stage_duration_seconds", []string{"tool", "block", "stage", "dispatch"}}
		prepareSt  = series{"toolsd_pipeline_stage_duration_seconds", []string{"tool", "block", "stage", "prepare"}}
		completeSt = series{"toolsd_pipeline_stage_duration_seconds", []string{"tool", "block", "stage", "complete"}}
	)
	snap := snapshot(t, e.app, callsAll, aborted, startedC, skipped, durations, dispatchSt, prepareSt, completeSt)
	calls := make([]*toolsdv1.ToolCall, 5)
	for i := range calls {
		calls[i] = call("c"+string(rune('0'+i)), "block", `{"label":"x"}`)
	}
	out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-metrics-cancel", MaxParallel: 1, Calls: calls}, batchOptions{
		onAccepted: func(s toolsdv1.ToolService_ExecuteBatchClient) {
			go func() {
				<-started
				_ = s.Send(&toolsdv1.ExecuteBatchRequest{Msg: &toolsdv1.ExecuteBatchRequest_Cancel{Cancel: &toolsdv1.CancelBatch{Reason: "stop"}}})
			}()
		},
	})
	want := []string{"ABORTED", "ABORTED_BEFORE_DISPATCH", "ABORTED_BEFORE_DISPATCH", "ABORTED_BEFORE_DISPATCH", "ABORTED_BEFORE_DISPATCH"}
	if got := resultCodes(out.results); !slices.Equal(got, want) {
		t.Fatalf("codes = %v, want %v", got, want)
	}
	waitIdleGauges(t, e.app)
	expectDeltas(t, snap, map[*series]float64{
		&callsAll: 1, &aborted: 1, &startedC: 1, &skipped: 4,
		&durations: 1, &dispatchSt: 1, &prepareSt: 1, &completeSt: 1,
	})
}

// TestMetricsAfterProviderCrashAndRetry: a provider that dies with two calls in flight
// fails the plain one with PROVIDER_GONE; the idempotent one is retried on the provider
// that takes its place. Each call counts once, the retry counts, and nothing stays in
// flight.
func TestMetricsAfterProviderCrashAndRetry(t *testing.T) {
	e := start(t, `
retry: {max_attempts: 200, budget: 20s, base_delay: 10ms, max_delay: 20ms}
policy:
  tools:
    flaky: {idempotent: true}
`)
	started, stopped := make(chan string, 2), make(chan string, 2)
	_, stopA := runProvider(t, e.app.Addr(), blockTool("flaky", started, stopped), blockTool("plain", started, stopped))
	var (
		flakyOK   = series{"toolsd_pipeline_calls_total", []string{"tool", "flaky"}}
		plainGone = series{"toolsd_pipeline_calls_total", []string{"tool", "plain", "code", "PROVIDER_GONE"}}
		plainAll  = series{"toolsd_pipeline_calls_total", []string{"tool", "plain"}}
		startedC  = series{"toolsd_scheduler_calls_started_total", nil}
		durations = series{"toolsd_pipeline_call_duration_seconds", nil}
	)
	snap := snapshot(t, e.app, flakyOK, plainGone, plainAll, startedC, durations)
	done := make(chan *outcome, 1)
	go func() {
		out, err := e.execute(t, &toolsdv1.Batch{SessionId: "s-metrics-retry", Calls: []*toolsdv1.ToolCall{
			call("c0", "flaky", `{"label":"f"}`), call("c1", "plain", `{"label":"p"}`),
		}}, batchOptions{})
		if err != nil {
			t.Errorf("ExecuteBatch() = %v", err)
		}
		done <- out
	}()
	<-started
	<-started
	stopA()
	attempts := make(chan int, 1)
	runProvider(t, e.app.Addr(), provider.NewTool("flaky", "Blocks until cancelled.", func(_ context.Context, c provider.Call, _ blockArgs) (string, error) {
		attempts <- c.Attempt
		return "answered by B", nil
	}))
	out := <-done
	if got := resultCodes(out.results); !slices.Equal(got, []string{"", "PROVIDER_GONE"}) {
		t.Fatalf("codes = %v, want [\"\" PROVIDER_GONE]", got)
	}
	attempt := <-attempts
	waitIdleGauges(t, e.app)
	expectDeltas(t, snap, map[*series]float64{
		&flakyOK: 1, &plainGone: 1, &plainAll: 1, &startedC: 2, &durations: 2,
	})
	// Every dispatch after the first is one retry, whatever code the earlier ones got.
	if got := metricValue(t, e.app, "toolsd_pipeline_retries_total", "tool", "flaky"); got != float64(attempt-1) {
		t.Errorf("retries_total{tool=flaky} = %v, want %d (the call's attempt %d)", got, attempt-1, attempt)
	}
	if got := metricValue(t, e.app, "toolsd_broker_providers_connected"); got != 1 {
		t.Errorf("providers_connected = %v, want 1 (provider B)", got)
	}
}

// TestApprovalsPendingAfterClientVanishes: a client that goes away while a call waits
// for its approval leaves no approval pending and no call in flight.
func TestApprovalsPendingAfterClientVanishes(t *testing.T) {
	e := start(t, `
policy:
  rules:
    - {tool: echo, decision: ask}
`)
	runProvider(t, e.app.Addr(), echoTool())
	snap := snapshot(t, e.app, series{"toolsd_pipeline_calls_total", nil})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stream, err := e.tools.ExecuteBatch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&toolsdv1.ExecuteBatchRequest{Msg: &toolsdv1.ExecuteBatchRequest_Batch{Batch: &toolsdv1.Batch{
		SessionId: "s-metrics-vanish", Calls: []*toolsdv1.ToolCall{call("c0", "echo", `{"text":"a"}`), call("c1", "echo", `{"text":"b"}`)},
	}}}); err != nil {
		t.Fatal(err)
	}
	asked := 0
	for asked < 2 {
		m, err := stream.Recv()
		if err != nil {
			t.Fatalf("Recv() = %v before both approval requests", err)
		}
		if m.GetApprovalRequest() != nil {
			asked++
		}
	}
	if got := metricValue(t, e.app, "toolsd_pipeline_approvals_pending"); got != 2 {
		t.Errorf("approvals_pending while both calls wait = %v, want 2", got)
	}
	cancel() // the client vanishes
	if _, err := stream.Recv(); err == nil || errors.Is(err, io.EOF) {
		t.Fatalf("Recv() after cancel = %v, want the cancellation", err)
	}
	waitFor(t, "both calls to be counted", func() bool {
		return snap.delta(t, series{"toolsd_pipeline_calls_total", nil}) >= 2
	})
	waitIdleGauges(t, e.app)
	if got := snap.delta(t, series{"toolsd_pipeline_calls_total", nil}); got != 2 {
		t.Errorf("calls_total moved by %v, want 2", got)
	}
}

// TestGaugesAfterShutdownWithCallsRunning: a shutdown that aborts running calls ends
// with every load gauge at 0 and no provider or hook counted as connected.
func TestGaugesAfterShutdownWithCallsRunning(t *testing.T) {
	cfg := durableConfig(t, t.TempDir(), "timeouts: {shutdown: 100ms}\nlimits: {cancel_grace: 1s, hook_timeout: 1m}\n")
	a, stop, runErr := runApp(t, cfg)
	conn := dial(t, a.Addr())
	e := &env{app: a, conn: conn, tools: toolsdv1.NewToolServiceClient(conn)}
	started, stopped := make(chan string, 4), make(chan string, 4)
	runProviderWith(t, a.Addr(), nil, blockTool("block", started, stopped))
	hookStream, err := toolsdv1.NewHookServiceClient(conn).Connect(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := hookStream.Send(&toolsdv1.HookServiceConnectRequest{Msg: &toolsdv1.HookServiceConnectRequest_Hello{Hello: &toolsdv1.HookHello{
		Name: "watcher", Subscriptions: []*toolsdv1.HookSubscription{{Stage: toolsdv1.HookStage_HOOK_STAGE_RESULT}},
	}}}); err != nil {
		t.Fatal(err)
	}
	if m, err := hookStream.Recv(); err != nil || m.GetWelcome() == nil {
		t.Fatalf("hook hello answered %v, %v; want a welcome", m, err)
	}
	go func() {
		for {
			if _, err := hookStream.Recv(); err != nil {
				return
			}
		}
	}()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = e.execute(t, &toolsdv1.Batch{SessionId: "s-metrics-shutdown", Calls: []*toolsdv1.ToolCall{
			call("c0", "block", `{"label":"a"}`), call("c1", "block", `{"label":"b"}`),
		}}, batchOptions{})
	}()
	<-started
	<-started
	if got := metricValue(t, a, "toolsd_scheduler_running_calls"); got != 2 {
		t.Errorf("running_calls with both calls at the provider = %v, want 2", got)
	}
	stop()
	if err := <-runErr; err != nil {
		t.Fatalf("Run() = %v", err)
	}
	<-done
	for _, g := range append(slices.Clone(loadGauges), "toolsd_broker_providers_connected", "toolsd_hook_hooks_connected", "toolsd_registry_tools") {
		if v := metricValue(t, a, g); v != 0 {
			t.Errorf("%s after shutdown = %v, want 0", g, v)
		}
	}
	if got := metricValue(t, a, "toolsd_pipeline_calls_total", "tool", "block"); got != 2 {
		t.Errorf("calls_total{tool=block} after shutdown = %v, want 2", got)
	}
}

// TestHookFailuresCountOncePerCall: a silent hook costs each call one failure, counted
// under its outcome; once the hook leaves, hooks_connected reads 0 again.
func TestHookFailuresCountOncePerCall(t *testing.T) {
	for _, failOpen := range []bool{false, true} {
		name, outcome, code := "closed", "fail_closed", "POLICY_UNAVAILABLE"
		if failOpen {
			name, outcome, code = "open", "fail_open", ""
		}
		t.Run(name, func(t *testing.T) {
			e := start(t, "limits: {hook_timeout: 50ms}\n")
			runProvider(t, e.app.Addr(), echoTool())
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			stream, err := toolsdv1.NewHookServiceClient(dial(t, e.app.Addr())).Connect(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := stream.Send(&toolsdv1.HookServiceConnectRequest{Msg: &toolsdv1.HookServiceConnectRequest_Hello{Hello: &toolsdv1.HookHello{
				Name: "silent", FailOpen: failOpen,
				Subscriptions: []*toolsdv1.HookSubscription{{Stage: toolsdv1.HookStage_HOOK_STAGE_PRE_EXECUTE}},
			}}}); err != nil {
				t.Fatal(err)
			}
			if m, err := stream.Recv(); err != nil || m.GetWelcome() == nil {
				t.Fatalf("hook hello answered %v, %v; want a welcome", m, err)
			}
			go func() { // reads and never answers
				for {
					if _, err := stream.Recv(); err != nil {
						return
					}
				}
			}()
			failures := series{"toolsd_hook_failures_total", []string{"hook", "silent", "stage", "pre_execute", "outcome", outcome}}
			all := series{"toolsd_hook_failures_total", nil}
			snap := snapshot(t, e.app, failures, all)
			out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-hook-" + name, Calls: []*toolsdv1.ToolCall{
				call("c0", "echo", `{"text":"a"}`), call("c1", "echo", `{"text":"b"}`), call("c2", "echo", `{"text":"c"}`),
			}}, batchOptions{})
			if got := resultCodes(out.results); !slices.Equal(got, []string{code, code, code}) {
				t.Fatalf("codes = %v, want %q each", got, code)
			}
			expectDeltas(t, snap, map[*series]float64{&failures: 3, &all: 3})
			waitIdleGauges(t, e.app)
			cancel()
			waitFor(t, "the hook to be gone", func() bool { return metricValue(t, e.app, "toolsd_hook_hooks_connected") == 0 })
		})
	}
}

// TestStaleResultsCountOnce: a provider that answers a call twice, and a call that
// was cancelled and then answered late, each count one stale result; the calls count
// once each.
func TestStaleResultsCountOnce(t *testing.T) {
	e := start(t, "")
	p := connectHand(t, e, "raw")
	p.serve(func(ex *toolsdv1.ExecuteRequest) []*toolsdv1.ProviderServiceConnectRequest {
		r := result(&toolsdv1.ExecuteResult{RequestId: ex.GetRequestId(), Content: []byte("ok")})
		return []*toolsdv1.ProviderServiceConnectRequest{r, r}
	})
	stale := series{"toolsd_broker_stale_results_total", nil}
	ok := series{"toolsd_pipeline_calls_total", []string{"tool", "raw", "code", "OK"}}
	snap := snapshot(t, e.app, stale, ok)
	out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-stale", Calls: []*toolsdv1.ToolCall{call("c0", "raw", `{}`), call("c1", "raw", `{}`)}}, batchOptions{})
	if got := resultCodes(out.results); !slices.Equal(got, []string{"", ""}) {
		t.Fatalf("codes = %v, want two successes", got)
	}
	waitFor(t, "both duplicates to be dropped", func() bool { return snap.delta(t, stale) >= 2 })
	expectDeltas(t, snap, map[*series]float64{&stale: 2, &ok: 2})
	waitIdleGauges(t, e.app)
}

// hasSeries reports whether family exports a series with the given labels.
func hasSeries(tb testing.TB, a *app.App, family string, labels ...string) bool {
	tb.Helper()
	return len(seriesOf(tb, a, family, labels...)) > 0
}

// TestAlertedCodesExistBeforeTheFirstFailure: the failures the shipped alerts watch
// (PROVIDER_GONE, TOOL_TIMEOUT, ...) are exported at 0 for a tool from its
// registration. A series born at its first count shows no increase to rate(), so the
// PROVIDER_GONE burst of a provider's first crash was invisible to
// ToolsdProviderGoneSpike and ToolsdHighCallErrorRatio.
func TestAlertedCodesExistBeforeTheFirstFailure(t *testing.T) {
	e := start(t, "")
	started, stopped := make(chan string, 1), make(chan string, 1)
	_, stop := runProvider(t, e.app.Addr(), blockTool("block", started, stopped))
	for _, code := range []string{"INTERNAL", "PROVIDER_GONE", "PROVIDER_UNAVAILABLE", "PROVIDER_OVERLOADED", "TOOL_TIMEOUT", "INVALID_RESULT", "POLICY_UNAVAILABLE"} {
		if !hasSeries(t, e.app, "toolsd_pipeline_calls_total", "tool", "block", "code", code) {
			t.Errorf("calls_total{tool=block,code=%s} not exported before the tool's first failure", code)
		}
	}
	done := make(chan *outcome, 1)
	go func() {
		out, _ := e.execute(t, &toolsdv1.Batch{SessionId: "s-first-gone", Calls: []*toolsdv1.ToolCall{call("c0", "block", `{"label":"a"}`)}}, batchOptions{})
		done <- out
	}()
	<-started
	stop()
	if out := <-done; out == nil || !slices.Equal(resultCodes(out.results), []string{"PROVIDER_GONE"}) {
		t.Fatalf("outcome = %v, want PROVIDER_GONE", out)
	}
	waitIdleGauges(t, e.app)
	if got := metricValue(t, e.app, "toolsd_pipeline_calls_total", "tool", "block", "code", "PROVIDER_GONE"); got != 1 {
		t.Errorf("calls_total{tool=block,code=PROVIDER_GONE} = %v, want 1", got)
	}
}
