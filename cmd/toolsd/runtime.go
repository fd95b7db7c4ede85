package main

import (
	"context"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"

	"go.uber.org/zap"

	"github.com/toolsd/toolsd/internal/config"
	"github.com/toolsd/toolsd/internal/procs"
)

// applyRuntime sets the collector's target and soft memory limit from the config,
// unless the standard GOGC / GOMEMLIMIT variables are set (those already configured the
// runtime at start and win). A variable counts as set as the runtime reads it: not when
// empty, nor a GOGC other than "off" or a number (the runtime keeps its default of 100
// then). It returns the effective GC percent and memory limit (math.MaxInt64 when none).
func applyRuntime(c config.Runtime, log *zap.Logger) (gcPercent int, memLimit int64) {
	if gogcSet() {
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

// gogcSet reports whether GOGC set the collector's target at start: the runtime reads
// "off" or a number, and anything else as unset.
func gogcSet() bool {
	v := os.Getenv("GOGC")
	_, ok := runtimeAtoi32(v)
	return v == "off" || ok
}

// gomaxprocsSet reports whether GOMAXPROCS set the runtime's at start: the runtime
// reads a positive number, and anything else (empty, 0, not a number) as unset.
func gomaxprocsSet() bool {
	n, ok := runtimeAtoi32(os.Getenv("GOMAXPROCS"))
	return ok && n > 0
}

// runtimeAtoi32 reads v as the runtime reads its environment's numbers: decimal digits
// with an optional '-', within int32. strconv alone would take "+4", which the runtime
// ignores.
func runtimeAtoi32(v string) (int32, bool) {
	if strings.HasPrefix(v, "+") {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 32)
	return int32(n), err == nil
}

// adaptProcs runs the adaptive GOMAXPROCS controller ctl (runtime.adaptive_procs) until
// ctx ends, unless the config turns it off or a GOMAXPROCS variable is set (which wins,
// as GOGC does). The returned function waits for it to have restored GOMAXPROCS.
func adaptProcs(ctx context.Context, c config.Runtime, ctl *procs.Controller, log *zap.Logger) (wait func()) {
	if set := gomaxprocsSet(); !c.AdaptiveProcs || set {
		log.Debug("adaptive GOMAXPROCS off", zap.Bool("adaptive_procs", c.AdaptiveProcs), zap.Bool("gomaxprocs_set", set))
		return func() {}
	}
	var wg sync.WaitGroup
	wg.Go(func() { ctl.Run(ctx) })
	return wg.Wait
}
