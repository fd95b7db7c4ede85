package main

import (
	"math"
	"os"
	"runtime/debug"
	"testing"

	"go.uber.org/zap"

	"github.com/toolsd/toolsd/internal/config"
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
