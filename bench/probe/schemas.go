package probe

import (
	"context"
	"fmt"
	"slices"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/toolsd/toolsd/bench/load"
	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
)

// registerChunk is how many definitions go in one RegisterTools message, well under the
// default 4 MiB message limit.
const registerChunk = 500

// Latency is a timed series of requests.
type Latency struct {
	P50, P99 time.Duration
	// Tools is the number of schemas the last response listed.
	Tools int
}

// SchemasLatency registers tools definitions in the global scope through one provider
// stream, then times calls sequential Schemas requests for that scope (after 10 untimed
// ones). Each response must list at least tools schemas. The provider disconnects
// before it returns, which removes the tools.
func SchemasLatency(ctx context.Context, addr string, tools, calls int) (Latency, error) {
	p, err := openProvider(ctx, addr, "probe-schemas")
	if err != nil {
		return Latency{}, err
	}
	defer p.close()
	for ref, lo := uint64(1), 0; lo < tools; ref, lo = ref+1, lo+registerChunk {
		defs := make([]*toolsdv1.ToolDefinition, 0, registerChunk)
		for i := lo; i < min(lo+registerChunk, tools); i++ {
			defs = append(defs, objectTool(fmt.Sprintf("tool_%05d", i)))
		}
		if err := p.register(ref, defs); err != nil {
			return Latency{}, err
		}
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		return Latency{}, fmt.Errorf("probe: dial %s: %w", addr, err)
	}
	defer conn.Close()
	client := toolsdv1.NewToolServiceClient(conn)
	lat := make([]time.Duration, 0, calls)
	var listed int
	for i := range calls + 10 {
		t0 := time.Now()
		resp, err := client.Schemas(ctx, &toolsdv1.SchemasRequest{})
		d := time.Since(t0)
		if err != nil {
			return Latency{}, fmt.Errorf("probe: Schemas: %w", err)
		}
		if listed = len(resp.GetTools()); listed < tools {
			return Latency{}, fmt.Errorf("probe: Schemas listed %d tools, want >= %d", listed, tools)
		}
		if i >= 10 {
			lat = append(lat, d)
		}
	}
	slices.Sort(lat)
	return Latency{P50: load.Percentile(lat, 0.5), P99: load.Percentile(lat, 0.99), Tools: listed}, nil
}
