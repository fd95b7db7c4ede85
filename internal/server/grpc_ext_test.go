package server_test

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/toolsd/toolsd/internal/server"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// panicService has one unary method that panics.
var panicService = &grpc.ServiceDesc{
	ServiceName: "toolsd.test.Panic",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Boom",
		Handler: func(_ any, ctx context.Context, dec func(any) error, in grpc.UnaryServerInterceptor) (any, error) {
			h := func(context.Context, any) (any, error) { panic("secret-payload") }
			if err := dec(new(emptypb.Empty)); err != nil {
				return nil, err
			}
			return in(ctx, new(emptypb.Empty), &grpc.UnaryServerInfo{FullMethod: "/toolsd.test.Panic/Boom"}, h)
		},
	}},
}

// TestRecoveryAnswersPlainInternal: a handler panic is logged with its stack, counted,
// and answered with a plain Internal that carries neither the panic value nor the stack.
func TestRecoveryAnswersPlainInternal(t *testing.T) {
	core, logs := observer.New(zap.ErrorLevel)
	reg := prometheus.NewRegistry()
	var panics atomic.Int32
	srv, metrics := server.NewGRPCServer(server.GRPCConfig{
		Logger: zap.New(core), Metrics: reg, OnPanic: func() { panics.Add(1) },
		MaxRecvMsgSize: 1 << 20, MaxConcurrentStreams: 10,
	})
	srv.RegisterService(panicService, nil)
	metrics.InitializeMetrics(srv)
	lis := bufconn.Listen(1 << 20)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	defer func() {
		srv.Stop()
		if err := <-served; err != nil {
			t.Errorf("Serve() = %v after Stop, want nil", err)
		}
	}()
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()

	err = conn.Invoke(t.Context(), "/toolsd.test.Panic/Boom", new(emptypb.Empty), new(emptypb.Empty))
	if s := status.Convert(err); s.Code() != codes.Internal || s.Message() != "internal error" {
		t.Errorf("Boom() = %v, want Internal \"internal error\"", err)
	}
	if panics.Load() != 1 {
		t.Errorf("OnPanic calls = %d, want 1", panics.Load())
	}
	lines := logs.FilterMessage("panic in handler").All()
	if len(lines) != 1 || !strings.Contains(lines[0].ContextMap()["stack"].(string), "goroutine") {
		t.Errorf("panic log lines = %v, want one with the stack", lines)
	}
	n, err := testutil.GatherAndCount(reg, "grpc_server_handled_total")
	if err != nil || n == 0 {
		t.Fatalf("grpc_server_handled_total series = %d, %v", n, err)
	}
	if got := rpcCount(t, reg, "Boom", "Internal"); got != 1 {
		t.Errorf("grpc_server_handled_total{grpc_method=Boom,grpc_code=Internal} = %v, want 1", got)
	}
}
