// Package scheduler owns one batch of tool calls from plan to settlement: it records the
// plan in the session log, runs the calls (exclusive calls as barriers, parallel calls in a
// bounded rolling pool, each call's mode read just before it starts), commits exactly one
// result per call in model order, turns cancellation into results instead of losses, and
// delivers additional contexts in FIFO order when the batch settles.
//
// It never runs a call's stages itself (that is the [Runner], the pipeline), never decides
// a tool's mode (the [Moder], the registry), never stores events (the [Log], the session
// store) and never speaks gRPC or protobuf: the server adapts its stream to a [Sink].
// Every goroutine it starts ends before [Scheduler.Execute] returns.
package scheduler
