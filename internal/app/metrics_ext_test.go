package app_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/toolsd/toolsd/examples/provider/exampletools"
	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/app"
	"github.com/toolsd/toolsd/pkg/provider"
)

func scrape(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		t.Fatalf("GET %s = %v", path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// TestMetricsMoveAfterABatch scrapes /metrics the way an operator's Prometheus would.
func TestMetricsMoveAfterABatch(t *testing.T) {
	e := start(t, "")
	runProvider(t, e.app.Addr(), exampletools.Tools(filepath.Join(t.TempDir(), "notes.txt"))...)
	admin := e.app.AdminAddr()

	// A registered tool's OK count, duration and retries exist at zero before its first
	// call, so that rate() counts that call and its first retry.
	_, before := scrape(t, admin, "/metrics")
	for _, want := range []string{
		`toolsd_pipeline_calls_total{code="OK",tool="echo"} 0`,
		`toolsd_pipeline_call_duration_seconds_count{tool="echo"} 0`,
		`toolsd_pipeline_retries_total{code="PROVIDER_GONE",tool="echo"} 0`,
		`toolsd_pipeline_retries_total{code="PROVIDER_UNAVAILABLE",tool="echo"} 0`,
	} {
		if !strings.Contains(before, want) {
			t.Errorf("/metrics before any batch lacks %s", want)
		}
	}
	e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-metrics", Calls: []*toolsdv1.ToolCall{
		call("c1", "echo", `{"text":"hi"}`),
		call("c2", "echo", `{"text":"again"}`),
		call("c3", "fail", `{"message":"no"}`),
	}}, batchOptions{})

	code, after := scrape(t, admin, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics status = %d", code)
	}
	for _, want := range []string{
		`toolsd_pipeline_calls_total{code="OK",tool="echo"} 2`,
		`toolsd_pipeline_calls_total{code="TOOL_ERROR",tool="fail"} 1`,
		`toolsd_pipeline_call_duration_seconds_count{tool="echo"} 2`,
		`toolsd_pipeline_stage_duration_seconds_count{stage="dispatch",tool="echo"} 2`,
		`toolsd_broker_providers_connected 1`,
		`toolsd_registry_tools 7`,
		`toolsd_session_appended_events_total 6`,
		`toolsd_scheduler_calls_started_total 3`,
		`grpc_server_handled_total{grpc_code="OK",grpc_method="ExecuteBatch",grpc_service="toolsd.v1.ToolService",grpc_type="bidi_stream"} 1`,
		`grpc_server_handling_seconds_bucket{grpc_method="Schemas"`,
		`go_memstats_mallocs_total`,
	} {
		if !strings.Contains(after, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if code, body := scrape(t, admin, "/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("/healthz = %d %q, want 200 ok", code, body)
	}
	if code, _ := scrape(t, admin, "/readyz"); code != http.StatusOK {
		t.Errorf("/readyz = %d, want 200 while serving", code)
	}
}

// TestToolSeriesLeaveWithTheirTool runs providers that each register a tool of a new
// name, call it once and leave: the per-tool series must go with the tool, or a
// provider reconnecting under fresh tool names grows /metrics without bound.
// TestToolSeriesOutliveTheirTool: until the keep time has passed, a tool's series stay
// after its provider left, so that its last results are scraped.
func TestToolSeriesOutliveTheirTool(t *testing.T) {
	e := start(t, "", app.WithToolSeriesKeep(time.Hour))
	_, stop := runProvider(t, e.app.Addr(), provider.NewTool("brief", "Here and gone.", func(context.Context, provider.Call, map[string]any) (string, error) {
		return "ok", nil
	}))
	e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-brief", Calls: []*toolsdv1.ToolCall{call("c0", "brief", `{}`)}}, batchOptions{})
	stop()
	waitFor(t, "brief to be unregistered", func() bool { return !slices.Contains(e.schemaNames(t, ""), "brief") })
	if _, body := scrape(t, e.app.AdminAddr(), "/metrics"); !strings.Contains(body, `toolsd_pipeline_calls_total{code="OK",tool="brief"} 1`) {
		t.Errorf("/metrics lost brief's calls_total series at once:\n%s", body)
	}
}

func TestToolSeriesLeaveWithTheirTool(t *testing.T) {
	const tools = 15
	e := start(t, "", app.WithToolSeriesKeep(10*time.Millisecond))
	for i := range tools {
		name := fmt.Sprintf("gen_%d", i)
		_, stop := runProvider(t, e.app.Addr(), provider.NewTool(name, "Generated.", func(context.Context, provider.Call, map[string]any) (string, error) {
			return "ok", nil
		}))
		out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-" + name, Calls: []*toolsdv1.ToolCall{call("c0", name, `{}`)}}, batchOptions{})
		if codes := resultCodes(out.results); !slices.Equal(codes, []string{""}) {
			t.Fatalf("%s codes = %v, want success", name, codes)
		}
		stop()
		waitFor(t, name+" to be unregistered", func() bool { return !slices.Contains(e.schemaNames(t, ""), name) })
	}
	// The series go once the registry has reported the last tool gone, which may be
	// just after Schemas stopped showing it.
	perTool := []string{"toolsd_pipeline_calls_total{", "toolsd_pipeline_call_duration_seconds_count{", "toolsd_pipeline_stage_duration_seconds_count{", "toolsd_pipeline_retries_total{"}
	waitFor(t, "the per-tool series of the unregistered tools to go", func() bool {
		_, body := scrape(t, e.app.AdminAddr(), "/metrics")
		for _, line := range strings.Split(body, "\n") {
			for _, prefix := range perTool {
				if strings.HasPrefix(line, prefix) {
					return false
				}
			}
		}
		return true
	})
}

// TestRPCLogLine checks the middleware's per-RPC line: written at debug for a
// successful batch, with the method, the code and the duration as a number.
func TestRPCLogLine(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	e := start(t, "", app.WithLogger(zap.New(core)))
	runProvider(t, e.app.Addr(), echoTool())
	e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-rpc-log", Calls: []*toolsdv1.ToolCall{call("c0", "echo", `{"text":"hi"}`)}}, batchOptions{})
	var line *observer.LoggedEntry
	waitFor(t, "the ExecuteBatch log line", func() bool {
		for _, l := range logs.FilterMessage("finished call").All() {
			if l.ContextMap()["grpc.method"] == "ExecuteBatch" {
				line = &l
				return true
			}
		}
		return false
	})
	fields := line.ContextMap()
	if line.Level != zap.DebugLevel || fields["grpc.code"] != "OK" || fields["grpc.service"] != "toolsd.v1.ToolService" {
		t.Errorf("line = %v %v, want debug, code OK, service toolsd.v1.ToolService", line.Level, fields)
	}
	if ms, ok := fields["grpc.time_ms"].(float64); !ok || ms <= 0 {
		t.Errorf("grpc.time_ms = %#v, want a positive number", fields["grpc.time_ms"])
	}
}

// TestRetiredToolSeriesAreBounded: a provider that registers and unregisters fresh
// tool names keeps series for at most WithRetiredToolSeries (10,000 by default) of those
// names after their tools went, however long the keep time, the most recently retired;
// each name kept its series for the whole keep time, so such a provider grew memory and
// /metrics by a few KB per name, tens of thousands of names a second.
func TestRetiredToolSeriesAreBounded(t *testing.T) {
	const rounds, perRound, kept = 4, 50, 120
	e := start(t, "", app.WithToolSeriesKeep(time.Hour), app.WithRetiredToolSeries(kept))
	p, err := connectRaw(t, e.conn, "churn")
	if err != nil {
		t.Fatal(err)
	}
	for round := range rounds {
		defs := make([]*toolsdv1.ToolDefinition, perRound)
		names := make([]string, perRound)
		for i := range defs {
			names[i] = fmt.Sprintf("churn_%d_%d", round, i)
			defs[i] = &toolsdv1.ToolDefinition{Name: names[i], ParametersJson: `{"type":"object"}`}
		}
		for _, st := range p.register(t, "", defs...) {
			if st.GetErrorCode() != "" {
				t.Fatalf("register %s: %s %s", st.GetName(), st.GetErrorCode(), st.GetErrorMessage())
			}
		}
		p.unregister(t, "", names...)
		// A name retired again counts once, as retired last.
		p.register(t, "", &toolsdv1.ToolDefinition{Name: "churn_0_0", ParametersJson: `{"type":"object"}`})
		p.unregister(t, "", "churn_0_0")
	}
	_, body := scrape(t, e.app.AdminAddr(), "/metrics")
	var got []string
	for _, line := range strings.Split(body, "\n") {
		if rest, ok := strings.CutPrefix(line, `toolsd_pipeline_calls_total{code="OK",tool="churn_`); ok {
			got = append(got, rest[:strings.IndexByte(rest, '"')])
		}
	}
	var want []string
	for round := range rounds {
		for i := range perRound {
			if name := fmt.Sprintf("%d_%d", round, i); round*perRound+i >= rounds*perRound-kept+1 || name == "0_0" {
				want = append(want, name)
			}
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("/metrics keeps the series of %d retired names %v, want the %d retired last %v", len(got), got, kept, want)
	}
}

// TestRegisteredAgainToolsTakeNoRetiredPlace: a name registered again (a provider
// reconnecting with the same tools) is no longer retired, so it does not count against
// WithRetiredToolSeries: it stayed counted until its keep time ran out, and providers
// reconnecting under their usual names pushed out the series of a tool that was really
// gone, with the results of its last moments, before the alerts' rate windows saw them.
func TestRegisteredAgainToolsTakeNoRetiredPlace(t *testing.T) {
	e := start(t, "", app.WithToolSeriesKeep(time.Hour), app.WithRetiredToolSeries(2))
	p, err := connectRaw(t, e.conn, "flapping")
	if err != nil {
		t.Fatal(err)
	}
	def := func(name string) *toolsdv1.ToolDefinition {
		return &toolsdv1.ToolDefinition{Name: name, ParametersJson: `{"type":"object"}`}
	}
	p.register(t, "", def("gone"))
	p.unregister(t, "", "gone")
	for _, name := range []string{"back_1", "back_2", "back_3"} {
		p.register(t, "", def(name))
		p.unregister(t, "", name)
		if st := p.register(t, "", def(name)); st[0].GetErrorCode() != "" {
			t.Fatalf("register %s again: %s %s", name, st[0].GetErrorCode(), st[0].GetErrorMessage())
		}
	}
	// One name is gone, and two may keep their series.
	if !hasSeries(t, e.app, "toolsd_pipeline_calls_total", "tool", "gone", "code", "OK") {
		t.Error("gone's series were dropped while it was the only retired name; want them kept for the keep time")
	}
}

// TestSeriesOfACallEndingAfterItsToolWentAreForgotten: a call that ends after its tool's
// name was forgotten (its provider left mid-call, and the name was pushed out of the
// retired names, or kept past the keep time) recreates the name's series; they are
// forgotten again like any retired name's. They stayed for good, so a provider
// churning fresh names with a call in flight at each disconnect grew /metrics without
// bound.
func TestSeriesOfACallEndingAfterItsToolWentAreForgotten(t *testing.T) {
	e := start(t, "limits: {hook_timeout: 1m}\n", app.WithToolSeriesKeep(time.Hour), app.WithRetiredToolSeries(1))
	seriesOf := func(name string) []string {
		_, body := scrape(t, e.app.AdminAddr(), "/metrics")
		var out []string
		for _, line := range strings.Split(body, "\n") {
			if strings.HasPrefix(line, "toolsd_pipeline_") && strings.Contains(line, `tool="`+name+`"`) {
				out = append(out, line)
			}
		}
		return out
	}
	// A post-execute hook holds the call's completion until the test answers.
	hook, err := toolsdv1.NewHookServiceClient(e.conn).Connect(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := hook.Send(&toolsdv1.HookServiceConnectRequest{Msg: &toolsdv1.HookServiceConnectRequest_Hello{Hello: &toolsdv1.HookHello{
		Name: "holder", Subscriptions: []*toolsdv1.HookSubscription{{Stage: toolsdv1.HookStage_HOOK_STAGE_POST_EXECUTE}},
	}}}); err != nil {
		t.Fatal(err)
	}
	if m, err := hook.Recv(); err != nil || m.GetWelcome() == nil {
		t.Fatalf("hook hello answered %v, %v; want a welcome", m, err)
	}
	pctx, leave := context.WithCancel(t.Context())
	defer leave()
	stream, err := toolsdv1.NewProviderServiceClient(e.conn).Connect(pctx)
	if err != nil {
		t.Fatal(err)
	}
	p := &rawProvider{stream: stream}
	if err := stream.Send(&toolsdv1.ProviderServiceConnectRequest{Msg: &toolsdv1.ProviderServiceConnectRequest_Hello{Hello: &toolsdv1.ProviderHello{Name: "leaving"}}}); err != nil {
		t.Fatal(err)
	}
	if m, err := stream.Recv(); err != nil || m.GetWelcome() == nil {
		t.Fatalf("provider hello answered %v, %v; want a welcome", m, err)
	}
	p.register(t, "", &toolsdv1.ToolDefinition{Name: "late", ParametersJson: `{"type":"object"}`})
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				return
			}
			if ex := m.GetExecute(); ex != nil {
				_ = stream.Send(result(&toolsdv1.ExecuteResult{RequestId: ex.GetRequestId(), Content: []byte("done")}))
			}
		}
	}()
	batch := make(chan *outcome, 1)
	go func() {
		out, _ := e.execute(t, &toolsdv1.Batch{SessionId: "s-late", Calls: []*toolsdv1.ToolCall{call("c0", "late", `{}`)}}, batchOptions{})
		batch <- out
	}()
	req, err := hook.Recv()
	if err != nil || req.GetRequest() == nil {
		t.Fatalf("hook Recv() = %v, %v; want the call's post-execute request", req, err)
	}
	// The provider leaves while the call completes; another name retired after it
	// pushes "late" out of the retired names (at most one is kept).
	leave()
	waitFor(t, "late to be unregistered", func() bool { return !slices.Contains(e.schemaNames(t, ""), "late") })
	churn, err := connectRaw(t, e.conn, "churn")
	if err != nil {
		t.Fatal(err)
	}
	churn.register(t, "", &toolsdv1.ToolDefinition{Name: "other_1", ParametersJson: `{"type":"object"}`})
	churn.unregister(t, "", "other_1")
	waitFor(t, "late's series to be forgotten", func() bool { return len(seriesOf("late")) == 0 })

	if err := hook.Send(&toolsdv1.HookServiceConnectRequest{Msg: &toolsdv1.HookServiceConnectRequest_Decision{Decision: &toolsdv1.HookDecision{
		RequestId: req.GetRequest().GetRequestId(), Verdict: toolsdv1.HookVerdict_HOOK_VERDICT_ACCEPT,
	}}}); err != nil {
		t.Fatal(err)
	}
	out := <-batch
	if out == nil || len(out.results) != 1 {
		t.Fatalf("batch = %v, want one result", out)
	}
	if len(seriesOf("late")) == 0 {
		t.Fatal("the call that ended after late was forgotten left no series: the test no longer covers their recreation")
	}
	// Later retirements push "late" out again.
	churn.register(t, "", &toolsdv1.ToolDefinition{Name: "other_2", ParametersJson: `{"type":"object"}`})
	churn.unregister(t, "", "other_2")
	waitFor(t, "late's recreated series to be forgotten", func() bool { return len(seriesOf("late")) == 0 })
}

// TestToolRegisteredAsItsSeriesGoKeepsThem: a tool registered again just as the sweep,
// having found its name unregistered, deletes the name's series gets them back at zero,
// as every registration does; it was left registered without them, so its first
// failures showed no increase to rate() and the alerts missed them.
func TestToolRegisteredAsItsSeriesGoKeepsThem(t *testing.T) {
	at, release := make(chan string, 16), make(chan struct{})
	var once sync.Once
	e := start(t, "", app.WithToolSeriesKeep(10*time.Millisecond), app.WithToolSeriesForgetting(func(name string) {
		at <- name
		if name == "back" {
			once.Do(func() { <-release })
		}
	}))
	done := sync.OnceFunc(func() { close(release) })
	t.Cleanup(done) // before the app stops: its sweep may wait on release
	p, err := connectRaw(t, e.conn, "returning")
	if err != nil {
		t.Fatal(err)
	}
	def := func(name string) *toolsdv1.ToolDefinition {
		return &toolsdv1.ToolDefinition{Name: name, ParametersJson: `{"type":"object"}`}
	}
	p.register(t, "", def("back"))
	p.unregister(t, "", "back")
	if name := <-at; name != "back" {
		t.Fatalf("series forgotten first of %q, want back", name)
	}
	if st := p.register(t, "", def("back")); st[0].GetErrorCode() != "" {
		t.Fatalf("register back again: %s %s", st[0].GetErrorCode(), st[0].GetErrorMessage())
	}
	// The sweep forgets names one after the other: once it reaches marker, it is done
	// with back.
	p.register(t, "", def("marker"))
	p.unregister(t, "", "marker")
	done()
	for name := range at {
		if name == "marker" {
			break
		}
	}
	if !hasSeries(t, e.app, "toolsd_pipeline_calls_total", "tool", "back", "code", "PROVIDER_GONE") {
		t.Error("back, registered again, has no calls_total{code=PROVIDER_GONE} series; want it at 0")
	}
}
