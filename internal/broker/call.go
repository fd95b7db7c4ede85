package broker

import (
	"context"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/tool"
)

// pendingCall is one call waiting for its provider. done receives exactly one result,
// from whichever party removed the call from its conn's pending map (the receive loop
// or the teardown); a caller that removes it itself receives nothing.
type pendingCall struct {
	done     chan tool.Result
	progress func(tool.Progress)
	callID   string
	index    int
	// cancelled: toolsd told the provider to cancel the call (set before the cancel is
	// sent, read by the receive loop that takes the call's result).
	cancelled atomic.Bool
	// stopped: the provider answered that the call stopped (cancelled = true) without
	// toolsd having told it to, as a provider does when the deadline it was sent runs
	// out (set by the receive loop before it delivers the answer; see taken).
	stopped atomic.Bool
	// sent: the execute was handed to the stream (set before the write, holding the
	// send slot). Until then the provider can only guess the request id (ids count up per
	// stream), and the receive loop treats a result or progress for it as for any id it
	// was never sent.
	sent atomic.Bool
}

var pendingPool = sync.Pool{New: func() any { return &pendingCall{done: make(chan tool.Result, 1)} }}

func newPending(e *tool.Exec) *pendingCall {
	p := pendingPool.Get().(*pendingCall)
	p.progress, p.callID, p.index = e.Progress, e.CallID, e.Index
	return p
}

// release recycles p; its done channel must be empty and nobody may hold it.
func (p *pendingCall) release() {
	p.progress, p.callID = nil, ""
	p.cancelled.Store(false)
	p.stopped.Store(false)
	p.sent.Store(false)
	pendingPool.Put(p)
}

// await takes the result someone else already committed to deliver.
func (p *pendingCall) await(ctx context.Context) tool.Result {
	return p.taken(ctx, <-p.done)
}

// taken releases p and returns r, the answer it received, as the call's result. A
// provider that reports the call stopped though toolsd had not cancelled it stopped at
// the deadline it was sent: once ctx has ended or passed that deadline as well, the call
// was cancelled (toolsd's own timer, a goroutine, may simply not have run yet), and it
// is ABORTED, as it would be had toolsd's cancel come first, not a failure of the tool.
func (p *pendingCall) taken(ctx context.Context, r tool.Result) tool.Result {
	if p.stopped.Load() && tool.Ended(ctx) {
		r = abortedAnswer(r)
	}
	p.release()
	return r
}

// Call sends one call to providerID's stream and waits for its result, ctx's end, or
// the provider's disconnect. It never returns an error: every failure is an error
// result (PROVIDER_UNAVAILABLE, PROVIDER_OVERLOADED, PROVIDER_GONE, ABORTED, …). When
// ctx ends first, the provider is told to cancel and the call waits, up to the cancel
// grace, for the provider's answer: its failure is kept, anything else (a success, the
// provider's report that the tool stopped, no answer in time) is ABORTED; a pipeline
// whose own deadline fired turns those into TOOL_TIMEOUT. A ctx past its deadline counts
// as ended before its timer has run: the call is not sent (ABORTED_BEFORE_DISPATCH), and
// its provider's report that it stopped is ABORTED. attempt is 1 for the first try.
// e.Progress, when set, is called on the stream's receive goroutine and must not block.
func (b *Broker) Call(ctx context.Context, providerID string, e *tool.Exec, attempt int) tool.Result {
	// Checked before the lookup: a call that ended is ABORTED_BEFORE_DISPATCH whether its
	// provider's stream was torn down before the lookup or while the call waited to be
	// sent (see [conn.unsent]).
	if tool.Ended(ctx) {
		return abortedBeforeDispatch()
	}
	c := b.lookup(providerID)
	if c == nil {
		b.obs.CallRejected(tool.CodeProviderUnavailable)
		return unavailable(providerID)
	}
	if !utf8.ValidString(e.Arguments) {
		return invalidUTF8()
	}
	p := newPending(e)
	id, code, limit := c.begin(p)
	if code != "" {
		return b.rejected(p, providerID, code, limit)
	}
	m := executeMsg(id, e, attempt)
	if b.traceContext != nil {
		m.req.TraceContext = b.traceContext(ctx)
	}
	if err := c.send(ctx, m, &p.sent); err != nil {
		return c.notSent(ctx, p, id, providerID)
	}
	select {
	case r := <-p.done:
		return p.taken(ctx, r)
	case <-ctx.Done():
	}
	return c.abandon(ctx, p, id)
}

// The failure paths of Call are kept out of it so that its frame, which is on the stack
// of every call, stays small (see the scheduler's stack reservation).

//go:noinline
func invalidUTF8() tool.Result {
	return tool.Failure(tool.CodeInvalidArguments, "arguments are not valid UTF-8")
}

// rejected is the result of a call the connection refused to begin.
//
//go:noinline
func (b *Broker) rejected(p *pendingCall, providerID string, code tool.Code, limit int) tool.Result {
	p.release()
	b.obs.CallRejected(code)
	if code == tool.CodeProviderOverloaded {
		return tool.FailureWithReason(code, "the tool's provider is overloaded, try again later",
			"provider "+providerID+" has "+strconv.Itoa(limit)+" calls in flight, its limit")
	}
	return unavailable(providerID)
}

// notSent is the result of a call whose execute message could not be sent: the
// stream was ending (or its write failed, which only an ending stream's does).
//
//go:noinline
func (c *conn) notSent(ctx context.Context, p *pendingCall, id uint64, providerID string) tool.Result {
	if !c.forget(id) {
		if p.sent.Load() { // the execute was written, or was being: the provider may have it
			return p.await(ctx)
		}
		// Only the teardown takes a call never sent (see [conn.answer]): its failure is
		// the call's when its own context has not ended, as when it withdraws itself.
		return c.unsent(ctx, p.await(ctx))
	}
	p.release()
	return c.unsent(ctx, disconnectedUnsent(providerID))
}

// disconnectedUnsent is the failure of a call whose provider's stream ended before its
// execute was sent, the same whether the call withdrew itself ([conn.notSent]) or the
// stream's teardown took it ([conn.failPending]).
//
//go:noinline
func disconnectedUnsent(providerID string) tool.Result {
	return tool.FailureWithReason(tool.CodeProviderUnavailable, "the tool's provider disconnected before the call was sent",
		"provider "+providerID+" disconnected before the call was sent")
}

// unsent is the result of a call that never reached its provider, r being its
// PROVIDER_UNAVAILABLE failure, whether it withdrew itself or its stream's teardown took
// it: ABORTED_BEFORE_DISPATCH, not counted as rejected, when the call's context has
// ended (it gave up before the execute was handed to the stream: the tool never saw it),
// else r, counted in toolsd_broker_calls_rejected_total. Deciding here, not in the
// teardown, keeps the result and the count the same whichever side won.
func (c *conn) unsent(ctx context.Context, r tool.Result) tool.Result {
	if tool.Ended(ctx) {
		return abortedBeforeDispatch()
	}
	c.b.obs.CallRejected(tool.CodeProviderUnavailable)
	return r
}

// abandon ends a call whose context ended while it waited for its result. The call
// stays pending (holding its in-flight slot) until the provider answers the cancel or
// the grace ends: until then the tool may still be running, and the batch's barrier
// and settle must not pass it.
//
//go:noinline
func (c *conn) abandon(ctx context.Context, p *pendingCall, id uint64) tool.Result {
	select {
	case r := <-p.done: // the result raced the context's end: it is the call's
		return p.taken(ctx, r)
	default:
	}
	p.cancelled.Store(true)
	c.cancel(id, validUTF8(context.Cause(ctx).Error()))
	if grace := c.b.limits.CancelGrace; grace > 0 {
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case r := <-p.done:
			return cancelledResult(p.taken(ctx, r))
		case <-t.C:
		}
	}
	if !c.forget(id) {
		return cancelledResult(p.await(ctx)) // the answer or the disconnect won the race
	}
	p.release()
	return aborted()
}

// cancelledResult is what a cancelled call's answer counts as: a failure stays (it is
// more specific than the cancel), anything else is ABORTED.
func cancelledResult(r tool.Result) tool.Result {
	if r.IsError || r.Err != nil {
		return r
	}
	return abortedAnswer(r)
}

//go:noinline
func unavailable(providerID string) tool.Result {
	return tool.FailureWithReason(tool.CodeProviderUnavailable, "the tool's provider is not connected",
		"provider "+providerID+" is not connected")
}

//go:noinline
func aborted() tool.Result { return tool.Failure(tool.CodeAborted, "call was cancelled") }

// abortedAnswer is ABORTED in place of r, the provider's answer to a cancelled call: the
// tool's request to end the turn survives, as it does every result replaced by an error.
func abortedAnswer(r tool.Result) tool.Result {
	a := aborted()
	a.ConcludesTurn = r.ConcludesTurn
	return a
}

// abortedBeforeDispatch is the result of a call cancelled before its execute reached
// the provider's stream: the tool cannot have run, which ABORTED would leave open.
func abortedBeforeDispatch() tool.Result {
	return tool.Failure(tool.CodeAbortedBeforeDispatch, "call was cancelled before it started")
}

// execute is one call's execute message with its parts, allocated together, once per
// call.
type execute struct {
	resp     toolsdv1.ProviderServiceConnectResponse
	msg      toolsdv1.ProviderServiceConnectResponse_Execute
	req      toolsdv1.ExecuteRequest
	deadline timestamppb.Timestamp
	timeout  durationpb.Duration
}

// executeMsg builds the execute message, but for its deadline and timeout, which
// [execute.stamp] sets as it is sent. Every string is made valid UTF-8: a marshal failure
// inside Send would end the stream for every call on it.
func executeMsg(id uint64, e *tool.Exec, attempt int) *execute {
	m := &execute{}
	m.req = toolsdv1.ExecuteRequest{
		RequestId:     id,
		CallId:        validUTF8(e.CallID),
		SessionId:     validUTF8(e.SessionID),
		Scope:         validUTF8(e.Scope),
		Tool:          validUTF8(e.Name),
		ArgumentsJson: e.Arguments,
		Turn:          e.Turn,
		Step:          e.Step,
		Attempt:       uint32(min(max(attempt, 1), math.MaxUint32)),
	}
	m.msg.Execute = &m.req
	m.resp.Msg = &m.msg
	return m
}

// stamp sets m's deadline to ctx's, and its timeout to the time left until then, read
// now, as m is about to be written: a provider times the call by the timeout from when it
// receives it, since its clock may not agree with toolsd's, so time spent waiting for the
// send slot must not be in it. It reports false when ctx has ended or passed its deadline
// ([tool.Ended], reading the clock once for both).
func (m *execute) stamp(ctx context.Context) bool {
	if ctx.Err() != nil {
		return false
	}
	d, ok := ctx.Deadline()
	if !ok {
		return true
	}
	left := time.Until(d)
	if left <= 0 {
		return false
	}
	m.deadline.Seconds, m.deadline.Nanos = d.Unix(), int32(d.Nanosecond())
	m.timeout.Seconds, m.timeout.Nanos = int64(left/time.Second), int32(left%time.Second)
	m.req.Deadline, m.req.Timeout = &m.deadline, &m.timeout
	return true
}

func cancelMsg(id uint64, reason string) *toolsdv1.ProviderServiceConnectResponse {
	return &toolsdv1.ProviderServiceConnectResponse{Msg: &toolsdv1.ProviderServiceConnectResponse_Cancel{
		Cancel: &toolsdv1.CancelExecution{RequestId: id, Reason: reason},
	}}
}
