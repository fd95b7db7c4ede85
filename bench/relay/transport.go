package relay

import (
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/toolsd/toolsd/internal/config"
	"github.com/toolsd/toolsd/pkg/provider"
)

// ServerOptions are the transport settings toolsd's gRPC server runs with by default:
// fixed flow-control windows (so no bandwidth-estimation PINGs per burst of data) and
// kept stream workers. They move bytes, so the relay uses them too: otherwise the
// baseline pays a PING round trip and a goroutine per stream that toolsd does not, and
// toolsd / relay understates toolsd's cost.
func ServerOptions() []grpc.ServerOption {
	cfg := toolsdDefaults()
	return []grpc.ServerOption{
		grpc.StaticStreamWindowSize(int32(cfg.Limits.StreamWindow)),
		grpc.StaticConnWindowSize(int32(cfg.Limits.ConnectionWindow)),
		grpc.NumStreamWorkers(uint32(32 * runtime.GOMAXPROCS(0))), // as internal/app does
	}
}

// ApplyRuntime gives this process the Go runtime settings toolsd runs with by default
// (runtime.gc_percent, runtime.memory_limit), GOGC and GOMEMLIMIT winning as they do in
// toolsd. Collections cost CPU per byte allocated, so a relay at Go's default of 100
// pays collections toolsd (at 400) does not, and toolsd / relay understates toolsd's
// cost. Call it once, at the start of the relay's server process.
func ApplyRuntime() {
	rt := toolsdDefaults().Runtime
	if _, ok := os.LookupEnv("GOGC"); !ok {
		debug.SetGCPercent(rt.GCPercent)
	}
	if _, ok := os.LookupEnv("GOMEMLIMIT"); !ok && rt.MemoryLimit > 0 {
		debug.SetMemoryLimit(int64(rt.MemoryLimit))
	}
}

// providerDialOptions are the provider SDK's default transport settings (fixed windows).
func providerDialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithInitialWindowSize(provider.DefaultStreamWindow),
		grpc.WithInitialConnWindowSize(provider.DefaultConnWindow),
	}
}

// toolsdDefaults is toolsd's embedded default configuration.
var toolsdDefaults = sync.OnceValue(func() *config.Config {
	cfg, err := config.Load("")
	if err != nil {
		panic("relay: toolsd's embedded defaults: " + err.Error())
	}
	return cfg
})

// acceptedHold is toolsd's default limits.accepted_hold.
func acceptedHold() time.Duration { return toolsdDefaults().Limits.AcceptedHold.D() }
