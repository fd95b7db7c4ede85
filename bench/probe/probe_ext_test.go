package probe_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/toolsd/toolsd/bench/probe"
	"github.com/toolsd/toolsd/bench/relay"
	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
)

// serve runs services on loopback TCP until the test ends.
func serve(tb testing.TB, register func(*grpc.Server)) string {
	tb.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	g := grpc.NewServer()
	register(g)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = g.Serve(lis)
	}()
	tb.Cleanup(func() {
		g.Stop()
		<-done
	})
	return lis.Addr().String()
}

// registry is a fake toolsd: it keeps tools registered over Connect (up to limit) and
// lists them in Schemas.
type registry struct {
	toolsdv1.UnimplementedToolServiceServer
	toolsdv1.UnimplementedProviderServiceServer
	limit int
	mu    sync.Mutex
	names []string
}

func (r *registry) Schemas(context.Context, *toolsdv1.SchemasRequest) (*toolsdv1.SchemasResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	resp := &toolsdv1.SchemasResponse{}
	for _, n := range r.names {
		resp.Tools = append(resp.Tools, &toolsdv1.ToolSchema{Name: n})
	}
	return resp, nil
}

func (r *registry) Connect(stream toolsdv1.ProviderService_ConnectServer) error {
	if _, err := stream.Recv(); err != nil {
		return err
	}
	if err := stream.Send(&toolsdv1.ProviderServiceConnectResponse{Msg: &toolsdv1.ProviderServiceConnectResponse_Welcome{Welcome: &toolsdv1.ProviderWelcome{ProviderId: "p"}}}); err != nil {
		return err
	}
	for {
		m, err := stream.Recv()
		if err != nil {
			return nil
		}
		reg := m.GetRegister()
		res := &toolsdv1.RegisterToolsResult{Ref: reg.GetRef()}
		r.mu.Lock()
		for _, d := range reg.GetTools() {
			st := &toolsdv1.ToolRegistrationStatus{Name: d.GetName()}
			if len(r.names) >= r.limit {
				st.ErrorCode = "RESOURCE_EXHAUSTED"
			} else {
				r.names = append(r.names, d.GetName())
			}
			res.Tools = append(res.Tools, st)
		}
		sort.Strings(r.names)
		r.mu.Unlock()
		if err := stream.Send(&toolsdv1.ProviderServiceConnectResponse{Msg: &toolsdv1.ProviderServiceConnectResponse_RegisterResult{RegisterResult: res}}); err != nil {
			return err
		}
	}
}

func TestSchemasLatency(t *testing.T) {
	tests := map[string]struct {
		limit   int
		wantErr error
	}{
		"all accepted":   {limit: 5000},
		"limit exceeded": {limit: 1000, wantErr: probe.ErrRejected},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			reg := &registry{limit: tc.limit}
			addr := serve(t, func(g *grpc.Server) {
				toolsdv1.RegisterToolServiceServer(g, reg)
				toolsdv1.RegisterProviderServiceServer(g, reg)
			})
			got, err := probe.SchemasLatency(t.Context(), addr, 1200, 20)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("SchemasLatency() error = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil || got.Tools != 1200 || got.P50 <= 0 || got.P99 < got.P50 {
				t.Fatalf("SchemasLatency() = %+v, %v, want 1200 tools and latencies", got, err)
			}
		})
	}
}

func relayAddr(tb testing.TB) string {
	tb.Helper()
	return serve(tb, relay.NewServer().Register)
}

func TestIdleStreamBytes(t *testing.T) {
	if _, err := probe.IdleStreamBytes(t.Context(), relayAddr(t), os.Getpid(), 50); err != nil {
		t.Fatalf("IdleStreamBytes() error = %v", err)
	}
}

func TestIdleStreamBytesServerDown(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	if _, err := probe.IdleStreamBytes(t.Context(), addr, os.Getpid(), 3); err == nil {
		t.Fatal("IdleStreamBytes(no server) error = nil, want an error")
	}
}

// TestInflightCallBytes parks calls at the relay (which routes to the latest provider:
// the probe's parking provider) and checks that every batch settles.
func TestInflightCallBytes(t *testing.T) {
	if _, err := probe.InflightCallBytes(t.Context(), relayAddr(t), os.Getpid(), 150); err != nil {
		t.Fatalf("InflightCallBytes() error = %v", err)
	}
}

// limitedRelay is a relay that refuses every batch past its first limit, as a server
// whose in-flight limits do not admit the probe's calls.
type limitedRelay struct {
	*relay.Server
	limit   int64
	batches atomic.Int64
}

func (r *limitedRelay) ExecuteBatch(stream toolsdv1.ToolService_ExecuteBatchServer) error {
	if r.batches.Add(1) > r.limit {
		return status.Error(codes.ResourceExhausted, "too many calls in flight")
	}
	return r.Server.ExecuteBatch(stream)
}

// TestInflightCallBytesSaysHowManyArrived: a server that does not take every call fails
// the probe, and the failure says how many calls reached the provider, which tells a
// limit that admitted some from one that admitted none.
func TestInflightCallBytesSaysHowManyArrived(t *testing.T) {
	const calls = 150
	r := &limitedRelay{Server: relay.NewServer(), limit: 100}
	addr := serve(t, func(g *grpc.Server) {
		toolsdv1.RegisterToolServiceServer(g, r)
		toolsdv1.RegisterProviderServiceServer(g, r)
	})
	_, err := probe.InflightCallBytes(t.Context(), addr, os.Getpid(), calls)
	if want := fmt.Sprintf("of %d calls arrived", calls); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("InflightCallBytes() error = %v, want one saying %q", err, want)
	}
}
