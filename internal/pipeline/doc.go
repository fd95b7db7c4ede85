// Package pipeline owns one tool call's path through toolsd: prepare (resolve, validate,
// pre-execute policy, approval, guards), dispatch (the execute interceptor chain around the
// provider call) and complete (post-execute policy, normalization, content finalization,
// result notification).
//
// One call runs these steps, outermost first:
//
//	Run ──► finish ─────────────── recover panics, finalize content, RESULT_TOO_LARGE
//	                               (over the log's event limit), notify observers
//	         └► prepare: resolve ── UNKNOWN_TOOL | ABORTED_BEFORE_DISPATCH | INTERNAL
//	                     validate ─ INVALID_ARGUMENTS
//	                     pre-execute ─ participants → allow | deny (DENIED) | ask
//	                     approval ─ ask → APPROVAL_DENIED | _TIMEOUT | _UNAVAILABLE
//	                     guards ─── GUARD_DENIED (monotonic)
//	                     gate ───── ctx done → ABORTED_BEFORE_DISPATCH
//	  ······························ everything above returns final results ·········
//	             └► complete ─ ABORTED on cancel, post-execute, normalize
//	                 └► execute chain: metrics ─► timeout ─► retry ─► interceptors
//	                                                                  └► Dispatcher
//
// The prepare checks run one after another, the first failure ending the call;
// finish, prepare and complete are plain calls, each wrapping the next. The execute
// stage is a chain of [Interceptor]s, (ctx, exec, tool, next) → result, composed once
// per config generation like go-grpc-middleware's ChainUnaryServer (the first is the
// outermost layer): the built-in metrics, timeout and retry layers, then the operator's
// interceptors. Prepare is not a chain so that a call's stack stays shallow: its
// goroutine reserves the stack up front, and outgrowing the reservation costs a stack
// copy mid-call.
//
// A prepare-stage failure is a final result: it never reaches the post-execute chain,
// only finalization and notification (the reference's final-result versus post-result
// distinction). Results that come back
// from dispatch, successes and tool errors alike, are post-results.
//
// The pipeline never imports gRPC or protobuf and never talks to providers itself: tools
// are found through a [Resolver] and dispatched through a [Dispatcher], both owned by their
// callers. Tool failures never escape as Go errors: every path ends in a [tool.Result].
package pipeline
