package hook_test

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/hook"
	"github.com/toolsd/toolsd/internal/observe"
)

// TestFailureSeriesLeaveWithTheirHook connects hooks under ever new names, each failing
// once, and checks that toolsd_hook_failures_total does not keep a series per name once
// the hooks have gone: hook names are chosen by clients.
func TestFailureSeriesLeaveWithTheirHook(t *testing.T) {
	const hooks = 40
	reg := prometheus.NewRegistry()
	e := newEnv(t, hook.WithMaxHooks(1), hook.WithObserver(observe.New(reg).Hooks(nil)))
	for i := range hooks {
		hello := helloFor(fmt.Sprintf("random-name-%d", i), sub(pre, "", "", 0))
		hello.FailOpen = true
		h := e.connect(t, hello, always(verdict(toolsdv1.HookVerdict_HOOK_VERDICT_BLOCK, "")))
		e.hub.PreExecute().PreExecute(t.Context(), newExec("echo", `{}`), newTool("echo"))
		// Its name's stage × outcome series, created at 0 when it connected.
		if n := failureSeries(t, reg); n != 6 {
			t.Fatalf("failure series while hook %d is connected = %d, want 6", i, n)
		}
		_ = h.cc.Close()
		<-h.done
		waitUntil(t, "the hook to leave", func() bool { return len(e.hub.Hooks()) == 0 })
	}
	if n := failureSeries(t, reg); n != 0 {
		t.Errorf("failure series after %d hooks left = %d, want 0", hooks, n)
	}
}

// failureSeries counts the series of toolsd_hook_failures_total in g that name a hook
// (those of hook="", for failures after their hook left, always exist).
func failureSeries(tb testing.TB, g prometheus.Gatherer) int {
	tb.Helper()
	mfs, err := g.Gather()
	if err != nil {
		tb.Fatalf("Gather() = %v", err)
	}
	n := 0
	for _, mf := range mfs {
		if mf.GetName() != "toolsd_hook_failures_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "hook" && lp.GetValue() != "" {
					n++
				}
			}
		}
	}
	return n
}
