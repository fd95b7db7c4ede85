package server_test

import (
	"context"
	"strconv"
	"testing"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/stats"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/registry"
	"github.com/toolsd/toolsd/internal/server"
	"github.com/toolsd/toolsd/internal/session"
	"github.com/toolsd/toolsd/internal/tool"
)

// serveSchemaWatchBench serves a ToolService over a registry of its own on bufconn,
// with no-op loggers (a benchmark must not log), and returns the registry and a client.
// ends, if not nil, is the server's stats handler.
func serveSchemaWatchBench(b *testing.B, ends stats.Handler) (*registry.Registry, toolsdv1.ToolServiceClient) {
	b.Helper()
	reg := registry.New(registry.WithLogger(zap.NewNop()))
	mem := session.NewMemory()
	b.Cleanup(func() { _ = mem.Close() })
	srv := server.New(server.Deps{Registry: reg, Sessions: mem, Logger: zap.NewNop()})
	g, _ := server.NewGRPCServer(server.GRPCConfig{Logger: zap.NewNop(), StatsHandler: ends, MaxRecvMsgSize: 1 << 20})
	toolsdv1.RegisterToolServiceServer(g, srv)
	conn := serveBufconn(b, g, grpc.WithTransportCredentials(insecure.NewCredentials()))
	return reg, toolsdv1.NewToolServiceClient(conn)
}

// openSchemaWatches opens one WatchSchemas of each scope and reads its first
// fingerprint; the watches are cancelled when the benchmark ends.
func openSchemaWatches(b *testing.B, tools toolsdv1.ToolServiceClient, scopes []string) []toolsdv1.ToolService_WatchSchemasClient {
	b.Helper()
	ctx, cancel := context.WithCancel(b.Context())
	b.Cleanup(cancel)
	ws := make([]toolsdv1.ToolService_WatchSchemasClient, len(scopes))
	for i, scope := range scopes {
		w, err := tools.WatchSchemas(ctx, &toolsdv1.WatchSchemasRequest{Scope: scope})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := w.Recv(); err != nil {
			b.Fatalf("WatchSchemas(%q).Recv() = %v", scope, err)
		}
		ws[i] = w
	}
	return ws
}

// recvToolCount reads one fingerprint from each of ws, which must count n tools.
func recvToolCount(b *testing.B, ws []toolsdv1.ToolService_WatchSchemasClient, n uint32, after string) {
	b.Helper()
	for _, w := range ws {
		m, err := w.Recv()
		if err != nil {
			b.Fatalf("WatchSchemas.Recv() after %s = %v", after, err)
		}
		if m.GetToolCount() != n {
			b.Fatalf("WatchSchemas.Recv() after %s = %d tools, want %d", after, m.GetToolCount(), n)
		}
	}
}

// watchedScopes returns n distinct scopes, tenants of ten agents each.
func watchedScopes(n int) []string {
	scopes := make([]string, n)
	for i := range scopes {
		scopes[i] = "tenant_" + strconv.Itoa(i/10) + "/agent_" + strconv.Itoa(i%10)
	}
	return scopes
}

// BenchmarkRegistryChangeWithWatchedScopes measures what WatchSchemas adds to a
// registry change (a Register and an Unregister of one tool) while N distinct scopes
// are watched, one WatchSchemas each over bufconn:
//
//   - "unwatched scope": the change is in a scope of a tenant nobody watches, so it
//     sends nothing; ns/op is what the registry's writers pay, as the change's
//     callback looks for the watched scopes it may affect.
//   - "watched scope": the change is in one of the N watched scopes; an op ends once
//     that scope's watcher has received the fingerprint after the Register and the one
//     after the Unregister (N starts at 1: the changed scope is one of them).
//   - "global scope": the change is in the global scope, which every watched scope
//     sees; an op ends once all N watchers have received both fingerprints, so ns/op
//     is the whole fan-out: N projections and 2N sends and receives.
func BenchmarkRegistryChangeWithWatchedScopes(b *testing.B) {
	d := tool.Definition{Name: "fresh", Description: "a tool registered and unregistered", Parameters: []byte(`{"type":"object"}`)}
	change := func(b *testing.B, reg *registry.Registry, scope string, after func(tools uint32, what string)) {
		if _, err := reg.Register(scope, d, "p1"); err != nil {
			b.Fatalf("Register(%q) = %v", scope, err)
		}
		after(1, "a registration")
		if err := reg.Unregister(scope, d.Name, "p1"); err != nil {
			b.Fatalf("Unregister(%q) = %v", scope, err)
		}
		after(0, "an unregistration")
	}
	for _, n := range []int{0, 100, 1000} {
		b.Run("unwatched scope/watched="+strconv.Itoa(n), func(b *testing.B) {
			reg, tools := serveSchemaWatchBench(b, nil)
			openSchemaWatches(b, tools, watchedScopes(n))
			b.ReportAllocs()
			for b.Loop() {
				change(b, reg, "quiet/agent", func(uint32, string) {})
			}
		})
	}
	for _, n := range []int{1, 100, 1000} {
		b.Run("watched scope/watched="+strconv.Itoa(n), func(b *testing.B) {
			reg, tools := serveSchemaWatchBench(b, nil)
			scopes := watchedScopes(n)
			ws := openSchemaWatches(b, tools, scopes)
			b.ReportAllocs()
			for b.Loop() {
				change(b, reg, scopes[0], func(tools uint32, what string) { recvToolCount(b, ws[:1], tools, what) })
			}
		})
	}
	for _, n := range []int{0, 100, 1000} {
		b.Run("global scope/watched="+strconv.Itoa(n), func(b *testing.B) {
			reg, tools := serveSchemaWatchBench(b, nil)
			ws := openSchemaWatches(b, tools, watchedScopes(n))
			b.ReportAllocs()
			for b.Loop() {
				change(b, reg, "", func(tools uint32, what string) { recvToolCount(b, ws, tools, what) })
			}
		})
	}
}

// BenchmarkWatchSchemasOpen measures a watch's whole life with nothing to follow: it
// is opened, sends its first fingerprint (of a scope that sees 20 tools), is cancelled,
// and its handler returns. In "new scope" it is the only watch, so it also takes and
// drops the registry subscription; in "watched scope" another watch of the scope is
// open, so it joins and leaves that scope's watch.
func BenchmarkWatchSchemasOpen(b *testing.B) {
	const scope = "team/agent"
	for _, bc := range []struct {
		name   string
		others []string // the scopes watched throughout
	}{
		{"new scope", nil},
		{"watched scope", []string{scope}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ends := make(watchRPCEnds, 2) // this op's watch, and the other at the end
			reg, tools := serveSchemaWatchBench(b, ends)
			for i := range 20 {
				d := tool.Definition{Name: "t" + strconv.Itoa(i), Description: "one of the team's tools", Parameters: []byte(`{"type":"object"}`)}
				if _, err := reg.Register("team", d, "p1"); err != nil {
					b.Fatal(err)
				}
			}
			openSchemaWatches(b, tools, bc.others)
			b.ReportAllocs()
			for b.Loop() {
				ctx, cancel := context.WithCancel(b.Context())
				w, err := tools.WatchSchemas(ctx, &toolsdv1.WatchSchemasRequest{Scope: scope})
				if err != nil {
					b.Fatal(err)
				}
				if m, err := w.Recv(); err != nil || m.GetToolCount() != 20 {
					b.Fatalf("WatchSchemas(%q).Recv() = %d tools, %v; want 20", scope, m.GetToolCount(), err)
				}
				cancel()
				<-ends
			}
		})
	}
}
