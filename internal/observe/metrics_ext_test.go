package observe_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/toolsd/toolsd/internal/hook"
	"github.com/toolsd/toolsd/internal/observe"
	"github.com/toolsd/toolsd/internal/pipeline"
	"github.com/toolsd/toolsd/internal/scheduler"
	"github.com/toolsd/toolsd/internal/session"
	"github.com/toolsd/toolsd/internal/tool"
)

// The hook hub's observer and ours must stay the same interface.
var (
	_ hook.Observer        = observe.HookObserver(nil)
	_ observe.HookObserver = hook.Observer(nil)
)

func TestAdapters(t *testing.T) {
	type series struct {
		name   string
		labels []string
		want   float64
	}
	tests := map[string]struct {
		do   func(m *observe.Metrics)
		want []series
	}{
		"providers connect and leave": {
			do: func(m *observe.Metrics) {
				b := m.Broker()
				b.ProviderConnected(1)
				b.ProviderConnected(1)
				b.ProviderConnected(-1)
			},
			want: []series{{"toolsd_broker_providers_connected", nil, 1}},
		},
		"broker drops and rejections": {
			do: func(m *observe.Metrics) {
				b := m.Broker()
				b.CallRejected(tool.CodeProviderOverloaded)
				b.CallRejected(tool.CodeProviderOverloaded)
				b.CallRejected(tool.CodeProviderUnavailable)
				b.StaleResult()
				b.InvalidResult()
				b.InvalidResult()
				b.MalformedMessage()
			},
			want: []series{
				{"toolsd_broker_calls_rejected_total", []string{"code", "PROVIDER_OVERLOADED"}, 2},
				{"toolsd_broker_calls_rejected_total", []string{"code", "PROVIDER_UNAVAILABLE"}, 1},
				{"toolsd_broker_stale_results_total", nil, 1},
				{"toolsd_broker_invalid_results_total", nil, 2},
				{"toolsd_broker_malformed_messages_total", nil, 1},
			},
		},
		"dispatches and retries": {
			do: func(m *observe.Metrics) {
				p := m.Pipeline()
				p.DispatchStarted("read")
				p.DispatchStarted("read")
				p.Retried("read", tool.CodeProviderGone, 2)
				p.DispatchFinished("read", "", time.Millisecond)
			},
			want: []series{
				{"toolsd_pipeline_dispatches_in_flight", nil, 1},
				{"toolsd_pipeline_retries_total", []string{"tool", "read", "code", "PROVIDER_GONE"}, 1},
			},
		},
		"scheduler": {
			do: func(m *observe.Metrics) {
				s := m.Scheduler()
				for range 3 {
					s.CallStarted(&tool.Call{})
				}
				s.CallSkipped(&tool.Call{})
				s.PoolOccupancy(1)
				s.PoolOccupancy(2)
				s.PoolOccupancy(0)
				s.ContextsDropped(4)
			},
			want: []series{
				{"toolsd_scheduler_calls_started_total", nil, 3},
				{"toolsd_scheduler_calls_skipped_total", nil, 1},
				{"toolsd_scheduler_contexts_dropped_total", nil, 4},
				{"toolsd_scheduler_batch_pool_occupancy", nil, 3},
			},
		},
		"session log": {
			do: func(m *observe.Metrics) {
				s := m.Session()
				s.AppendDone(3, 2*time.Millisecond)
				s.AppendDone(1, time.Millisecond)
				s.SyncDone(time.Millisecond)
				j := s.(session.JournalObserver)
				j.JournalBytes(4096)
				j.JournalBytes(8192)
				j.JournalRewritten(time.Second)
			},
			want: []series{
				{"toolsd_session_appended_events_total", nil, 4},
				{"toolsd_session_append_duration_seconds", nil, 2},
				{"toolsd_session_sync_duration_seconds", nil, 1},
				{"toolsd_session_journal_bytes", nil, 8192},
				{"toolsd_session_journal_rewrites_total", nil, 1},
			},
		},
		"hooks": {
			do: func(m *observe.Metrics) {
				h := m.Hooks(nil)
				h.HookConnected("audit", 1)
				h.HookConnected("audit", 1)
				h.HookConnected("audit", -1)
				h.HookFailure("audit", "pre_execute", true)
				h.HookFailure("audit", "pre_execute", false)
				h.HookFailure("audit", "pre_execute", false)
				h.NotificationsLost("audit", 3)
				h.ContextsDropped("audit", 2)
			},
			want: []series{
				{"toolsd_hook_hooks_connected", nil, 1},
				{"toolsd_hook_result_notifications_lost_total", []string{"hook", "audit"}, 3},
				{"toolsd_hook_contexts_dropped_total", []string{"hook", "audit"}, 2},
				{"toolsd_hook_failures_total", []string{"hook", "audit", "stage", "pre_execute", "outcome", "fail_open"}, 1},
				{"toolsd_hook_failures_total", []string{"hook", "audit", "stage", "pre_execute", "outcome", "fail_closed"}, 2},
			},
		},
		"server": {
			do: func(m *observe.Metrics) {
				m.PanicRecovered()
				m.PanicRecovered()
				m.ApprovalsPending().Inc()
				m.ApprovalsPending().Inc()
				m.ApprovalsPending().Dec()
				m.RegisteredTools(func() int { return 7 })
			},
			want: []series{
				{"toolsd_server_panics_recovered_total", nil, 2},
				{"toolsd_pipeline_approvals_pending", nil, 1},
				{"toolsd_registry_tools", nil, 7},
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m, reg := newMetrics(t)
			tc.do(m)
			for _, s := range tc.want {
				if got := value(t, reg, s.name, s.labels...); got != s.want {
					t.Errorf("%s%v = %v, want %v", s.name, s.labels, got, s.want)
				}
			}
		})
	}
}

func TestRegisteredToolsBeforeSet(t *testing.T) {
	_, reg := newMetrics(t)
	if got := value(t, reg, "toolsd_registry_tools"); got != 0 {
		t.Errorf("toolsd_registry_tools = %v before RegisteredTools, want 0", got)
	}
}

func TestRunnerCountsRunningCalls(t *testing.T) {
	m, reg := newMetrics(t)
	entered, release := make(chan struct{}), make(chan struct{})
	inner := scheduler.RunnerFunc(func(_ context.Context, e *tool.Exec) tool.Result {
		entered <- struct{}{}
		<-release
		if e.Name == "panics" {
			panic("boom")
		}
		return tool.Result{}
	})
	r := m.Runner(inner)
	var wg sync.WaitGroup
	for _, name := range []string{"ok", "panics"} {
		wg.Go(func() {
			defer func() { _ = recover() }()
			r.Run(t.Context(), &tool.Exec{Call: tool.Call{Name: name}})
		})
	}
	<-entered
	<-entered
	if got := value(t, reg, "toolsd_scheduler_running_calls"); got != 2 {
		t.Errorf("toolsd_scheduler_running_calls = %v with two calls running, want 2", got)
	}
	close(release)
	wg.Wait()
	if got := value(t, reg, "toolsd_scheduler_running_calls"); got != 0 {
		t.Errorf("toolsd_scheduler_running_calls = %v after both returned (one panicked), want 0", got)
	}
}

type approverFunc func(ctx context.Context, req tool.ApprovalRequest) (tool.ApprovalDecision, error)

func (f approverFunc) Approve(ctx context.Context, req tool.ApprovalRequest) (tool.ApprovalDecision, error) {
	return f(ctx, req)
}

func TestApproverCountsPending(t *testing.T) {
	m, reg := newMetrics(t)
	if got := m.Approver(nil); got != nil {
		t.Errorf("Approver(nil) = %v, want nil", got)
	}
	errNo := errors.New("no answer")
	var during float64
	a := m.Approver(approverFunc(func(context.Context, tool.ApprovalRequest) (tool.ApprovalDecision, error) {
		during = value(t, reg, "toolsd_pipeline_approvals_pending")
		return tool.ApprovalDecision{}, errNo
	}))
	if _, err := a.Approve(t.Context(), tool.ApprovalRequest{}); !errors.Is(err, errNo) {
		t.Errorf("Approve() = %v, want %v", err, errNo)
	}
	if after := value(t, reg, "toolsd_pipeline_approvals_pending"); during != 1 || after != 0 {
		t.Errorf("approvals pending = %v while waiting and %v after, want 1 and 0", during, after)
	}
}

// TestHookFailureSeriesFollowConnectedNames checks that a hook name labels failures
// only while a hook of that name is connected: hooks choose their names, so series
// kept for departed names would grow without bound.
func TestHookFailureSeriesFollowConnectedNames(t *testing.T) {
	m, reg := newMetrics(t)
	h := m.Hooks(nil)
	const name = "toolsd_hook_failures_total"
	h.HookConnected("audit", 1)
	// Created at 0 when the name connects, so that rate() sees its first failure.
	if !has(t, reg, name, "hook", "audit") || value(t, reg, name, "hook", "audit", "stage", "post_execute", "outcome", "fail_closed") != 0 {
		t.Errorf("%s{hook=audit} not exported at 0 once an audit hook connected", name)
	}
	h.HookConnected("audit", 1)
	h.HookFailure("audit", "pre_execute", false)
	h.HookConnected("audit", -1)
	if got := value(t, reg, name, "hook", "audit", "stage", "pre_execute", "outcome", "fail_closed"); got != 1 {
		t.Errorf("%s{hook=audit} with one audit hook left = %v, want 1", name, got)
	}
	h.HookConnected("audit", -1)
	if has(t, reg, name, "hook", "audit") {
		t.Errorf("%s{hook=audit} still exported after the last audit hook left", name)
	}
	// A request pending on the dropped stream fails after the hook left.
	h.HookFailure("audit", "pre_execute", false)
	if has(t, reg, name, "hook", "audit") {
		t.Errorf("a late failure recreated %s{hook=audit}", name)
	}
	if got := value(t, reg, name, "hook", "", "stage", "pre_execute", "outcome", "fail_closed"); got != 1 {
		t.Errorf("%s{hook=\"\"} = %v, want the late failure", name, got)
	}
	// Notifications its stream's end lost count after the hook left, as the failures do.
	const lost = "toolsd_hook_result_notifications_lost_total"
	h.NotificationsLost("audit", 2)
	if has(t, reg, lost, "hook", "audit") {
		t.Errorf("lost notifications recreated %s{hook=audit}", lost)
	}
	if got := value(t, reg, lost, "hook", ""); got != 2 {
		t.Errorf("%s{hook=\"\"} = %v, want 2", lost, got)
	}
	// Contexts dropped for a hook that left count under "" too.
	const dropped = "toolsd_hook_contexts_dropped_total"
	h.ContextsDropped("audit", 3)
	if has(t, reg, dropped, "hook", "audit") {
		t.Errorf("dropped contexts recreated %s{hook=audit}", dropped)
	}
	if got := value(t, reg, dropped, "hook", ""); got != 3 {
		t.Errorf("%s{hook=\"\"} = %v, want 3", dropped, got)
	}
	// A hook that comes back under the name starts from zero.
	h.HookConnected("audit", 1)
	if !has(t, reg, lost, "hook", "audit") || value(t, reg, lost, "hook", "audit") != 0 {
		t.Errorf("%s{hook=audit} not exported at 0 once an audit hook connected", lost)
	}
	if !has(t, reg, dropped, "hook", "audit") || value(t, reg, dropped, "hook", "audit") != 0 {
		t.Errorf("%s{hook=audit} not exported at 0 once an audit hook connected", dropped)
	}
	h.HookFailure("audit", "result", true)
	if got := value(t, reg, name, "hook", "audit", "stage", "result", "outcome", "fail_open"); got != 1 {
		t.Errorf("%s{hook=audit,stage=result} = %v, want 1", name, got)
	}
}

// hookKeeper records the names a HookSeriesKeeper is given.
type hookKeeper struct{ retired, unretired []string }

func (k *hookKeeper) Retire(hook string)   { k.retired = append(k.retired, hook) }
func (k *hookKeeper) Unretire(hook string) { k.unretired = append(k.unretired, hook) }

// TestHookSeriesOutliveTheLastHook: with a keeper, a hook name's series stay after its
// last hook left, with the counts of its last moments, until the keeper forgets the
// name; a hook of the name connecting before then counts on in them. They were deleted
// as the hook left, so a hook failing closed and then killed could leave its last
// failures unscraped and unseen by ToolsdHookFailingClosed.
func TestHookSeriesOutliveTheLastHook(t *testing.T) {
	m, reg := newMetrics(t)
	keep := &hookKeeper{}
	h := m.Hooks(keep)
	const name = "toolsd_hook_failures_total"
	closed := []string{"hook", "audit", "stage", "pre_execute", "outcome", "fail_closed"}
	h.HookConnected("audit", 1)
	h.HookFailure("audit", "pre_execute", false)
	h.HookConnected("audit", -1)
	if got := value(t, reg, name, closed...); got != 1 {
		t.Errorf("%s{hook=audit,fail_closed} after the hook left = %v, want 1", name, got)
	}
	if !slices.Equal(keep.retired, []string{"audit"}) {
		t.Errorf("names retired = %q, want [audit]", keep.retired)
	}
	// Failures after it left still count under "".
	h.HookFailure("audit", "pre_execute", false)
	if got := value(t, reg, name, closed...); got != 1 {
		t.Errorf("%s{hook=audit,fail_closed} after a late failure = %v, want 1", name, got)
	}
	h.HookConnected("audit", 1)
	h.HookFailure("audit", "pre_execute", false)
	if got := value(t, reg, name, closed...); got != 2 {
		t.Errorf("%s{hook=audit,fail_closed} after it came back = %v, want 2", name, got)
	}
	if !slices.Equal(keep.unretired, []string{"audit", "audit"}) {
		t.Errorf("names unretired = %q, want [audit audit]", keep.unretired)
	}
	m.ForgetHook("audit") // connected: kept
	if !has(t, reg, name, "hook", "audit") {
		t.Errorf("ForgetHook deleted %s{hook=audit} while an audit hook is connected", name)
	}
	h.HookConnected("audit", -1)
	m.ForgetHook("audit")
	for _, metric := range []string{name, "toolsd_hook_result_notifications_lost_total", "toolsd_hook_contexts_dropped_total"} {
		if has(t, reg, metric, "hook", "audit") {
			t.Errorf("%s{hook=audit} still exported once the name was forgotten", metric)
		}
	}
}

// exerciseAll moves every toolsd metric at least once.
func exerciseAll(t *testing.T, m *observe.Metrics) {
	t.Helper()
	b := m.Broker()
	b.ProviderConnected(1)
	b.CallRejected(tool.CodeProviderOverloaded)
	b.StaleResult()
	b.InvalidResult()
	b.MalformedMessage()
	p := m.Pipeline()
	p.DispatchStarted("read")
	p.Retried("read", tool.CodeProviderGone, 2)
	p.DispatchFinished("read", "", time.Millisecond)
	s := m.Scheduler()
	s.CallStarted(&tool.Call{})
	s.CallSkipped(&tool.Call{})
	s.PoolOccupancy(1)
	s.ContextsDropped(1)
	m.Runner(scheduler.RunnerFunc(func(context.Context, *tool.Exec) tool.Result { return tool.Result{} })).
		Run(t.Context(), &tool.Exec{})
	ss := m.Session()
	ss.AppendDone(1, time.Millisecond)
	ss.SyncDone(time.Millisecond)
	h := m.Hooks(nil)
	h.HookConnected("audit", 1)
	h.HookFailure("audit", "pre_execute", false)
	h.NotificationsLost("audit", 1)
	h.ContextsDropped("audit", 1)
	m.PanicRecovered()
	m.BatchRefused("max_batches")
	m.WatchRefused("max_watches")
	m.OpenConnections(func() int { return 1 })
	m.ConnectionRefused()
	m.ConfigLoaded()
	m.ConfigReloaded(false)
	m.ApprovalsPending().Inc()
	m.RegisteredTools(func() int { return 1 })
	pipe := pipeline.New(tools(newTool("read", "p1")), succeed("ok"),
		pipeline.WithStageTracer(observe.NewCallObserver(m)))
	pipe.Run(t.Context(), newExec("read", `{}`))
}

// metricNames is every metric toolsd exports from this package.
var metricNames = []string{
	"toolsd_broker_calls_rejected_total",
	"toolsd_broker_invalid_results_total",
	"toolsd_broker_malformed_messages_total",
	"toolsd_broker_providers_connected",
	"toolsd_broker_stale_results_total",
	"toolsd_config_last_reload_success_timestamp_seconds",
	"toolsd_config_last_reload_successful",
	"toolsd_config_reloads_total",
	"toolsd_hook_contexts_dropped_total",
	"toolsd_hook_failures_total",
	"toolsd_hook_hooks_connected",
	"toolsd_hook_result_notifications_lost_total",
	"toolsd_pipeline_approvals_pending",
	"toolsd_pipeline_call_duration_seconds",
	"toolsd_pipeline_calls_in_flight",
	"toolsd_pipeline_calls_total",
	"toolsd_pipeline_dispatches_in_flight",
	"toolsd_pipeline_retries_total",
	"toolsd_pipeline_stage_duration_seconds",
	"toolsd_registry_tools",
	"toolsd_scheduler_batch_pool_occupancy",
	"toolsd_scheduler_calls_skipped_total",
	"toolsd_scheduler_calls_started_total",
	"toolsd_scheduler_contexts_dropped_total",
	"toolsd_scheduler_running_calls",
	"toolsd_server_batches_refused_total",
	"toolsd_server_connections",
	"toolsd_server_connections_refused_total",
	"toolsd_server_panics_recovered_total",
	"toolsd_server_watches_refused_total",
	"toolsd_session_append_duration_seconds",
	"toolsd_session_appended_events_total",
	"toolsd_session_journal_bytes",
	"toolsd_session_journal_rewrites_total",
	"toolsd_session_sync_duration_seconds",
}

func TestMetricsPassPromlint(t *testing.T) {
	m, reg := newMetrics(t)
	exerciseAll(t, m)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather() = %v", err)
	}
	var names []string
	for _, mf := range mfs {
		names = append(names, mf.GetName())
	}
	if diff := cmp.Diff(metricNames, names); diff != "" {
		t.Errorf("exported metrics (-want +got):\n%s", diff)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatalf("GatherAndLint() = %v", err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}

func TestNewOnSameRegistryPanics(t *testing.T) {
	reg := prometheus.NewRegistry()
	observe.New(reg)
	defer func() {
		if recover() == nil {
			t.Error("second New on one registry did not panic")
		}
	}()
	observe.New(reg)
}

func TestCustomBuckets(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := observe.New(reg, observe.WithSessionBuckets([]float64{0.5, 1}))
	m.Session().SyncDone(time.Second)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather() = %v", err)
	}
	i := slices.IndexFunc(mfs, func(mf *dto.MetricFamily) bool { return mf.GetName() == "toolsd_session_sync_duration_seconds" })
	if i < 0 {
		t.Fatal("no toolsd_session_sync_duration_seconds")
	}
	if got := len(mfs[i].GetMetric()[0].GetHistogram().GetBucket()); got != 2 {
		t.Errorf("sync histogram has %d buckets, want 2", got)
	}
}

// TestDepartedHookSeriesStartAtZero: failures of requests pending on a dropped hook
// stream count under hook="" (the hook has left by then). Those series must exist at 0
// from the start, as a connected name's do, or rate() never sees the first burst (a
// series born at N has no increase) and ToolsdHookFailingClosed misses the typical
// "hook dropped its stream" case.
func TestDepartedHookSeriesStartAtZero(t *testing.T) {
	_, reg := newMetrics(t)
	const name = "toolsd_hook_failures_total"
	for _, stage := range []string{"pre_execute", "post_execute", "result"} {
		for _, outcome := range []string{"fail_open", "fail_closed"} {
			if !has(t, reg, name, "hook", "", "stage", stage, "outcome", outcome) {
				t.Errorf("%s{hook=\"\",stage=%q,outcome=%q} not exported before any failure", name, stage, outcome)
				continue
			}
			if got := value(t, reg, name, "hook", "", "stage", stage, "outcome", outcome); got != 0 {
				t.Errorf("%s{hook=\"\",stage=%q,outcome=%q} = %v, want 0", name, stage, outcome, got)
			}
		}
	}
}

// TestRejectionSeriesStartAtZero: both codes of calls_rejected_total exist at 0 from
// the start, like hook="" failures: a series born at its count shows no increase to
// rate(), so the first burst of rejections (a provider at its in-flight limit) would
// not show on the dashboard.
func TestRejectionSeriesStartAtZero(t *testing.T) {
	_, reg := newMetrics(t)
	const name = "toolsd_broker_calls_rejected_total"
	for _, code := range []string{"PROVIDER_UNAVAILABLE", "PROVIDER_OVERLOADED"} {
		if !has(t, reg, name, "code", code) {
			t.Errorf("%s{code=%q} not exported before any rejection", name, code)
			continue
		}
		if got := value(t, reg, name, "code", code); got != 0 {
			t.Errorf("%s{code=%q} = %v, want 0", name, code, got)
		}
	}
}

// TestRefusalSeriesStartAtZero: every limit of batches_refused_total and of
// watches_refused_total (health watches' too) exists at 0 from the start, so that rate() sees the first
// refusals; a refusal counts under its limit.
func TestRefusalSeriesStartAtZero(t *testing.T) {
	for name, tc := range map[string]struct {
		limits []string
		refuse func(*observe.Metrics, string)
	}{
		"toolsd_server_batches_refused_total": {[]string{"max_batches", "max_batches_per_identity"}, (*observe.Metrics).BatchRefused},
		"toolsd_server_watches_refused_total": {[]string{"max_watches", "max_watches_per_identity", "max_health_watches"}, (*observe.Metrics).WatchRefused},
	} {
		t.Run(name, func(t *testing.T) {
			m, reg := newMetrics(t)
			for _, limit := range tc.limits {
				if !has(t, reg, name, "limit", limit) {
					t.Errorf("%s{limit=%q} not exported before any refusal", name, limit)
					continue
				}
				if got := value(t, reg, name, "limit", limit); got != 0 {
					t.Errorf("%s{limit=%q} = %v, want 0", name, limit, got)
				}
			}
			tc.refuse(m, tc.limits[1])
			if got := value(t, reg, name, "limit", tc.limits[1]); got != 1 {
				t.Errorf("%s{limit=%q} = %v after one refusal, want 1", name, tc.limits[1], got)
			}
		})
	}
}

// TestConnectionSeries: the open-connections gauge and the refused connections exist
// at 0 from the start; the gauge reads the listener's count at each scrape, back to 0
// once its connections closed.
func TestConnectionSeries(t *testing.T) {
	m, reg := newMetrics(t)
	for _, name := range []string{"toolsd_server_connections", "toolsd_server_connections_refused_total"} {
		if got := value(t, reg, name); got != 0 {
			t.Errorf("%s = %v at the start, want 0", name, got)
		}
	}
	open := 2
	m.OpenConnections(func() int { return open })
	m.ConnectionRefused()
	if got := value(t, reg, "toolsd_server_connections"); got != 2 {
		t.Errorf("toolsd_server_connections = %v with two open, want 2", got)
	}
	open = 0
	if got := value(t, reg, "toolsd_server_connections"); got != 0 {
		t.Errorf("toolsd_server_connections = %v after both closed, want 0", got)
	}
	if got := value(t, reg, "toolsd_server_connections_refused_total"); got != 1 {
		t.Errorf("toolsd_server_connections_refused_total = %v after one refusal, want 1", got)
	}
}
