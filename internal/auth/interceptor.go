package auth

import (
	"context"
	"errors"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/toolsd/toolsd/internal/rpcerr"
)

// AuthFunc authenticates ctx and returns it carrying the [Identity], with the caller's
// credentials stripped ([StripCredentials]). Its error is an Unauthenticated status with
// an ErrorInfo reason (MISSING_CREDENTIALS, INVALID_TOKEN, TOKEN_EXPIRED,
// INVALID_CERTIFICATE). It has the shape of go-grpc-middleware's auth.AuthFunc.
func (a *Authenticator) AuthFunc(ctx context.Context) (context.Context, error) {
	id, err := a.Authenticate(ctx)
	if err != nil {
		return nil, a.reject(ctx, err)
	}
	return NewContext(StripCredentials(ctx), id), nil
}

// UnaryServerInterceptor authenticates every unary RPC. Unlike go-grpc-middleware's auth
// interceptor it has no per-service override: no service can opt itself out (exempt
// health checks with a selector around this interceptor instead).
func (a *Authenticator) UnaryServerInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		ctx, err := a.AuthFunc(ctx)
		if err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// StreamServerInterceptor authenticates every streaming RPC once, when it opens; the
// identity then holds for the stream's life (a JWT expiring mid-stream does not cut a
// provider's stream; its next connection is checked again). A stream that must end
// with its credential ends itself at [Identity.Expires], or at [Identity.CertExpires]
// if that comes first (toolsd's WatchSession does).
func (a *Authenticator) StreamServerInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx, err := a.AuthFunc(ss.Context())
		if err != nil {
			return err
		}
		wrapped := middleware.WrapServerStream(ss)
		wrapped.WrappedContext = ctx
		return handler(srv, wrapped)
	}
}

// StreamServerInterceptor pins the grants in force to every streaming RPC as it opens
// ([Authorizer.PinGrants]): the stream is authorized by them until it ends, whatever a
// reload puts in force meanwhile, as it keeps the identity it was authenticated with. It
// must run after the [Authenticator]'s, which puts the identity in the stream's context.
func (z *Authorizer) StreamServerInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		wrapped := middleware.WrapServerStream(ss)
		wrapped.WrappedContext = z.PinGrants(ss.Context())
		return handler(srv, wrapped)
	}
}

func (a *Authenticator) reject(ctx context.Context, err error) error {
	reason, detail := ReasonInvalidToken, err.Error()
	var ce *CredentialError
	if errors.As(err, &ce) {
		reason = ce.Reason
	}
	fields := []zap.Field{zap.String("reason", reason), zap.String("error", detail)}
	if m, ok := grpc.Method(ctx); ok {
		fields = append(fields, zap.String("rpc", m))
	}
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		fields = append(fields, zap.String("peer", p.Addr.String()))
	}
	a.log.Info("authentication failed", fields...)
	return rpcerr.Error(codes.Unauthenticated, reason, detail)
}

// StripCredentials returns ctx without the caller's authorization metadata, so nothing
// downstream can forward a caller's token by copying incoming metadata. The
// interceptors apply it to every authenticated request; toolsd's broker and hook layers
// never copy incoming metadata in any case: they build their own messages to providers
// and hooks, which authenticate to toolsd, never as the agent.
func StripCredentials(ctx context.Context) context.Context {
	if md, ok := metadata.FromIncomingContext(ctx); ok && len(md.Get("authorization")) > 0 {
		md = md.Copy()
		md.Delete("authorization")
		ctx = metadata.NewIncomingContext(ctx, md)
	}
	if md, ok := metadata.FromOutgoingContext(ctx); ok && len(md.Get("authorization")) > 0 {
		md = md.Copy()
		md.Delete("authorization")
		ctx = metadata.NewOutgoingContext(ctx, md)
	}
	return ctx
}
