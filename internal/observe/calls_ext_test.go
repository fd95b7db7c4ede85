package observe_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/toolsd/toolsd/internal/observe"
	"github.com/toolsd/toolsd/internal/pipeline"
	"github.com/toolsd/toolsd/internal/tool"
)

// stageRecorder wraps a StageTracer and records the stage events it passes on.
type stageRecorder struct {
	inner  pipeline.StageTracer
	events []string
}

func (r *stageRecorder) StartCall(ctx context.Context, e *tool.Exec) (context.Context, pipeline.CallTrace) {
	ctx, ct := r.inner.StartCall(ctx, e)
	return ctx, recordedTrace{r, ct}
}

type recordedTrace struct {
	r     *stageRecorder
	inner pipeline.CallTrace
}

func (t recordedTrace) StartStage(ctx context.Context, s pipeline.Stage) context.Context {
	t.r.events = append(t.r.events, "start "+string(s))
	return t.inner.StartStage(ctx, s)
}

func (t recordedTrace) EndStage(s pipeline.Stage) {
	t.r.events = append(t.r.events, "end "+string(s))
	t.inner.EndStage(s)
}

func (t recordedTrace) End(tl pipeline.Tool, r tool.Result) {
	t.r.events = append(t.r.events, "end call")
	t.inner.End(tl, r)
}

func TestCallObserverStages(t *testing.T) {
	m, reg := newMetrics(t)
	var inFlight float64
	disp := dispatcherFunc(func(context.Context, pipeline.Tool, *tool.Exec) tool.Result {
		inFlight = value(t, reg, "toolsd_pipeline_calls_in_flight")
		return tool.Result{Content: "ok"}
	})
	rec := &stageRecorder{inner: observe.NewCallObserver(m)}
	p := pipeline.New(tools(newTool("read", "p1")), disp, pipeline.WithStageTracer(rec))

	if r := p.Run(t.Context(), newExec("read", `{}`)); r.IsError {
		t.Fatalf("Run(read) = %+v, want a success", r)
	}
	want := []string{"start prepare", "end prepare", "start dispatch", "end dispatch", "start complete", "end complete", "end call"}
	if diff := cmp.Diff(want, rec.events); diff != "" {
		t.Errorf("stages of a dispatched call (-want +got):\n%s", diff)
	}
	if after := value(t, reg, "toolsd_pipeline_calls_in_flight"); inFlight != 1 || after != 0 {
		t.Errorf("calls in flight = %v during dispatch and %v after, want 1 and 0", inFlight, after)
	}
	for _, stage := range []string{"prepare", "dispatch", "complete"} {
		if got := value(t, reg, "toolsd_pipeline_stage_duration_seconds", "tool", "read", "stage", stage); got != 1 {
			t.Errorf("stage_duration_seconds{tool=read,stage=%s} count = %v, want 1", stage, got)
		}
	}
	if got := value(t, reg, "toolsd_pipeline_calls_total", "tool", "read", "code", "OK"); got != 1 {
		t.Errorf("calls_total{tool=read,code=OK} = %v, want 1", got)
	}
	if got := value(t, reg, "toolsd_pipeline_call_duration_seconds", "tool", "read"); got != 1 {
		t.Errorf("call_duration_seconds{tool=read} count = %v, want 1", got)
	}

	// A name the model invented never becomes a label value: the call never resolved.
	rec.events = nil
	if r := p.Run(t.Context(), newExec("no_such_tool_4711", `{}`)); r.Code() != tool.CodeUnknownTool {
		t.Fatalf("Run(unknown) = %+v, want UNKNOWN_TOOL", r)
	}
	if diff := cmp.Diff([]string{"start prepare", "end prepare", "end call"}, rec.events); diff != "" {
		t.Errorf("stages of an unknown tool's call (-want +got):\n%s", diff)
	}
	if got := value(t, reg, "toolsd_pipeline_calls_total", "tool", "", "code", "UNKNOWN_TOOL"); got != 1 {
		t.Errorf(`calls_total{tool="",code=UNKNOWN_TOOL} = %v, want 1`, got)
	}
	if got := value(t, reg, "toolsd_pipeline_stage_duration_seconds", "tool", "", "stage", "prepare"); got != 1 {
		t.Errorf(`stage_duration_seconds{tool="",stage=prepare} count = %v, want 1`, got)
	}
	if has(t, reg, "toolsd_pipeline_stage_duration_seconds", "tool", "", "stage", "dispatch") {
		t.Error(`stage_duration_seconds{tool="",stage=dispatch} exists for a call that never dispatched`)
	}
	if has(t, reg, "toolsd_pipeline_calls_total", "tool", "no_such_tool_4711") {
		t.Error("an unresolved tool name became a label value")
	}
}

const (
	secretArgs   = `{"password":"hunter2-secret"}`
	secretResult = "the-result-is-classified"
)

func runLogged(t *testing.T, level zapcore.Level, opts ...observe.CallOption) *observer.ObservedLogs {
	t.Helper()
	core, logs := observer.New(level)
	obs := observe.NewCallObserver(nil, append([]observe.CallOption{observe.WithCallLog(zap.New(core))}, opts...)...)
	p := pipeline.New(tools(newTool("read", "provider-7")), succeed(secretResult), pipeline.WithStageTracer(obs))
	p.Run(t.Context(), newExec("read", secretArgs))
	p.Run(t.Context(), newExec("missing", secretArgs))
	return logs
}

func TestCallLogOneInfoLinePerCall(t *testing.T) {
	logs := runLogged(t, zapcore.DebugLevel) // debug on, payloads off
	entries := logs.All()
	if len(entries) != 2 {
		t.Fatalf("logged %d lines for 2 calls, want 2: %v", len(entries), entries)
	}
	sum := sha256.Sum256([]byte(secretArgs))
	wantHash := hex.EncodeToString(sum[:8])
	for i, want := range []struct{ tool, provider, code string }{{"read", "provider-7", "OK"}, {"missing", "", "UNKNOWN_TOOL"}} {
		e := entries[i]
		if e.Level != zapcore.InfoLevel || e.Message != "tool call" {
			t.Errorf("line %d = %v %q, want info %q", i, e.Level, e.Message, "tool call")
		}
		f := e.ContextMap()
		wantFields := map[string]any{
			"session_id": "sess-1", "turn": uint64(3), "step": uint64(4), "call_id": "call-9",
			"tool": want.tool, "provider": want.provider, "code": want.code,
			"args_bytes": int64(len(secretArgs)), "args_sha256": wantHash,
		}
		for k, v := range wantFields {
			if f[k] != v {
				t.Errorf("line %d field %s = %#v, want %#v", i, k, f[k], v)
			}
		}
		if d, ok := f["duration"].(time.Duration); !ok || d < 0 {
			t.Errorf("line %d duration = %#v, want a duration", i, f["duration"])
		}
		if text := fmt.Sprint(f); strings.Contains(text, "hunter2") || strings.Contains(text, "classified") {
			t.Errorf("line %d leaks a payload: %s", i, text)
		}
	}
	if got := entries[0].ContextMap()["result_bytes"]; got != int64(len(secretResult)) {
		t.Errorf("result_bytes = %v, want %d", got, len(secretResult))
	}
}

// TestCallLogHashesLargePayloadsWhole: arguments and content of several KiB (hashed a
// piece at a time) give the SHA-256 of their whole text.
func TestCallLogHashesLargePayloadsWhole(t *testing.T) {
	args := `{"text":"` + strings.Repeat("abcdefghij", 700) + `"}` // 7 KiB: several pieces
	content := strings.Repeat("0123456789", 500) + "end"
	core, logs := observer.New(zapcore.InfoLevel)
	obs := observe.NewCallObserver(nil, observe.WithCallLog(zap.New(core)))
	p := pipeline.New(tools(newTool("read", "provider-7")), succeed(content), pipeline.WithStageTracer(obs))
	p.Run(t.Context(), newExec("read", args))
	entries := logs.All()
	if len(entries) != 1 {
		t.Fatalf("logged %d lines for 1 call, want 1", len(entries))
	}
	f := entries[0].ContextMap()
	for field, text := range map[string]string{"args_sha256": args, "result_sha256": content} {
		sum := sha256.Sum256([]byte(text))
		if want := hex.EncodeToString(sum[:8]); f[field] != want {
			t.Errorf("%s = %v, want %s (the hash of all %d bytes)", field, f[field], want, len(text))
		}
	}
}

func TestCallLogPayloads(t *testing.T) {
	tests := map[string]struct {
		level    zapcore.Level
		payloads bool
		want     bool
	}{
		"payloads at debug":          {level: zapcore.DebugLevel, payloads: true, want: true},
		"payloads but info level":    {level: zapcore.InfoLevel, payloads: true},
		"debug without payloads":     {level: zapcore.DebugLevel},
		"payload option off at info": {level: zapcore.InfoLevel},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			logs := runLogged(t, tc.level, observe.WithPayloads(tc.payloads))
			payload := logs.FilterMessage("tool call payload").All()
			if info := logs.FilterMessage("tool call").Len(); info != 2 {
				t.Errorf("info lines = %d, want 2", info)
			}
			if !tc.want {
				if len(payload) != 0 {
					t.Errorf("payload lines = %v, want none", payload)
				}
				return
			}
			if len(payload) != 2 {
				t.Fatalf("payload lines = %d, want 2", len(payload))
			}
			f := payload[0].ContextMap()
			if payload[0].Level != zapcore.DebugLevel || f["arguments"] != secretArgs || f["content"] != secretResult || f["call_id"] != "call-9" {
				t.Errorf("payload line = %v %v, want debug with the arguments, the content and the call id", payload[0].Level, f)
			}
		})
	}
}

// TestCallLogLinesIdentifyTheCallAlike: a payload line names its call by the same
// fields, with the same values, as the call's info line, so one finds the other.
func TestCallLogLinesIdentifyTheCallAlike(t *testing.T) {
	logs := runLogged(t, zapcore.DebugLevel, observe.WithPayloads(true))
	info, payload := logs.FilterMessage("tool call").All(), logs.FilterMessage("tool call payload").All()
	if len(info) != 2 || len(payload) != 2 {
		t.Fatalf("%d info and %d payload lines, want 2 of each", len(info), len(payload))
	}
	keys := []string{"session_id", "batch_id", "turn", "step", "index", "call_id", "tool"}
	for i := range info {
		in, pay := info[i].ContextMap(), payload[i].ContextMap()
		for _, k := range keys {
			if _, ok := in[k]; !ok || in[k] != pay[k] {
				t.Errorf("call %d: %s = %#v in the info line, %#v in the payload line; want it in both, alike", i, k, in[k], pay[k])
			}
		}
	}
}

func TestCallLogPayloadCap(t *testing.T) {
	big := `{"text":"` + strings.Repeat("é", 3000) + `"}` // 6012 bytes, two-byte runes
	core, logs := observer.New(zapcore.DebugLevel)
	obs := observe.NewCallObserver(nil, observe.WithCallLog(zap.New(core)), observe.WithPayloads(true), observe.WithPayloadCap(1001))
	p := pipeline.New(tools(newTool("read", "p1")), succeed("ok"), pipeline.WithStageTracer(obs))
	p.Run(t.Context(), newExec("read", big))
	payload := logs.FilterMessage("tool call payload").All()
	if len(payload) != 1 {
		t.Fatalf("payload lines = %d, want 1", len(payload))
	}
	args, _ := payload[0].ContextMap()["arguments"].(string)
	head, tail, ok := strings.Cut(args, "…")
	if !ok || len(head) > 1001 || !strings.HasPrefix(big, head) || tail != fmt.Sprintf("[%d bytes total]", len(big)) {
		t.Errorf("capped arguments = %q…, want at most 1001 bytes of the arguments cut at a rune boundary and the total size", args[:min(len(args), 40)])
	}
	if !strings.HasSuffix(head, "é") {
		t.Errorf("capped arguments end %q, want a whole rune", head[len(head)-4:])
	}
}

// TestForgetTool checks that forgetting a tool drops every series labelled with it,
// leaves other tools' alone, and that a later call of the name counts from zero.
func TestForgetTool(t *testing.T) {
	m, reg := newMetrics(t)
	calls := observe.NewCallObserver(m)
	p := pipeline.New(tools(newTool("read", "p1"), newTool("write", "p1")), succeed("ok"), pipeline.WithStageTracer(calls))
	for _, name := range []string{"read", "write", "write"} {
		p.Run(t.Context(), newExec(name, `{}`))
	}
	m.Pipeline().Retried("write", tool.CodeProviderGone, 2)

	calls.ForgetTool("write")
	for _, name := range []string{"toolsd_pipeline_calls_total", "toolsd_pipeline_call_duration_seconds", "toolsd_pipeline_stage_duration_seconds", "toolsd_pipeline_retries_total"} {
		if has(t, reg, name, "tool", "write") {
			t.Errorf("%s{tool=write} still exported after ForgetTool(write)", name)
		}
	}
	if got := value(t, reg, "toolsd_pipeline_calls_total", "tool", "read", "code", "OK"); got != 1 {
		t.Errorf("calls_total{tool=read} = %v after ForgetTool(write), want 1", got)
	}
	p.Run(t.Context(), newExec("write", `{}`))
	// The cached handles went too: the call is counted in an exported series.
	if got := value(t, reg, "toolsd_pipeline_calls_total", "tool", "write", "code", "OK"); got != 1 {
		t.Errorf("calls_total{tool=write} after a new call = %v, want 1", got)
	}
	if got := value(t, reg, "toolsd_pipeline_call_duration_seconds", "tool", "write"); got != 1 {
		t.Errorf("call_duration_seconds{tool=write} count after a new call = %v, want 1", got)
	}
}

// TestCallLogClipsClientChosenIDs: the call id and the tool name of a call come from the
// model, unbounded but for the request size; the info line clips them like the other
// client-chosen ids in the log, so one call cannot write megabytes of log. Registered
// names (at most 64 bytes) are never clipped.
func TestCallLogClipsClientChosenIDs(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	obs := observe.NewCallObserver(nil, observe.WithCallLog(zap.New(core)))
	p := pipeline.New(tools(), succeed("unused"), pipeline.WithStageTracer(obs))
	e := newExec(strings.Repeat("n", 100_000), `{}`)
	e.CallID = strings.Repeat("c", 100_000)
	p.Run(t.Context(), e)
	obs.Skipped(&e.Call)
	entries := logs.All()
	if len(entries) != 2 {
		t.Fatalf("logged %d lines, want 2", len(entries))
	}
	for _, entry := range entries {
		f := entry.ContextMap()
		for _, key := range []string{"tool", "call_id"} {
			if s, _ := f[key].(string); s == "" || len(s) > 200 {
				t.Errorf("%q line: %s is %d bytes, want it clipped", entry.Message, key, len(s))
			}
		}
	}
}

// TestPanickingResultObserverEndsTheCall: a result observer that panics does not leave
// the call in flight forever, uncounted: the call still ends (its count, duration and
// the in-flight gauge), with the result it had, and the panic is counted.
func TestPanickingResultObserverEndsTheCall(t *testing.T) {
	m, reg := newMetrics(t)
	pipe := pipeline.New(tools(newTool("read", "p1")), succeed("ok"),
		pipeline.WithObserver(m.Pipeline()),
		pipeline.WithStageTracer(observe.NewCallObserver(m)),
		pipeline.WithResultObservers(func(*tool.Exec, tool.Result, time.Duration) { panic("observer broke") }))
	var r tool.Result
	func() {
		defer func() { _ = recover() }() // the scheduler's recovery, were the panic to escape
		r = pipe.Run(t.Context(), newExec("read", `{}`))
	}()
	if r.IsError || r.Content != "ok" {
		t.Errorf("result = %+v, want the tool's success", r)
	}
	for _, g := range []string{"toolsd_pipeline_calls_in_flight", "toolsd_pipeline_dispatches_in_flight"} {
		if got := value(t, reg, g); got != 0 {
			t.Errorf("%s = %v, want 0", g, got)
		}
	}
	if got := value(t, reg, "toolsd_pipeline_calls_total", "tool", "read", "code", "OK"); got != 1 {
		t.Errorf("calls_total{tool=read,code=OK} = %v, want 1", got)
	}
	if got := value(t, reg, "toolsd_server_panics_recovered_total"); got != 1 {
		t.Errorf("panics_recovered_total = %v, want 1", got)
	}
}

// TestRetriedCodesStartAtZero drives an idempotent tool through the real retry with
// each result code as its first dispatch's result: every code the pipeline retries on
// must have its retries_total series at 0 from the tool's registration
// (CallObserver.PrepareTool), for rate() to see the tool's first retry, and no other
// code gets one.
func TestRetriedCodesStartAtZero(t *testing.T) {
	idempotent := pipeline.Config{ToolPolicy: func(string, string) pipeline.ToolSettings {
		return pipeline.ToolSettings{Idempotent: true}
	}}
	retried := 0
	for _, code := range resultCodes {
		if code == "OK" {
			continue
		}
		t.Run(string(code), func(t *testing.T) {
			m, reg := newMetrics(t)
			calls := observe.NewCallObserver(m)
			calls.PrepareTool("read")
			prepared := has(t, reg, "toolsd_pipeline_retries_total", "tool", "read", "code", string(code))
			if prepared {
				if got := value(t, reg, "toolsd_pipeline_retries_total", "tool", "read", "code", string(code)); got != 0 {
					t.Errorf("retries_total{tool=read,code=%s} after PrepareTool(read) = %v, want 0", code, got)
				}
			}
			var dispatches atomic.Int32
			p := pipeline.New(tools(newTool("read", "p1")), dispatcherFunc(func(context.Context, pipeline.Tool, *tool.Exec) tool.Result {
				if dispatches.Add(1) == 1 {
					return tool.Failure(code, "first try")
				}
				return tool.Result{Content: "ok"}
			}),
				pipeline.WithConfig(idempotent), pipeline.WithObserver(m.Pipeline()), pipeline.WithStageTracer(calls),
				pipeline.WithSleep(func(context.Context, time.Duration) error { return nil }))
			p.Run(t.Context(), newExec("read", `{}`))
			again := dispatches.Load() > 1
			if again {
				retried++
			}
			switch {
			case again && !prepared:
				t.Errorf("the pipeline retried after %s, but retries_total{tool=read,code=%s} did not exist at 0 after PrepareTool(read)", code, code)
			case !again && prepared:
				t.Errorf("retries_total{tool=read,code=%s} exists after PrepareTool(read), but the pipeline never retries after %s", code, code)
			}
		})
	}
	if retried == 0 {
		t.Errorf("no result code made the pipeline retry an idempotent tool")
	}
}
