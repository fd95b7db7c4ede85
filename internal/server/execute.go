package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/registry"
	"github.com/toolsd/toolsd/internal/scheduler"
	"github.com/toolsd/toolsd/internal/streamgate"
	"github.com/toolsd/toolsd/internal/textcut"
	"github.com/toolsd/toolsd/internal/tool"
)

// errClientCancelled is the cause recorded when the client sends cancel.
var errClientCancelled = errors.New("server: the agent cancelled the batch")

// ExecuteBatch runs one step's tool calls. See the proto for the stream protocol.
func (s *Server) ExecuteBatch(stream batchStream) error {
	ctx := stream.Context()
	// Tracked from the first moment, so shutdown's drain cannot miss a batch that was
	// being planned when draining began.
	s.active.start()
	defer s.active.done()
	// The batch's context has the stream's values and deadline but not its end: it ends
	// with the cause gone gives it (the agent's deadline, or its cancel), which the
	// cancels of its calls carry to their providers, where one under the stream's would
	// end first, with "context canceled" (see [clientEnd.cause]).
	batchCtx, cancel := context.WithCancelCause(unended{ctx})
	defer cancel(nil)
	gone := watchClientEnd(ctx, cancel)
	defer gone.stop()
	first, err := s.recvFirst(stream)
	if err != nil {
		if errors.Is(err, io.EOF) {
			return toStatus(s.log, badField("batch", "the stream ended before a batch was sent"))
		}
		return toStatus(s.log, gone.of(err))
	}
	b, ts, err := s.buildBatch(ctx, first)
	if err != nil {
		return toStatus(s.log, err)
	}
	// A place among limits.max_batches from here to the handler's return, however the
	// stream ends (a panic unwinds through the defer too); a stream that sent no batch
	// held none.
	place, err := s.batchSlots.take(ctx, s.authz.Unconfined(ctx, ActionExecute))
	if err != nil {
		return toStatus(s.log, gone.of(err))
	}
	defer s.batchSlots.give(place)
	release, err := s.claimBatch(ctx, b)
	if err != nil {
		return toStatus(s.log, gone.of(err))
	}
	defer release()
	if ts != nil {
		// The set governs every call of the batch: it must not expire while calls run.
		defer ts.Hold()()
	}

	onRefusal(ctx, cancel)
	stopAbort := context.AfterFunc(s.active.abort, func() { cancel(errShuttingDown) })
	defer stopAbort()
	single := len(b.Calls) == 1
	out := newOutbox(stream, s.limits.OutboxSize, s.limits.WriteTimeout, s.sendClock, func(err error) { s.cutOff(stream, cancel, err) }, single)
	approver := newStreamApprover(out)
	approver.waitEnded = s.waitEnded
	// The reader's log lines are written while the batch runs (the handler does not wait
	// for the reader, whose Recv ends only once the handler has returned): retired before
	// the handler returns, however it returns; lines about messages read after are dropped.
	lines := &streamgate.Retire{}
	defer lines.Retire()
	reader := newBatchReader(ctx)
	startReader := func() {
		reader.start(func() error { return s.receive(stream, approver, cancel, gone, b.BatchID, lines) })
	}
	sink := &batchSink{out: out, calls: b.Calls}
	if single && s.limits.AcceptedHold > 0 {
		sink.quiet = newQuietStart(out, s.limits.AcceptedHold, startReader)
		approver.before = sink.quiet.end
	} else {
		startReader()
	}
	var appr tool.Approver = approver
	if s.wrapAppr != nil {
		appr = s.wrapAppr(appr)
	}
	settled, execErr := s.sched.Execute(batchCtx, b, sink, appr)
	if execErr != nil {
		// No result is held: a batch whose every result was committed can only fail
		// while logging additional contexts, and then its last result was not held.
		// A held accepted message is written: the plan is in the log.
		_ = sink.finishQuiet()
		out.fail(execErr)
		_ = out.close()
		s.log.Error("batch failed", zap.String("batch_id", b.BatchID), zap.String("session_id", b.SessionID), zap.Error(execErr))
		return toStatus(s.log, logFailure(execErr))
	}
	end := &toolsdv1.ExecuteBatchResponse{Msg: &toolsdv1.ExecuteBatchResponse_Settled{Settled: &toolsdv1.BatchSettled{
		ConcludesTurn:      settled.ConcludesTurn,
		AdditionalContexts: settled.AdditionalContexts,
		Cancelled:          settled.Cancelled,
		Results:            uint32(settled.Results),
	}}}
	// A held accepted is normally written with the result; here only if no result was.
	if err = sink.finishQuiet(); err == nil {
		err = out.putLast(sink.held, end)
	}
	if err != nil {
		_ = out.close()
		return s.streamFailure(batchCtx, reader, gone, err)
	}
	if err := out.close(); err != nil {
		return s.streamFailure(batchCtx, reader, gone, err)
	}
	// The reader records the cause, then ends the stream with it: a batch that the
	// cancel settled first must not end the stream OK in between. Nor must one whose
	// client's deadline came as it settled: the Sends of a stream whose deadline timer
	// has fired succeed until gRPC closes the stream, and the client got its deadline.
	if err := s.streamEnded(batchCtx, reader, gone); err != nil {
		return err
	}
	// A batch the shutdown's abort cut short ends UNAVAILABLE after its settled, as
	// watches end at shutdown: its ABORTED results read as a client's cancel would, and
	// the loop must learn that toolsd stopped them, to run them again elsewhere. One the
	// abort found with every call finished settled whole, and ends OK.
	if settled.Cancelled && errors.Is(context.Cause(batchCtx), errShuttingDown) {
		return toStatus(s.log, errShuttingDown)
	}
	return nil
}

// unended is a stream's context without its end: its values and deadline, so that a
// context made under it is past its deadline when the stream is (see [tool.Ended]).
type unended struct{ context.Context }

func (unended) Done() <-chan struct{} { return nil }
func (unended) Err() error            { return nil }

// logFailure is what the client of a batch whose session log failed is told: the
// store's own error, which names what went wrong once, without what the scheduler was
// appending (toolsd's log line says that). Its code and reason are the same either way.
func logFailure(err error) error {
	var le *scheduler.LogError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}

// cutOff is the outbox's onCut: the batch is cancelled with err, and a client cut off
// for not reading gets its status at once. The status is written through the transport
// stream (see endStream), which ends the stream: the sender's Send that waits on the
// client returns, so the outbox closes without waiting on it again, and the client does
// not wait for the batch's calls to end (their results still go to the log). The cause
// is recorded first: ending the stream ends its context, the batch context's parent.
func (s *Server) cutOff(stream batchStream, cancel context.CancelCauseFunc, err error) {
	cancel(err)
	if errors.Is(err, errSlowClient) {
		s.endStream(stream, err)
	}
}

// streamFailure reports why results could not be delivered; they are in the log anyway.
// A stream toolsd ended itself (a client cut off for not reading, a message over
// max_request_bytes or not UTF-8: the cause of batchCtx), or gRPC did (a message over
// its own receive limit), reports the status it was ended with, so that the RPC's log
// line and metrics say what the client was told; one its client ended, Canceled or,
// when the client's deadline came, DeadlineExceeded (see [Server.streamEnded]).
func (s *Server) streamFailure(batchCtx context.Context, reader *batchReader, end *clientEnd, err error) error {
	if errors.Is(err, errSlowClient) {
		return toStatus(s.log, err)
	}
	if err := s.streamEnded(batchCtx, reader, end); err != nil {
		return err
	}
	return toStatus(s.log, context.Canceled)
}

// streamEnded is the status of a batch stream that has ended before its handler
// returned, nil for one that runs: the status toolsd or gRPC ended it with (see
// [Server.endedForMessage]; a client cut off for not reading), else its client's end,
// Canceled or DeadlineExceeded (see [clientEnd.err]).
func (s *Server) streamEnded(batchCtx context.Context, reader *batchReader, end *clientEnd) error {
	if err := s.endedForMessage(batchCtx, reader); err != nil {
		return err
	}
	if errors.Is(context.Cause(batchCtx), errSlowClient) {
		return toStatus(s.log, errSlowClient)
	}
	return toStatus(s.log, end.err())
}

// endedForMessage is the status of a batch stream that toolsd ended for a message it
// refused, over max_request_bytes or not UTF-8 (the cause of batchCtx), or that gRPC
// ended for a message it refused itself (see [batchReader.refusal]), nil for any other.
func (s *Server) endedForMessage(batchCtx context.Context, reader *batchReader) error {
	if cause := context.Cause(batchCtx); errors.Is(cause, errRequestTooLarge) || errors.Is(cause, errBadRequest) {
		return toStatus(s.log, cause)
	}
	return reader.refusal()
}

// recvFirst reads the batch message on the handler's goroutine. Draining ends the wait:
// the batch would be refused anyway, and a client that opened a stream but sends nothing
// must not hold shutdown until its deadline. So does Limits.FirstMessageTimeout, so that
// such a stream does not hold its handler and stream slot until then either; nothing
// was accepted, so nothing is lost.
//
// A server stream's Recv ends only when the stream does, and a Recv that fails writes
// its own status (Canceled, for a cancelled stream) before the handler could write
// Unavailable. So the wait's end writes the handler's status itself, through the
// transport stream (grpc-go's implements WriteStatus), which ends the stream and with it
// the Recv. (TestShutdownEndsIdleStreams fails if a gRPC upgrade takes WriteStatus away:
// such a stream would then hold shutdown until the gRPC server's hard stop.)
func (s *Server) recvFirst(stream batchStream) (*toolsdv1.ExecuteBatchRequest, error) {
	w, ok := grpc.ServerTransportStreamFromContext(stream.Context()).(statusWriter)
	if !ok {
		return stream.Recv()
	}
	g := &firstWait{s: s, w: w}
	stopDrain := context.AfterFunc(s.active.drained, g.drained)
	t := time.AfterFunc(s.limits.FirstMessageTimeout, g.timedOut)
	m, err := stream.Recv()
	stopDrain()
	t.Stop()
	if ended := g.end(nil); ended != nil {
		return nil, ended // the stream has ended with this status
	}
	return m, err
}

// firstWait ends recvFirst's wait once, by the drain or the first-message timeout, or
// not at all when the batch came first. It is a timer and a drain callback rather than
// a context with a deadline: it costs each batch fewer allocations.
type firstWait struct {
	s     *Server
	w     statusWriter
	mu    sync.Mutex
	ended bool
	err   error // why the wait ended, nil when the batch ended it
}

// drained and timedOut end the wait; what they return is for the handler's call of end.
func (g *firstWait) drained() { _ = g.end(context.Cause(g.s.active.drained)) }

func (g *firstWait) timedOut() {
	_ = g.end(fmt.Errorf("%w: no batch within %s (limits.first_message_timeout)", errFirstMessageTimeout, g.s.limits.FirstMessageTimeout))
}

// end ends the wait with err, writing its status, unless it has ended already, and
// returns why it ended: nil when the batch came first (err nil) before either. The
// status is written under the lock, so the handler returns only after it.
func (g *firstWait) end(err error) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ended {
		return g.err
	}
	g.ended, g.err = true, err
	if err != nil {
		st, _ := status.FromError(toStatus(g.s.log, err))
		_ = g.w.WriteStatus(st)
	}
	return nil
}

// endStream ends the stream with err's status from a goroutine other than the
// handler's, through the transport stream (see recvFirst); the status the handler
// returns later is then not sent.
func (s *Server) endStream(stream grpc.ServerStream, err error) {
	if w, ok := grpc.ServerTransportStreamFromContext(stream.Context()).(statusWriter); ok {
		st, _ := status.FromError(toStatus(s.log, err))
		_ = w.WriteStatus(st)
	}
}

// statusWriter is the part of grpc-go's server transport stream that ends a stream
// with a status.
type statusWriter interface {
	WriteStatus(*status.Status) error
}

// maxStrayLogs bounds the warnings one batch stream's stray messages (approvals nobody
// awaits, repeated cancels, unexpected messages) write, so a client cannot flood the log.
const maxStrayLogs = 10

// receive reads approvals and cancels until the client half-closes or goes away, and
// returns the error of the Recv that ended it (nil for a half-close), having cancelled
// the batch with it (as its client's end, when the client ended the stream: see
// [clientEnd.cause]). It ends when the handler returns, because the stream's context
// ends with it; its log lines go through lines, which the handler ends before it returns.
func (s *Server) receive(stream batchStream, approver *streamApprover, cancel context.CancelCauseFunc, end *clientEnd, batchID string, lines *streamgate.Retire) error {
	defer approver.closeSide()
	strays, cancelled := 0, false
	stray := func(msg string, fields ...zap.Field) {
		strays++
		switch {
		case strays <= maxStrayLogs:
			lines.Do(func() { s.log.Warn(msg, append(fields, zap.String("batch_id", batchID))...) })
		case strays == maxStrayLogs+1:
			lines.Do(func() {
				s.log.Warn("further stray messages on this batch are not logged", zap.String("batch_id", batchID), zap.Int("logged", maxStrayLogs))
			})
		}
	}
	for {
		m, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			cancel(end.cause(err))
			return err
		}
		if limit := s.limits.MaxRequestBytes; limit > 0 {
			if n := proto.Size(m); n > limit {
				// As the transport does for a message over its own limit: the stream
				// ends with the error, and the batch is cancelled. The cause is recorded
				// first, as cutOff does: ending the stream ends the batch's parent context.
				err := fmt.Errorf("%w: a message of %d bytes, over the limit of %d (max_request_bytes)", errRequestTooLarge, n, limit)
				cancel(err)
				s.endStream(stream, err)
				return err
			}
		}
		switch msg := m.GetMsg().(type) {
		case *toolsdv1.ExecuteBatchRequest_Approval:
			// The record of who let a call run (a denial's reason is also in its result),
			// written before the call goes on: the handler does not wait for this
			// goroutine, so a line written after the answer could outlive the batch.
			answered := func() {
				lines.Do(func() {
					s.log.Info("approval answered", zap.String("batch_id", batchID),
						zap.String("call_id", textcut.Ellipsis(msg.Approval.GetCallId(), textcut.MaxLoggedID)),
						zap.Uint64("request_id", msg.Approval.GetRequestId()),
						zap.Bool("approved", msg.Approval.GetApproved()),
						zap.String("reason", textcut.Ellipsis(msg.Approval.GetReason(), textcut.MaxLoggedID)))
				})
			}
			if !approver.resolve(msg.Approval, answered) {
				// Also one naming a request its call no longer awaits (withdrawn since).
				stray("approval for a call that is not awaiting one", zap.String("call_id", textcut.Ellipsis(msg.Approval.GetCallId(), textcut.MaxLoggedID)),
					zap.Uint64("request_id", msg.Approval.GetRequestId()))
			}
		case *toolsdv1.ExecuteBatchRequest_Cancel:
			if cancelled {
				stray("batch cancelled again")
				continue
			}
			cancelled = true
			lines.Do(func() {
				s.log.Info("batch cancelled by client", zap.String("batch_id", batchID), zap.String("reason", textcut.Ellipsis(msg.Cancel.GetReason(), textcut.MaxLoggedID)))
			})
			cancel(errClientCancelled)
		default:
			stray("unexpected message on a running batch")
		}
	}
}

// claimBatch authorizes the batch built from the first message and returns the
// release of its hold on the session, which the caller calls once the batch's last
// append is done. Everything refused here, as in buildBatch and for want of a place
// among the batches in flight, is refused before anything is logged or run.
func (s *Server) claimBatch(ctx context.Context, b *scheduler.Batch) (func(), error) {
	// Held from before the claim to the batch's last append, so that retention cannot
	// delete the session (and its owner record) in between: the plan would then
	// recreate the id with no owner, or land in the session another identity claimed
	// meanwhile, and the results and contexts that follow would cite seqs of the
	// deleted session.
	release, err := s.sessions.Hold(ctx, b.SessionID)
	if err != nil {
		return nil, err // the store's error: it names the store
	}
	// Last: authorizing an execute claims the session for the caller, and a batch
	// refused after the claim would leave an owner with no events behind.
	if err := s.authz.Authorize(ctx, ActionExecute, b.Scope, b.SessionID); err != nil {
		release()
		return nil, err
	}
	return release, nil
}

// buildBatch validates the first message and builds the scheduler's batch.
func (s *Server) buildBatch(ctx context.Context, first *toolsdv1.ExecuteBatchRequest) (*scheduler.Batch, *registry.ToolSet, error) {
	req := first.GetBatch()
	if req == nil {
		return nil, nil, badField("batch", "the first message must carry the batch")
	}
	if limit := s.limits.MaxRequestBytes; limit > 0 {
		if n := proto.Size(first); n > limit {
			return nil, nil, fmt.Errorf("%w: the batch is %d bytes, over the limit of %d (max_request_bytes)", errRequestTooLarge, n, limit)
		}
	}
	if s.draining.Load() {
		return nil, nil, errShuttingDown
	}
	if err := s.checkSessionID("batch.session_id", req.GetSessionId()); err != nil {
		return nil, nil, err
	}
	if err := registry.ValidateScope(req.GetScope()); err != nil {
		return nil, nil, err
	}
	calls := req.GetCalls()
	if len(calls) == 0 {
		return nil, nil, badField("batch.calls", "at least one call is required")
	}
	if len(calls) > s.limits.MaxCallsPerBatch {
		return nil, nil, badField("batch.calls", "%d calls, over the limit of %d per batch", len(calls), s.limits.MaxCallsPerBatch)
	}
	var ts *registry.ToolSet
	if id := req.GetToolSetId(); id != "" {
		var err error
		if ts, err = s.reg.ToolSetOf(id, callerName(ctx)); err != nil {
			return nil, nil, err
		}
		if ts.Scope() != req.GetScope() {
			return nil, nil, badField("batch.tool_set_id", "tool set %q was not resolved for scope %q", id, req.GetScope())
		}
		// Its conditions read that session's history: under another session's batch,
		// a tool admitted for what happened there would run here.
		if sid := ts.Session(); sid != "" && sid != req.GetSessionId() {
			return nil, nil, badField("batch.tool_set_id", "tool set %q was resolved for session %q, not %q",
				id, textcut.Ellipsis(sid, textcut.MaxLoggedID), textcut.Ellipsis(req.GetSessionId(), textcut.MaxLoggedID))
		}
		// Resolved without a session, those conditions judged an empty history: a
		// one-shot tool (`!session.called("x")`) would run again in a session that
		// called it. A set whose conditions do not read the history serves any session.
		if ts.Session() == "" && ts.ReadsHistory() {
			return nil, nil, badField("batch.tool_set_id", "tool set %q was resolved without a session_id, and its conditions read the session's history: resolve it with the batch's session_id", id)
		}
		// A step resolves its own set: its conditions read that step's numbers (and the
		// history up to it), so a set reused for a later step would admit what that step's
		// resolution might not.
		if ts.Turn() != req.GetTurn() || ts.Step() != req.GetStep() {
			return nil, nil, fmt.Errorf("%w: %q was resolved for turn %d, step %d; the batch is turn %d, step %d (resolve a set for each step)",
				errToolSetStepMismatch, id, ts.Turn(), ts.Step(), req.GetTurn(), req.GetStep())
		}
	}
	b := &scheduler.Batch{
		SessionID:   req.GetSessionId(),
		Scope:       req.GetScope(),
		BatchID:     s.bootID + "-" + strconv.FormatUint(s.batchSeq.Add(1), 10),
		ToolSetID:   req.GetToolSetId(),
		Turn:        req.GetTurn(),
		Step:        req.GetStep(),
		MaxParallel: int(req.GetMaxParallel()),
		Calls:       make([]tool.Call, len(calls)),
	}
	seen := make(map[string]int, len(calls))
	for i, c := range calls {
		if c.GetCallId() == "" {
			return nil, nil, badField(fmt.Sprintf("batch.calls[%d].call_id", i), "is required")
		}
		if n := len(c.GetCallId()); n > s.limits.MaxCallIDLen {
			return nil, nil, badField(fmt.Sprintf("batch.calls[%d].call_id", i), "is %d bytes, over the limit of %d", n, s.limits.MaxCallIDLen)
		}
		if j, dup := seen[c.GetCallId()]; dup {
			// Quoted cut: the id is the client's, of any size the request allows, and the
			// status would carry it twice (message and BadRequest).
			return nil, nil, badField(fmt.Sprintf("batch.calls[%d].call_id", i), "duplicates calls[%d].call_id %q", j, textcut.Ellipsis(c.GetCallId(), textcut.MaxLoggedID))
		}
		seen[c.GetCallId()] = i
		b.Calls[i] = tool.Call{
			SessionID: b.SessionID,
			Scope:     b.Scope,
			BatchID:   b.BatchID,
			ToolSetID: b.ToolSetID,
			Turn:      b.Turn,
			Step:      b.Step,
			Index:     i,
			CallID:    c.GetCallId(),
			Name:      c.GetName(),
			Arguments: arguments(c.GetArgumentsJson()),
		}
	}
	return b, ts, nil
}

// arguments is a call's arguments as toolsd takes them: the model's text, except that
// "" (what some model APIs send for a call without arguments) is the empty object, so
// that it is validated, logged and sent as {}. Whitespace alone stays malformed JSON.
func arguments(text string) string {
	if text == "" {
		return "{}"
	}
	return text
}

// batchSink streams committed results, in model order, to the client.
//
// The batch's last result is held back for the handler to send together with settled
// (one write, where the client would otherwise wake twice), unless the batch has
// additional contexts: settling records those in the log first, which may wait on a
// durable commit. Without them, settling after the last result is a few field reads.
//
// A single-call batch may start quietly (see [quietStart]): its accepted message is
// held back too, and written just before the result if the call is quick.
type batchSink struct {
	out   *outbox
	calls []tool.Call
	quiet *quietStart // nil unless the batch starts quietly
	// mu orders progress against results. A provider's progress is forwarded from its
	// stream's receive loop, which may still be forwarding a report when the call has
	// stopped waiting (its context ended) and its result is committed; results come in
	// model order, so a call below delivered has its result, and its progress is dropped.
	mu        sync.Mutex
	delivered int
	contexts  bool
	held      *toolsdv1.ExecuteBatchResponse
}

var _ scheduler.Sink = (*batchSink)(nil)

func (k *batchSink) Accepted(batchID string, callSeqs []uint64) error {
	m := &toolsdv1.ExecuteBatchResponse{Msg: &toolsdv1.ExecuteBatchResponse_Accepted{
		Accepted: &toolsdv1.BatchAccepted{BatchId: batchID, CallSeqs: callSeqs},
	}}
	if k.quiet != nil {
		return k.quiet.hold(m)
	}
	return k.out.put(m)
}

// finishQuiet writes a held accepted message, if any, without starting the reader.
func (k *batchSink) finishQuiet() error {
	if k.quiet == nil {
		return nil
	}
	return k.quiet.finish()
}

func (k *batchSink) Result(index int, callSeq, resultSeq uint64, r tool.Result) error {
	if err := k.finishQuiet(); err != nil {
		return err
	}
	m := resultMsg(index, k.calls[index].CallID, callSeq, resultSeq, &r)
	k.mu.Lock()
	k.delivered++
	last := k.delivered == len(k.calls)
	k.mu.Unlock()
	k.contexts = k.contexts || len(r.AdditionalContexts) > 0
	if last && !k.contexts {
		k.held = m
		return nil
	}
	return k.out.put(m)
}

func (k *batchSink) Progress(p tool.Progress) {
	if k.quiet != nil && k.quiet.end() != nil {
		return
	}
	m := &toolsdv1.ExecuteBatchResponse{Msg: &toolsdv1.ExecuteBatchResponse_Progress{Progress: &toolsdv1.ToolProgress{
		CallId: p.CallID, Index: uint32(p.Index), Message: p.Message, Progress: p.Progress, Total: p.Total,
	}}}
	k.mu.Lock()
	defer k.mu.Unlock()
	if p.Index < k.delivered {
		return // its result has gone out (or is held for settled): nothing follows it
	}
	k.out.tryPut(m)
}
