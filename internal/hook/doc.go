// Package hook owns remote hooks: policy processes connected over HookService.Connect
// streams that take part in every call's pipeline. A [Hub] accepts the streams, keeps
// each hook's subscriptions (stage, tool glob, scope glob, priority), and exposes the
// connected hooks as pipeline participants: [Hub.PreExecute], [Hub.PostExecute] and
// [Hub.ResultObserver].
//
// It is the one package besides the gRPC layer that speaks the hook protocol, because
// the stream's messages are its protocol; proto types appear in its exported API only
// in [Hub.Connect].
//
// A consulted hook answers each request before its deadline. A hook that does not,
// whose stream drops while a request is pending, or whose answer makes no sense for the
// stage, fails closed: pre-execute denies and post-execute blocks, both with
// POLICY_UNAVAILABLE, unless the hook registered fail-open, in which case its verdict
// is abstain (or accept) and the use is counted; a hook fails closed whatever it
// registered for the calls a requirement it meets covers ([WithRequired]). A hook whose
// stream has gone is removed from the subscription set at once, and the requests
// pending on it fail at once.
//
// The package must never decide policy itself, rewrite a call's arguments, or let a
// hook's slowness stall a call past its deadline or its context: sends go through one
// writer goroutine per stream with bounded queues, and result notifications are dropped
// (and counted) rather than waited for.
//
// Concurrency: each stream has a receive goroutine and a writer goroutine, both owned by
// its Connect handler and ended with it. Calls never start goroutines: a call registers
// one pending entry per consulted hook, all answering into one buffered channel that the
// calling goroutine waits on with a single timer.
package hook
