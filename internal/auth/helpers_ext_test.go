package auth_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/toolsd/toolsd/internal/auth"
)

// whoamiDesc is a tiny service whose RPCs answer "<method>:<name>" of the caller's
// identity, and fail if the caller's credentials are still visible to the handler.
var whoamiDesc = grpc.ServiceDesc{
	ServiceName: "authtest.WhoAmI",
	HandlerType: (*any)(nil),
	Methods:     []grpc.MethodDesc{{MethodName: "Unary", Handler: whoamiUnary}},
	Streams:     []grpc.StreamDesc{{StreamName: "Stream", Handler: whoamiStream, ServerStreams: true}},
}

func whoami(ctx context.Context) (*wrapperspb.StringValue, error) {
	if md, _ := metadata.FromIncomingContext(ctx); len(md.Get("authorization")) > 0 {
		return nil, status.Error(codes.Internal, "credentials reached the handler")
	}
	id, ok := auth.FromContext(ctx)
	if !ok {
		return nil, status.Error(codes.Internal, "no identity in the handler's context")
	}
	return wrapperspb.String(id.Method + ":" + id.Name), nil
}

//nolint:revive // the argument order is grpc.MethodDesc.Handler's.
func whoamiUnary(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
	in := new(emptypb.Empty)
	if err := dec(in); err != nil {
		return nil, err
	}
	h := func(ctx context.Context, _ any) (any, error) { return whoami(ctx) }
	if ic == nil {
		return h(ctx, in)
	}
	return ic(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: "/authtest.WhoAmI/Unary"}, h)
}

func whoamiStream(_ any, ss grpc.ServerStream) error {
	if err := ss.RecvMsg(new(emptypb.Empty)); err != nil {
		return err
	}
	out, err := whoami(ss.Context())
	if err != nil {
		return err
	}
	return ss.SendMsg(out)
}

// startServer serves whoami on 127.0.0.1:0 behind a's interceptors.
func startServer(tb testing.TB, a *auth.Authenticator, tlsCfg *tls.Config) string {
	tb.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	opts := []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(a.UnaryServerInterceptor()),
		grpc.ChainStreamInterceptor(a.StreamServerInterceptor()),
	}
	if tlsCfg != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(tlsCfg)))
	}
	s := grpc.NewServer(opts...)
	s.RegisterService(&whoamiDesc, struct{}{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Serve(lis)
	}()
	tb.Cleanup(func() {
		s.Stop()
		<-done
	})
	return lis.Addr().String()
}

func dial(tb testing.TB, addr string, tlsCfg *tls.Config) *grpc.ClientConn {
	tb.Helper()
	creds := insecure.NewCredentials()
	if tlsCfg != nil {
		creds = credentials.NewTLS(tlsCfg)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = conn.Close() })
	return conn
}

func testContext(tb testing.TB) context.Context {
	tb.Helper()
	ctx, cancel := context.WithTimeout(tb.Context(), 10*time.Second)
	tb.Cleanup(cancel)
	return ctx
}

// callUnary calls whoami with the given authorization header values (none when empty).
func callUnary(ctx context.Context, conn *grpc.ClientConn, authz ...string) (string, error) {
	for _, v := range authz {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", v)
	}
	out := new(wrapperspb.StringValue)
	if err := conn.Invoke(ctx, "/authtest.WhoAmI/Unary", &emptypb.Empty{}, out); err != nil {
		return "", err
	}
	return out.GetValue(), nil
}

func callStream(ctx context.Context, conn *grpc.ClientConn, authz ...string) (string, error) {
	for _, v := range authz {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", v)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cs, err := conn.NewStream(ctx, &whoamiDesc.Streams[0], "/authtest.WhoAmI/Stream")
	if err != nil {
		return "", err
	}
	if err := cs.SendMsg(&emptypb.Empty{}); err != nil {
		return "", err
	}
	if err := cs.CloseSend(); err != nil {
		return "", err
	}
	out := new(wrapperspb.StringValue)
	if err := cs.RecvMsg(out); err != nil {
		return "", err
	}
	return out.GetValue(), nil
}

// errReason returns the status code and ErrorInfo reason of err.
func errReason(err error) (codes.Code, string) {
	st := status.Convert(err)
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return st.Code(), info.GetReason()
		}
	}
	return st.Code(), ""
}

func writeFile(tb testing.TB, name string, data []byte) string {
	tb.Helper()
	p := filepath.Join(tb.TempDir(), name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		tb.Fatal(err)
	}
	return p
}

func mustNew(tb testing.TB, cfg auth.Config, opts ...auth.Option) (*auth.Authenticator, *auth.Authorizer) {
	tb.Helper()
	a, z, err := auth.New(cfg, opts...)
	if err != nil {
		tb.Fatalf("New() = %v, want no error", err)
	}
	return a, z
}

// Keys are expensive under -race; generate each once per test binary.
var (
	rsaOnce sync.Once
	rsaKey  *rsa.PrivateKey
)

func testRSAKey(tb testing.TB) *rsa.PrivateKey {
	tb.Helper()
	rsaOnce.Do(func() {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		rsaKey = k
	})
	return rsaKey
}

func newECKey(tb testing.TB) *ecdsa.PrivateKey {
	tb.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	return k
}
