package main

import (
	"context"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/toolsd/toolsd/internal/config"
	"github.com/toolsd/toolsd/internal/procs"
)

// keepRuntime restores the collector settings a test changes.
func keepRuntime(t *testing.T) {
	t.Helper()
	gc := debug.SetGCPercent(-1)
	debug.SetGCPercent(gc)
	limit := debug.SetMemoryLimit(-1)
	t.Cleanup(func() {
		debug.SetGCPercent(gc)
		debug.SetMemoryLimit(limit)
	})
}

// unsetenv removes key for the test and restores it afterwards.
func unsetenv(t *testing.T, key string) {
	t.Helper()
	t.Setenv(key, "") // registers the restore
	if err := os.Unsetenv(key); err != nil {
		t.Fatal(err)
	}
}

func TestApplyRuntimeFromConfig(t *testing.T) {
	keepRuntime(t)
	unsetenv(t, "GOGC")
	unsetenv(t, "GOMEMLIMIT")
	gc, limit := applyRuntime(config.Runtime{GCPercent: 250, MemoryLimit: 1 << 30}, zap.NewNop())
	if gc != 250 || limit != 1<<30 {
		t.Fatalf("applyRuntime = (%d, %d), want (250, %d)", gc, limit, 1<<30)
	}
	if got := debug.SetGCPercent(-1); got != 250 {
		t.Errorf("runtime GC percent = %d, want 250", got)
	}
	if got := debug.SetMemoryLimit(-1); got != 1<<30 {
		t.Errorf("runtime memory limit = %d, want %d", got, 1<<30)
	}
}

func TestApplyRuntimeNoLimitByDefault(t *testing.T) {
	keepRuntime(t)
	unsetenv(t, "GOGC")
	unsetenv(t, "GOMEMLIMIT")
	debug.SetMemoryLimit(math.MaxInt64)
	cfg, err := config.Load("")
	if err != nil {
		t.Fatal(err)
	}
	gc, limit := applyRuntime(cfg.Runtime, zap.NewNop())
	if gc != 400 || limit != math.MaxInt64 {
		t.Fatalf("applyRuntime(defaults) = (%d, %d), want (400, no limit)", gc, limit)
	}
}

// The standard variables configured the runtime at start; the config must not undo them.
func TestApplyRuntimeEnvironmentWins(t *testing.T) {
	keepRuntime(t)
	debug.SetGCPercent(123)
	debug.SetMemoryLimit(5 << 30)
	t.Setenv("GOGC", "123")
	t.Setenv("GOMEMLIMIT", "5GiB")
	gc, limit := applyRuntime(config.Runtime{GCPercent: 400, MemoryLimit: 1 << 30}, zap.NewNop())
	if gc != 123 || limit != 5<<30 {
		t.Fatalf("applyRuntime with GOGC/GOMEMLIMIT set = (%d, %d), want (123, %d)", gc, limit, 5<<30)
	}
}

// An empty GOGC or GOMEMLIMIT configures nothing (the runtime reads it as unset, with its
// defaults of 100 and no limit), so the config's values apply: an environment that sets
// GOMEMLIMIT=${LIMIT} with no LIMIT must not silently drop runtime.memory_limit.
func TestApplyRuntimeEmptyEnvironment(t *testing.T) {
	keepRuntime(t)
	debug.SetGCPercent(100)
	debug.SetMemoryLimit(math.MaxInt64)
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	gc, limit := applyRuntime(config.Runtime{GCPercent: 250, MemoryLimit: 1 << 30}, zap.NewNop())
	if gc != 250 || limit != 1<<30 {
		t.Fatalf("applyRuntime with GOGC and GOMEMLIMIT empty = (%d, %d), want (250, %d)", gc, limit, 1<<30)
	}
}

// A GOGC the runtime cannot parse leaves it at its default of 100, as if unset: the
// config's gc_percent applies. "off" is a setting, and wins.
func TestApplyRuntimeUnreadGOGC(t *testing.T) {
	keepRuntime(t)
	unsetenv(t, "GOMEMLIMIT")
	for env, want := range map[string]int{"lots": 250, "1e3": 250, "off": -1} {
		debug.SetGCPercent(100) // what the runtime made of env at start
		if env == "off" {
			debug.SetGCPercent(-1)
		}
		t.Setenv("GOGC", env)
		if gc, _ := applyRuntime(config.Runtime{GCPercent: 250}, zap.NewNop()); gc != want || debug.SetGCPercent(-1) != want {
			t.Errorf("applyRuntime with GOGC=%s = %d, want %d", env, gc, want)
		}
	}
}

// TestAdaptProcs runs the controller as main does: it changes GOMAXPROCS while ctx
// lasts, and the returned wait ends once GOMAXPROCS is back at the runtime's default.
// adaptive_procs: false or a GOMAXPROCS variable keeps it from running: the wait
// returns while ctx lasts.
func TestAdaptProcs(t *testing.T) {
	was := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(was) })
	runtime.SetDefaultGOMAXPROCS() // go test pins GOMAXPROCS (-cpu)
	def := runtime.GOMAXPROCS(0)
	if def < 2 {
		t.Skip("one CPU: the controller has nothing to lower")
	}
	// Every window is calm and none is busy: the first window lowers, and nothing raises.
	calm := procs.Options{Window: time.Millisecond, Calm: 1, UpCores: 1e9, UpQueued: 2, DownCores: 1e9, DownQueued: 2}

	// The runtime reads a GOMAXPROCS that is not a positive number as unset: it keeps
	// its default, so nothing set the value the controller would override.
	for name, env := range map[string]string{"on": "", "on, GOMAXPROCS=0": "0", "on, GOMAXPROCS=all": "all"} {
		t.Run(name, func(t *testing.T) {
			if env == "" {
				unsetenv(t, "GOMAXPROCS")
			} else {
				t.Setenv("GOMAXPROCS", env)
			}
			ctx, cancel := context.WithCancel(t.Context())
			wait := adaptProcs(ctx, config.Runtime{AdaptiveProcs: true}, procs.New(calm, nil, nil), zap.NewNop())
			waitFor(t, "GOMAXPROCS 1", func() bool { return runtime.GOMAXPROCS(0) == 1 })
			cancel()
			wait()
			if got := runtime.GOMAXPROCS(0); got != def {
				t.Errorf("GOMAXPROCS after the wait = %d, want %d (the default, restored)", got, def)
			}
		})
	}
	for name, tc := range map[string]struct {
		on  bool
		env string
	}{
		"adaptive_procs false": {false, ""},
		"GOMAXPROCS set":       {true, strconv.Itoa(def)},
	} {
		t.Run(name, func(t *testing.T) {
			if tc.env == "" {
				unsetenv(t, "GOMAXPROCS")
			} else {
				t.Setenv("GOMAXPROCS", tc.env)
			}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			wait := adaptProcs(ctx, config.Runtime{AdaptiveProcs: tc.on}, procs.New(calm, nil, nil), zap.NewNop())
			done := make(chan struct{})
			go func() {
				defer close(done)
				wait()
			}()
			select {
			case <-done:
			case <-time.After(10 * time.Second): // a safety net: the wait is immediate
				cancel()
				<-done
				t.Fatal("the wait lasted as long as ctx: the controller ran")
			}
			if got := runtime.GOMAXPROCS(0); got != def {
				t.Errorf("GOMAXPROCS = %d, want %d (left alone)", got, def)
			}
		})
	}
}

// TestRuntimeVariablesReadAsTheRuntimeReadsThem: toolsd gives way to GOGC and
// GOMAXPROCS only when the runtime applied them; a value the runtime ignores ("+4",
// "4x", 0 for GOMAXPROCS) leaves toolsd's own settings on.
func TestRuntimeVariablesReadAsTheRuntimeReadsThem(t *testing.T) {
	for v, want := range map[string]bool{"4": true, "+4": false, "4x": false, "0": false, "-1": false, "": false, "2147483648": false} {
		t.Setenv("GOMAXPROCS", v)
		if got := gomaxprocsSet(); got != want {
			t.Errorf("GOMAXPROCS=%q: gomaxprocsSet() = %v, want %v", v, got, want)
		}
	}
	for v, want := range map[string]bool{"100": true, "off": true, "-1": true, "+100": false, "100%": false, "": false} {
		t.Setenv("GOGC", v)
		if got := gogcSet(); got != want {
			t.Errorf("GOGC=%q: gogcSet() = %v, want %v", v, got, want)
		}
	}
}
