package server

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/reflection"
	v1reflectiongrpc "google.golang.org/grpc/reflection/grpc_reflection_v1"
	v1alphareflectiongrpc "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/grpc/status"
)

// RegisterReflection registers gRPC server reflection on g, both grpc.reflection.v1 and
// v1alpha as [reflection.Register] does, with streams that end with
// [Server.StopWatches], with Unavailable (SHUTTING_DOWN), as health Watch streams do:
// grpcurl, grpcui and IDEs keep a reflection stream open for as long as they run, and
// an open one would hold the gRPC server's GracefulStop until its fallback timer.
func (s *Server) RegisterReflection(g reflection.GRPCServer) {
	opts := reflection.ServerOptions{Services: g}
	v1reflectiongrpc.RegisterServerReflectionServer(g, reflectionV1{ServerReflectionServer: reflection.NewServerV1(opts), s: s})
	v1alphareflectiongrpc.RegisterServerReflectionServer(g, reflectionV1Alpha{ServerReflectionServer: reflection.NewServer(opts), s: s})
}

type reflectionV1 struct {
	v1reflectiongrpc.ServerReflectionServer
	s *Server
}

func (r reflectionV1) ServerReflectionInfo(stream v1reflectiongrpc.ServerReflection_ServerReflectionInfoServer) error {
	return r.s.untilWatchesStop(stream, func() error { return r.ServerReflectionServer.ServerReflectionInfo(stream) })
}

type reflectionV1Alpha struct {
	v1alphareflectiongrpc.ServerReflectionServer
	s *Server
}

func (r reflectionV1Alpha) ServerReflectionInfo(stream v1alphareflectiongrpc.ServerReflection_ServerReflectionInfoServer) error {
	return r.s.untilWatchesStop(stream, func() error { return r.ServerReflectionServer.ServerReflectionInfo(stream) })
}

// untilWatchesStop runs a stream handler that ends only when its client ends the
// stream, ending the stream itself with Unavailable (SHUTTING_DOWN) at
// [Server.StopWatches]. The handler is blocked in Recv, which ends only when the stream
// does: the status is written through the transport stream (see recvFirst), which
// ends the stream and with it the Recv; the status the handler returns then is not sent.
func (s *Server) untilWatchesStop(stream grpc.ServerStream, handle func() error) error {
	watches := s.active.watches
	if watches.Err() != nil {
		return toStatus(s.log, errShuttingDown)
	}
	w, ok := grpc.ServerTransportStreamFromContext(stream.Context()).(statusWriter)
	if !ok {
		return handle()
	}
	stop := context.AfterFunc(watches, func() {
		st, _ := status.FromError(toStatus(s.log, errShuttingDown))
		_ = w.WriteStatus(st)
	})
	err := handle()
	if !stop() {
		return toStatus(s.log, errShuttingDown) // the stream has ended with this status
	}
	return err
}
