// Package broker owns the provider callback streams: it accepts ProviderService.Connect
// streams, binds the tools a provider registers to the life of its stream, sends calls
// down the stream and hands each result, cancellation or disconnect back to exactly the
// caller that is waiting for it.
//
// It is the one package besides the gRPC layer that speaks the generated protocol,
// because the stream's messages are its protocol (the way go-plugin's grpc_broker.go
// speaks its own). Proto types appear in its exported API only in [Broker.Connect].
//
// The broker must never decide policy, validate arguments against schemas, or keep a
// registration alive after its stream ended. A provider's bad message fails at most the
// one call it answers, never the stream: payloads arrive as bytes and are checked here.
//
// Concurrency: each stream has one receive goroutine (owned by its Connect handler) and
// a one-slot send lock taken by whoever sends; calls never start goroutines. A call waits
// on a one-element channel that exactly one party fills: the receive loop (result), the
// teardown (provider gone), or nobody because the caller withdrew the call first.
package broker
