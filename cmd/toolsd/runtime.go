package main

import (
	"context"
	"os"
	"runtime/debug"
	"sync"

	"go.uber.org/zap"

	"github.com/toolsd/toolsd/internal/config"
	"github.com/toolsd/toolsd/internal/procs"
)

// applyRuntime sets the collector's target and soft memory limit from the config,
// unless the standard GOGC / GOMEMLIMIT variables are set (those already configured the
// runtime at start and win). An empty variable counts as unset, as the runtime reads
// it. It returns the effective GC percent and memory limit (math.MaxInt64 when none).
func applyRuntime(c config.Runtime, log *zap.Logger) (gcPercent int, memLimit int64) {
	if os.Getenv("GOGC") != "" {
		gcPercent = debug.SetGCPercent(-1)
		debug.SetGCPercent(gcPercent)
	} else {
		debug.SetGCPercent(c.GCPercent)
		gcPercent = c.GCPercent
	}
	if os.Getenv("GOMEMLIMIT") == "" && c.MemoryLimit > 0 {
		debug.SetMemoryLimit(int64(c.MemoryLimit))
	}
	memLimit = debug.SetMemoryLimit(-1) // -1 reads the limit without changing it
	log.Debug("go runtime", zap.Int("gc_percent", gcPercent), zap.Int64("memory_limit", memLimit))
	return gcPercent, memLimit
}

// adaptProcs runs the adaptive GOMAXPROCS controller ctl (runtime.adaptive_procs) until
// ctx ends, unless the config turns it off or a GOMAXPROCS variable is set (which wins,
// as GOGC does). The returned function waits for it to have restored GOMAXPROCS.
func adaptProcs(ctx context.Context, c config.Runtime, ctl *procs.Controller, log *zap.Logger) (wait func()) {
	if !c.AdaptiveProcs || os.Getenv("GOMAXPROCS") != "" {
		log.Debug("adaptive GOMAXPROCS off", zap.Bool("adaptive_procs", c.AdaptiveProcs),
			zap.Bool("gomaxprocs_set", os.Getenv("GOMAXPROCS") != ""))
		return func() {}
	}
	var wg sync.WaitGroup
	wg.Go(func() { ctl.Run(ctx) })
	return wg.Wait
}
