package server

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/selector"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
)

// KeepaliveMinTime is the least time toolsd's keepalive enforcement policy permits
// between a client's pings, with or without open streams; a client that pings more
// often is sent GOAWAY (too_many_pings).
const KeepaliveMinTime = 5 * time.Second

// GRPCConfig configures [NewGRPCServer].
type GRPCConfig struct {
	Logger *zap.Logger
	// Metrics is the private Prometheus registry; nil disables RPC metrics.
	Metrics        prometheus.Registerer
	MaxRecvMsgSize int
	// MaxHeaderBytes bounds a request's header list (its metadata); 0 leaves gRPC's
	// default (16 MiB).
	MaxHeaderBytes       uint32
	MaxConcurrentStreams uint32
	KeepaliveTime        time.Duration
	KeepaliveTimeout     time.Duration
	// ConnectionTimeout bounds a new connection's handshake; 0 leaves gRPC's default
	// (120s). (gRPC itself would take 0 as a deadline of now and drop connections.)
	ConnectionTimeout time.Duration
	// Creds are the transport credentials (mTLS); nil means plaintext.
	Creds credentials.TransportCredentials
	// AuthUnary / AuthStream authenticate callers; nil means no authentication.
	AuthUnary  grpc.UnaryServerInterceptor
	AuthStream grpc.StreamServerInterceptor
	// StatsHandler is an optional stats handler (OpenTelemetry tracing).
	StatsHandler stats.Handler
	// OnPanic is called for every recovered panic (a metric counter).
	OnPanic func()
	// StreamWorkers is the number of goroutines kept to run stream handlers; 0 starts a
	// goroutine per stream. A kept worker keeps the stack it grew, where a new goroutine
	// would grow (copy) its stack again in every ExecuteBatch.
	StreamWorkers uint32
	// StreamWindow and ConnWindow fix the HTTP/2 flow-control windows toolsd grants its
	// peers; 0 leaves both to gRPC's bandwidth-delay estimation, which sends a ping with
	// every burst of data it receives (a round trip of wake-ups for every small message).
	StreamWindow, ConnWindow int32
}

// NewGRPCServer builds toolsd's gRPC server with mirrored unary and stream chains.
// The onion, outermost first:
//
//	metrics ─▶ logging ─▶ auth (health exempt) ─▶ bad text ─▶ recovery ─▶ handler
//
// Metrics see every RPC including rejected ones; logging records the final code;
// auth runs before any handler code; bad text refuses the messages the codec marked
// as not UTF-8 (see [lenientCodec]); recovery sits innermost so a handler panic is
// logged with its stack and leaves as a plain Internal that the outer layers count.
// The returned ServerMetrics must be initialized after services are registered.
func NewGRPCServer(c GRPCConfig) (*grpc.Server, *grpcprom.ServerMetrics) {
	log := c.Logger
	if log == nil {
		log = zap.NewNop()
	}
	var unary []grpc.UnaryServerInterceptor
	var streams []grpc.StreamServerInterceptor
	var metrics *grpcprom.ServerMetrics
	if c.Metrics != nil {
		metrics = grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram())
		c.Metrics.MustRegister(metrics)
		unary = append(unary, metrics.UnaryServerInterceptor())
		streams = append(streams, metrics.StreamServerInterceptor())
	}
	logOpts := []logging.Option{logging.WithLogOnEvents(logging.FinishCall), logging.WithLevels(rpcLevel),
		logging.WithDurationField(rpcDuration)}
	unary = append(unary, logging.UnaryServerInterceptor(zapAdapter(log), logOpts...))
	streams = append(streams, logging.StreamServerInterceptor(zapAdapter(log), logOpts...))
	if c.AuthUnary != nil {
		unary = append(unary, selector.UnaryServerInterceptor(c.AuthUnary, selector.MatchFunc(notHealth)))
	}
	if c.AuthStream != nil {
		streams = append(streams, selector.StreamServerInterceptor(c.AuthStream, selector.MatchFunc(notHealth)))
	}
	textUnary, textStream := refuseBadText(log)
	unary, streams = append(unary, textUnary), append(streams, textStream)
	rec := recovery.WithRecoveryHandlerContext(func(ctx context.Context, p any) error {
		log.Error("panic in handler", zap.Any("panic", p), zap.ByteString("stack", debug.Stack()))
		if c.OnPanic != nil {
			c.OnPanic()
		}
		return status.Error(codes.Internal, "internal error")
	})
	unary = append(unary, recovery.UnaryServerInterceptor(rec))
	streams = append(streams, recovery.StreamServerInterceptor(rec))

	opts := []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(unary...),
		grpc.ChainStreamInterceptor(streams...),
		grpc.MaxRecvMsgSize(c.MaxRecvMsgSize),
		grpc.ForceServerCodecV2(newLenientCodec()),
		grpc.MaxConcurrentStreams(c.MaxConcurrentStreams),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: c.KeepaliveTime, Timeout: c.KeepaliveTimeout}),
		// Clients may ping as often as every 5s even without active streams: provider
		// SDKs keep their idle callback streams alive this way.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: KeepaliveMinTime, PermitWithoutStream: true}),
	}
	if c.MaxHeaderBytes > 0 {
		opts = append(opts, grpc.MaxHeaderListSize(c.MaxHeaderBytes))
	}
	if c.ConnectionTimeout > 0 {
		opts = append(opts, grpc.ConnectionTimeout(c.ConnectionTimeout))
	}
	if c.Creds != nil {
		opts = append(opts, grpc.Creds(c.Creds))
	}
	if c.StatsHandler != nil {
		opts = append(opts, grpc.StatsHandler(c.StatsHandler))
	}
	if c.StreamWindow > 0 {
		opts = append(opts, grpc.StaticStreamWindowSize(c.StreamWindow))
	}
	if c.ConnWindow > 0 {
		opts = append(opts, grpc.StaticConnWindowSize(c.ConnWindow))
	}
	if c.StreamWorkers > 0 {
		opts = append(opts, grpc.NumStreamWorkers(c.StreamWorkers))
	}
	return grpc.NewServer(opts...), metrics
}

func notHealth(_ context.Context, c interceptors.CallMeta) bool {
	return c.Service != "grpc.health.v1.Health"
}

// rpcLevel logs successful and client-caused outcomes quietly.
func rpcLevel(code codes.Code) logging.Level {
	switch code {
	case codes.OK, codes.Canceled, codes.NotFound, codes.InvalidArgument, codes.AlreadyExists,
		codes.FailedPrecondition, codes.PermissionDenied, codes.Unauthenticated:
		return logging.LevelDebug
	case codes.Internal, codes.Unknown, codes.DataLoss:
		return logging.LevelError
	default:
		return logging.LevelWarn
	}
}

// rpcDuration is the duration field of an RPC's log line: grpc.time_ms, as a number.
// (The middleware's default formats it into a string on every RPC, logged or not.)
func rpcDuration(d time.Duration) logging.Fields {
	return logging.Fields{"grpc.time_ms", float64(d.Microseconds()) / 1000}
}

// zapAdapter lets the middleware's logging interceptor write through zap. The level is
// checked first: a line the logger drops costs no field conversion.
func zapAdapter(l *zap.Logger) logging.Logger {
	return logging.LoggerFunc(func(_ context.Context, lvl logging.Level, msg string, fields ...any) {
		zl := zapcore.ErrorLevel
		switch lvl {
		case logging.LevelDebug:
			zl = zapcore.DebugLevel
		case logging.LevelInfo:
			zl = zapcore.InfoLevel
		case logging.LevelWarn:
			zl = zapcore.WarnLevel
		}
		ce := l.Check(zl, msg)
		if ce == nil {
			return
		}
		zf := make([]zap.Field, 0, len(fields)/2)
		for i := 0; i+1 < len(fields); i += 2 {
			key, ok := fields[i].(string)
			if !ok {
				key = fmt.Sprint(fields[i])
			}
			zf = append(zf, zap.Any(key, fields[i+1]))
		}
		ce.Write(zf...)
	})
}
