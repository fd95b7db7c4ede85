// Package relay is the benchmark's physical limit: the smallest grpc-go program that makes
// exactly toolsd's hops with toolsd's messages. An agent opens an ExecuteBatch stream per
// batch; the server forwards each call as an ExecuteRequest down a provider's long-lived
// Connect stream, the provider answers at once, and the server streams BatchAccepted, the
// results in model order and BatchSettled back. As toolsd, it holds a single-call batch's
// BatchAccepted until the result (at most toolsd's default limits.accepted_hold) and runs
// toolsd's default transport settings ([ServerOptions])
// and Go runtime settings ([ApplyRuntime]).
//
// It must never grow a registry, validation, policy, a session log or logging: whatever it
// does, toolsd's ratio to it stops measuring toolsd's own cost. Calls go to the provider
// that said hello most recently.
package relay
