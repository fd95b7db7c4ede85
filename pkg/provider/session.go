package provider

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/stack"
	"github.com/toolsd/toolsd/internal/textcut"
)

// session is one Connect stream: hello, welcome, registration, then calls until the
// stream ends. Sends are serialized by sendMu; the receive loop runs on the goroutine
// that called serve; each call's handler runs on its own goroutine.
//
// When the caller's context ends, the handlers' contexts end with it, but the stream
// lives on while they finish (drain): their answers still reach toolsd. The session
// unregisters its tools as the drain begins, so that toolsd routes no new calls to it
// (another provider of a name may take it at once). A call that
// stopped because of the shutdown (its handler returned the cancellation toolsd did not
// ask for) is not answered, nor is one still running after the shutdown grace, nor one
// that arrives meanwhile: once the provider half-closes the stream and toolsd ends it,
// toolsd fails them with PROVIDER_GONE, the code for calls whose provider went away,
// after which it retries an idempotent tool on another provider. An answer such as
// TOOL_ERROR would end the call for good.
type session struct {
	p      *Provider
	log    *zap.Logger
	stream grpc.BidiStreamingClient[toolsdv1.ProviderServiceConnectRequest, toolsdv1.ProviderServiceConnectResponse]
	ctx    context.Context // the stream's: it outlives the caller's context by the drain
	cancel context.CancelFunc
	// callCtx is the handlers' parent: it ends with the caller's context or the session.
	callCtx    context.Context
	callCancel context.CancelFunc
	recvDone   chan struct{} // closed when the receive loop has ended

	// sendMu serializes the stream's sends; halfClosed (guarded by it) is set once the
	// drain has half-closed the stream. gRPC answers a send after CloseSend by ending
	// the stream, which would lose what was sent before and not yet delivered.
	sendMu     sync.Mutex
	halfClosed bool

	mu     sync.Mutex
	calls  map[uint64]*running
	closed bool
	// welcomed: toolsd answered the hello. draining: the caller's context ended, and
	// drained is closed once no call runs (both guarded by mu).
	welcomed, draining bool
	drained            chan struct{}
	// wg is the provider's: it counts the session's helper goroutines (retakes,
	// answers to calls that cannot run), which Run and Serve wait for before they
	// return. Handlers are tracked by the provider (Provider.track). A session's end
	// does not wait for them, so a handler slow to honour its cancelled context cannot
	// keep the provider from reconnecting.
	wg *sync.WaitGroup

	nextRef atomic.Uint64
	// firstRefs are the refs of the first registration's messages not answered yet;
	// the provider is ready once it is empty. Used by the receive loop only.
	firstRefs map[uint64]bool
	// unregisterRefs are the refs of the unregister messages not answered yet (the
	// drain's, and a replacement's), whose answers are no registrations (guarded by mu).
	unregisterRefs map[uint64]bool
	// maxResult is the welcome's max_result_bytes (0: not announced): a larger result
	// is sent as its size only, so that it fails its call alone rather than the stream.
	maxResult uint64

	// Tools toolsd refused because their name is taken, by when they were first
	// refused; they are registered again after retakeDelay (see retake). Guarded by mu.
	retaking    map[string]time.Time
	retakeDelay time.Duration
	// owned names the tools toolsd accepted from this stream and holds: a later
	// ALREADY_EXISTS for one of them is this stream's own hold (a first registration
	// that reached toolsd after an Add's replacement). An unregister ends the hold.
	owned map[string]bool
}

// A registration toolsd refuses with ALREADY_EXISTS is sent again, after a delay that
// starts at retakeMin and doubles up to retakeMax, until the name has been refused for
// the retake window (options.retakeFor, DefaultRetakeWindow). The name's owner is
// usually this provider's own previous stream: after a quick reconnect, or a restart
// whose old connection toolsd has not seen close yet (a dead connection takes toolsd's
// keepalive time and timeout), the new registration can arrive before toolsd has
// removed the old stream's tools. Without a retry the tool would disappear with the old
// stream and never come back on the new one; without an end, a name another provider
// really owns would be retried forever.
const (
	retakeMin = 50 * time.Millisecond
	retakeMax = 5 * time.Second
)

// closeWait bounds how long a draining session, once its grace is over, takes to
// half-close the stream and see toolsd end it: until toolsd ends it, the results sent
// last may still be on their way.
const closeWait = time.Second

// running is one call in flight on the provider.
type running struct {
	s      *session
	id     uint64
	cancel context.CancelFunc
	done   atomic.Bool // handler returned or call cancelled: no more progress
	// toldToStop: toolsd cancelled the call (so a cancelled answer means ABORTED).
	toldToStop atomic.Bool
	// claimed: the call's answer is taken, by its handler's return or by the drain
	// abandoning it; only the claimer sends it.
	claimed atomic.Bool

	tool, callID, sessionID string
	started                 time.Time
}

// serve runs one session on conn. It reports whether toolsd welcomed the provider and
// why the session ended (nil when ctx ended). When ctx ends, the session drains for
// as long as grace lasts (see session).
func (p *Provider) serve(ctx, grace context.Context, conn grpc.ClientConnInterface) (welcomed bool, err error) {
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	cctx, ccancel := context.WithCancel(ctx)
	defer ccancel()
	s := &session{p: p, log: p.log, ctx: sctx, cancel: cancel, callCtx: cctx, callCancel: ccancel,
		recvDone: make(chan struct{}), calls: make(map[uint64]*running), wg: &p.wg}
	drainDone := make(chan struct{})
	stopDrain := context.AfterFunc(ctx, func() {
		defer close(drainDone)
		s.drain(grace)
	})
	defer func() {
		if !stopDrain() {
			<-drainDone
		}
	}()
	defer s.close()
	defer close(s.recvDone)
	// toolsd bounds what it sends (limits.max_argument_bytes, which the operator may set
	// above gRPC's default 4 MiB receive limit): a call over that limit would end the
	// stream at Recv, failing every call on it, and again on each retry.
	stream, err := toolsdv1.NewProviderServiceClient(conn).Connect(sctx, grpc.MaxCallRecvMsgSize(math.MaxInt32))
	if err != nil {
		return false, s.ended(ctx, fmt.Errorf("provider: connect: %w", err))
	}
	s.stream = stream

	hello := &toolsdv1.ProviderHello{Name: validUTF8(p.name), Version: validUTF8(p.opts.version), MaxInFlight: p.opts.maxInFlight}
	if err := s.send(&toolsdv1.ProviderServiceConnectRequest{Msg: &toolsdv1.ProviderServiceConnectRequest_Hello{Hello: hello}}); err != nil {
		return false, s.ended(ctx, fmt.Errorf("provider: send hello: %w", err))
	}
	// Past the wait the stream is cut: its Recv then returns.
	welcomeBy := time.AfterFunc(p.opts.welcomeWait, cancel)
	m, err := stream.Recv()
	if !welcomeBy.Stop() && ctx.Err() == nil {
		return false, fmt.Errorf("provider: no welcome from toolsd within %v of the hello", p.opts.welcomeWait)
	}
	if err != nil {
		return false, s.ended(ctx, fmt.Errorf("provider: await welcome: %w", err))
	}
	w := m.GetWelcome()
	if w == nil {
		return false, fmt.Errorf("provider: toolsd answered hello with %T, want a welcome", m.GetMsg())
	}
	s.log = p.log.With(zap.String("provider_id", w.GetProviderId()))
	s.maxResult = w.GetMaxResultBytes()
	s.mu.Lock()
	s.welcomed = true
	s.mu.Unlock()
	tools := p.attach(s, w.GetProviderId())
	s.log.Info("connected to toolsd", zap.Int("tools", len(tools)))
	if len(tools) > 0 {
		s.firstRefs = make(map[uint64]bool)
		for _, ref := range s.register(tools) {
			s.firstRefs[ref] = true
		}
	} else {
		p.markReady()
	}
	for {
		m, err := stream.Recv()
		if err != nil {
			return true, s.ended(ctx, fmt.Errorf("provider: stream ended: %w", err))
		}
		s.handle(m) //nolint:contextcheck // calls run under s.callCtx, which ends with the caller's context (see drain)
	}
}

// drain runs once the caller's context has ended (the handlers' contexts ended with
// it): it unregisters the tools, waits for the running calls until grace ends, gives up
// the answers of those still running, half-closes the stream and waits (closeWait at
// most) for toolsd to end it, failing the calls left with PROVIDER_GONE. Before the
// welcome there is nothing to wait for: the stream is cut.
func (s *session) drain(grace context.Context) {
	defer s.cancel()
	s.mu.Lock()
	if !s.welcomed || s.closed {
		s.mu.Unlock()
		return
	}
	s.draining = true
	s.drained = make(chan struct{})
	if len(s.calls) == 0 {
		close(s.drained)
	}
	drained := s.drained
	// Sent from a goroutine, as a send may wait on toolsd: the grace and the cut below
	// still bound the drain.
	s.wg.Go(s.unregister)
	s.mu.Unlock()
	select {
	case <-drained:
	case <-grace.Done():
	case <-s.recvDone:
		return
	}
	// From here on the stream is cut after closeWait, also if a send cannot complete.
	cut := time.AfterFunc(closeWait, s.cancel)
	defer cut.Stop()
	for _, r := range s.abandon() {
		s.log.Debug("call still running after the shutdown grace; toolsd fails it when the stream closes",
			zap.String("tool", r.tool), zap.Uint64("request_id", r.id))
	}
	s.sendMu.Lock()
	s.halfClosed = true
	err := s.stream.CloseSend()
	s.sendMu.Unlock()
	if err != nil {
		return
	}
	select {
	case <-s.recvDone:
	case <-s.ctx.Done():
		s.log.Debug("toolsd did not end the half-closed stream in time; cut it", zap.Duration("waited", closeWait))
	}
}

// abandon claims the answers of the calls whose handlers are still running and
// returns those calls: their handlers' answers will not be sent.
func (s *session) abandon() []*running {
	s.mu.Lock()
	defer s.mu.Unlock()
	left := make([]*running, 0, len(s.calls))
	for _, r := range s.calls {
		if r.claimed.CompareAndSwap(false, true) {
			r.done.Store(true)
			left = append(left, r)
		}
	}
	slices.SortFunc(left, func(a, b *running) int { return cmp.Compare(a.id, b.id) })
	return left
}

// ended maps an error to nil when the caller's context ended.
func (s *session) ended(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// close ends the session: no new calls and every handler's context cancelled. The
// handlers may still be running (see session.wg).
func (s *session) close() {
	s.p.detach(s)
	s.mu.Lock()
	s.closed = true
	s.calls = nil
	s.mu.Unlock()
	s.callCancel()
	s.cancel()
}

func (s *session) send(m *toolsdv1.ProviderServiceConnectRequest) error {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	return s.sendLocked(m)
}

// sendLocked sends m, unless the drain's half-close came first; sendMu must be held.
func (s *session) sendLocked(m *toolsdv1.ProviderServiceConnectRequest) error {
	if s.halfClosed {
		return errHalfClosed
	}
	return s.stream.Send(m)
}

// errHalfClosed is a send the drain's half-close came before: it is not made.
var errHalfClosed = errors.New("provider: the stream is half-closed")

// handle processes one message from toolsd.
func (s *session) handle(m *toolsdv1.ProviderServiceConnectResponse) {
	switch msg := m.GetMsg().(type) {
	case *toolsdv1.ProviderServiceConnectResponse_Execute:
		s.execute(msg.Execute)
	case *toolsdv1.ProviderServiceConnectResponse_Cancel:
		s.cancelCall(msg.Cancel.GetRequestId())
	case *toolsdv1.ProviderServiceConnectResponse_RegisterResult:
		if s.unregisterAnswered(msg.RegisterResult.GetRef()) {
			s.unregistered(msg.RegisterResult)
		} else {
			s.registered(msg.RegisterResult)
		}
	case *toolsdv1.ProviderServiceConnectResponse_Goodbye:
		s.log.Info("toolsd is shutting down", zap.String("reason", msg.Goodbye.GetReason()))
	default:
		s.log.Debug("ignored message from toolsd", zap.String("type", fmt.Sprintf("%T", m.GetMsg())))
	}
}

// registerBudget bounds the definitions one register message carries (and the
// welcome's max_result_bytes, when smaller: toolsd receives messages of that size).
// A message over toolsd's receive limit ends the stream, so a provider whose tools
// together exceed it would reconnect and fail again forever, never registering them.
// A definition larger than the budget is sent alone.
const registerBudget = 1 << 20

// registerMaxTools bounds the tools one register message names. toolsd refuses those
// past its limits.max_tools_per_provider one by one, and ends the stream of a message
// naming over twice as many; the SDK does not learn the limit, so it sends few enough
// that only a limit under half this would end it.
const registerMaxTools = 100

// register sends a registration of tools, in as many messages as their size and
// number need (see chunks), and returns the messages' refs.
func (s *session) register(tools []*toolImpl) []uint64 {
	var refs []uint64
	for _, chunk := range s.chunks(tools) {
		refs = append(refs, s.registerChunk(chunk))
	}
	return refs
}

// chunks splits tools into the register messages their size and number need.
func (s *session) chunks(tools []*toolImpl) [][]*toolImpl {
	budget := uint64(registerBudget)
	if s.maxResult > 0 {
		budget = min(budget, s.maxResult)
	}
	var chunks [][]*toolImpl
	for len(tools) > 0 {
		n, size := 0, uint64(0)
		for ; n < len(tools); n++ {
			sz := uint64(proto.Size(tools[n].def))
			if n > 0 && (size+sz > budget || n == registerMaxTools) {
				break
			}
			size += sz
		}
		chunks = append(chunks, tools[:n])
		tools = tools[n:]
	}
	return chunks
}

// registerChunk sends one register message and returns its ref.
func (s *session) registerChunk(tools []*toolImpl) uint64 {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	return s.sendRegister(tools)
}

// sendRegister sends one register message, holding sendMu, and returns its ref. Once
// the drain has begun nothing is registered (a retake or an Add then would undo its
// unregister): draining is read holding sendMu, which the drain's unregister holds
// while it sends.
func (s *session) sendRegister(tools []*toolImpl) uint64 {
	ref := s.nextRef.Add(1)
	if s.isDraining() {
		return ref
	}
	defs := make([]*toolsdv1.ToolDefinition, len(tools))
	for i, t := range tools {
		defs[i] = t.def
	}
	m := &toolsdv1.ProviderServiceConnectRequest{Msg: &toolsdv1.ProviderServiceConnectRequest_Register{
		Register: &toolsdv1.RegisterTools{Ref: ref, Scope: validUTF8(s.p.opts.scope), Tools: defs},
	}}
	if err := s.stream.Send(m); err != nil {
		s.log.Warn("registration not sent", zap.Error(err))
	}
	return ref
}

// replace registers changed definitions of the named tools: toolsd keeps the first
// definition a stream registers of a name, so each name is unregistered first, then
// its tool's current definition registered, on the one stream, which toolsd applies in
// order. Holding sendMu across both keeps another registration of the names (a
// concurrent Add, a retake) from coming between them. A call toolsd routes in between
// finds the tool unknown.
func (s *session) replace(names []string) {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	if s.isDraining() {
		return
	}
	tools := s.p.lookupAll(names)
	if err := s.sendUnregister(names); err != nil {
		s.log.Warn("replaced tools not unregistered; toolsd keeps their old definitions", zap.Error(err))
		return
	}
	for _, chunk := range s.chunks(tools) {
		s.sendRegister(chunk)
	}
}

// unregister unregisters every tool of the provider, in messages naming at most
// registerMaxTools, as the drain begins. Names this stream does not hold (refused, or
// taken by another provider) are refused by toolsd and left as they are.
func (s *session) unregister() {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	// The tools are read holding sendMu: one added before this point was registered
	// before it, and one added after is not registered (see sendRegister).
	if s.halfClosed {
		return // the drain ended before this began: toolsd removes the tools with the stream
	}
	if err := s.sendUnregister(s.p.names()); err != nil {
		s.log.Debug("unregister not sent; toolsd removes the tools when the stream ends", zap.Error(err))
	}
}

// sendUnregister unregisters names, in messages naming at most registerMaxTools,
// holding sendMu; it stops at the first message not sent.
func (s *session) sendUnregister(names []string) error {
	for chunk := range slices.Chunk(names, registerMaxTools) {
		ref := s.nextRef.Add(1)
		s.mu.Lock()
		if s.unregisterRefs == nil {
			s.unregisterRefs = make(map[uint64]bool)
		}
		s.unregisterRefs[ref] = true
		s.mu.Unlock()
		if err := s.stream.Send(&toolsdv1.ProviderServiceConnectRequest{Msg: &toolsdv1.ProviderServiceConnectRequest_Unregister{
			Unregister: &toolsdv1.UnregisterTools{Ref: ref, Scope: validUTF8(s.p.opts.scope), Names: chunk},
		}}); err != nil {
			return err
		}
	}
	return nil
}

// isDraining reports whether the drain has begun.
func (s *session) isDraining() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.draining
}

// unregisterAnswered reports whether ref is one of the unregister messages, which
// it answers.
func (s *session) unregisterAnswered(ref uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.unregisterRefs[ref] {
		return false
	}
	delete(s.unregisterRefs, ref)
	return true
}

// unregistered logs toolsd's answer to an unregister, ending the stream's hold of the
// names it removed. A name it refuses is usually one this stream did not hold; any it
// does hold go when the stream ends.
func (s *session) unregistered(r *toolsdv1.RegisterToolsResult) {
	for _, st := range r.GetTools() {
		if st.GetErrorCode() == "" {
			s.mu.Lock()
			delete(s.owned, st.GetName())
			s.mu.Unlock()
			s.p.answered(s, st.GetName(), regAnswer{state: Pending})
			s.log.Debug("tool unregistered", zap.String("tool", st.GetName()))
			continue
		}
		s.log.Debug("tool not unregistered; toolsd removes what this stream holds when it ends", zap.String("tool", st.GetName()),
			zap.String("code", st.GetErrorCode()), zap.String("message", st.GetErrorMessage()))
	}
}

func (s *session) registered(r *toolsdv1.RegisterToolsResult) {
	var taken []string
	for _, st := range r.GetTools() {
		refusal := regAnswer{state: Refused, code: st.GetErrorCode(), message: st.GetErrorMessage()}
		switch code := st.GetErrorCode(); {
		case code == "" && st.GetQuarantined():
			s.log.Warn("tool held back: its definition differs from the one toolsd pinned, and it stays invisible until an operator approves it (ApproveQuarantined)",
				zap.String("tool", st.GetName()), zap.String("content_hash", st.GetContentHash()))
			s.p.answered(s, st.GetName(), regAnswer{state: Quarantined})
			s.retook(st.GetName())
		case code == "":
			s.log.Debug("tool registered", zap.String("tool", st.GetName()), zap.String("content_hash", st.GetContentHash()))
			s.p.answered(s, st.GetName(), regAnswer{state: Registered})
			s.retook(st.GetName())
		case code == "ALREADY_EXISTS" && s.owns(st.GetName()):
			// The stream's earlier registration stands (as registered or held back).
			s.log.Debug("tool already registered on this stream; toolsd keeps the first definition",
				zap.String("tool", st.GetName()))
		case code == "ALREADY_EXISTS" && s.p.opts.retakeFor > 0:
			// Pending while registered again; retake marks it refused when it gives up.
			refusal.state = Pending
			s.p.answered(s, st.GetName(), refusal)
			taken = append(taken, st.GetName())
		default:
			s.log.Warn("toolsd rejected a tool", zap.String("tool", st.GetName()),
				zap.String("code", st.GetErrorCode()), zap.String("message", st.GetErrorMessage()))
			s.p.answered(s, st.GetName(), refusal)
		}
	}
	if len(taken) > 0 {
		s.retake(taken)
	}
	if ref := r.GetRef(); s.firstRefs[ref] {
		delete(s.firstRefs, ref)
		if len(s.firstRefs) == 0 {
			s.p.markReady()
		}
	}
}

// retake registers the named tools again after the retake delay, unless the stream
// ends first. The first refusal of a name is logged as a warning, later ones at debug;
// a name refused for longer than the retake window is given up, with a warning.
func (s *session) retake(names []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	if s.retaking == nil {
		s.retaking = make(map[string]time.Time)
	}
	now := s.p.opts.clockNow()
	again := names[:0:0]
	for _, name := range names {
		first, refused := s.retaking[name]
		switch {
		case !refused:
			s.retaking[name] = now
			s.log.Warn("tool name taken in toolsd; registering again later", zap.String("tool", name),
				zap.String("hint", "another stream (often this provider's previous one) still holds it"))
		case now.Sub(first) > s.p.opts.retakeFor:
			delete(s.retaking, name)
			s.log.Warn("tool name still taken in toolsd; giving up registering it on this stream",
				zap.String("tool", name), zap.Duration("refused_for", now.Sub(first)))
			s.p.gaveUp(s, name)
			continue
		default:
			s.log.Debug("tool name still taken in toolsd; registering again later", zap.String("tool", name))
		}
		again = append(again, name)
	}
	if len(again) == 0 {
		return
	}
	d := max(s.retakeDelay, retakeMin)
	s.retakeDelay = min(2*d, retakeMax)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		fired, stop := s.p.opts.timer(jitter(d))
		defer stop()
		select {
		case <-fired:
		case <-s.callCtx.Done(): // the session, or the provider, is ending
			return
		}
		if tools := s.p.lookupAll(again); len(tools) > 0 {
			s.register(tools)
		}
	}()
}

// owns reports whether toolsd holds name from this stream.
func (s *session) owns(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.owned[name]
}

// retook notes that a name registered on this stream, ending its retakes.
func (s *session) retook(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.owned == nil {
		s.owned = make(map[string]bool)
	}
	s.owned[name] = true
	if _, ok := s.retaking[name]; ok {
		delete(s.retaking, name)
		s.log.Info("tool registered after its name was freed", zap.String("tool", name))
	}
	if len(s.retaking) == 0 {
		s.retakeDelay = 0
	}
}

// execute starts the call's handler on its own goroutine, with a context derived from
// the session's callCtx. A request id already in flight is ignored: toolsd numbers its
// requests, and any answer to the second would go to the first, whose cancel and answer
// keep the id.
func (s *session) execute(req *toolsdv1.ExecuteRequest) {
	id := req.GetRequestId()
	if s.hasCall(id) {
		s.log.Warn("call ignored: its request id is already in flight", zap.String("tool", req.GetTool()), zap.Uint64("request_id", id))
		return
	}
	t := s.p.lookup(req.GetTool())
	if t == nil {
		s.refuse(id, fmt.Sprintf("provider %q has no tool %q", s.p.name, req.GetTool()))
		return
	}
	received := time.Now()
	var (
		ctx    context.Context
		cancel context.CancelFunc
	)
	deadline := callDeadline(req, received)
	if !deadline.IsZero() {
		ctx, cancel = context.WithDeadline(s.callCtx, deadline)
	} else {
		ctx, cancel = context.WithCancel(s.callCtx)
	}
	ctx = withTraceContext(ctx, req.GetTraceContext())
	r := &running{s: s, id: id, cancel: cancel, tool: t.Name(), callID: req.GetCallId(), sessionID: req.GetSessionId(), started: received}
	s.mu.Lock()
	if s.closed || s.draining || s.callCtx.Err() != nil {
		// Shutting down: not started, not answered (see session).
		s.mu.Unlock()
		cancel()
		s.log.Debug("call not started: the provider is shutting down", zap.String("tool", t.Name()), zap.Uint64("request_id", id))
		return
	}
	s.calls[id] = r
	s.p.track(r)
	s.mu.Unlock()
	call := Call{
		CallID:    req.GetCallId(),
		SessionID: req.GetSessionId(),
		Scope:     req.GetScope(),
		Tool:      req.GetTool(),
		Turn:      req.GetTurn(),
		Step:      req.GetStep(),
		Attempt:   int(req.GetAttempt()),
		Deadline:  deadline,
		run:       r,

		TraceContext: req.GetTraceContext(),
	}
	go s.run(ctx, r, t, call, req.GetArgumentsJson())
}

// withTraceContext returns ctx carrying the remote span context that headers (W3C
// Trace Context, as toolsd sends them) name, or ctx itself when they name none. The
// propagator is W3C's own rather than OpenTelemetry's global one, which does nothing
// until a program installs one: the field holds W3C headers whatever the program uses.
func withTraceContext(ctx context.Context, headers map[string]string) context.Context {
	if len(headers) == 0 {
		return ctx
	}
	return propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier(headers))
}

// callDeadline is when the call's time runs out on this host's clock (zero if never):
// received, when the request arrived, plus its timeout, which does not depend on this
// clock agreeing with toolsd's; or, from a toolsd that sends no timeout, its deadline,
// read on toolsd's clock. A deadline that reads as already past on a clock running
// ahead would end every call before its handler started.
func callDeadline(req *toolsdv1.ExecuteRequest, received time.Time) time.Time {
	if d := req.GetTimeout(); d != nil && d.IsValid() {
		return received.Add(d.AsDuration())
	}
	if dl := req.GetDeadline(); dl != nil && dl.IsValid() {
		return dl.AsTime()
	}
	return time.Time{}
}

// refuse answers a call that cannot run with an error, unless the session has ended.
func (s *session) refuse(id uint64, msg string) {
	// Answered from a goroutine: the receive loop must never wait on a send, or it
	// could wait on toolsd, which may be waiting for it to read.
	res := errorResult(msg)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.wg.Go(func() { s.sendResult(id, res, false) })
	}
}

// run runs one handler and sends its result, also when toolsd cancelled the call:
// toolsd waits for that answer to know the tool has stopped. The result is sent from a
// deferred call, so that a handler that ends its goroutine (runtime.Goexit, as
// t.FailNow does) still answers, with an error.
func (s *session) run(ctx context.Context, r *running, t *toolImpl, call Call, args string) {
	stack.Reserve(int(r.id % (1 << 30))) // grown first: decoding and sending would grow it deep in a call
	defer s.p.untrack(r)
	defer r.cancel()
	var res *toolsdv1.ExecuteResult
	defer func() {
		if res == nil {
			res = errorResult(fmt.Sprintf("tool %q failed unexpectedly (it ended its goroutine)", t.Name()))
		}
		// The call counts as running until its answer is sent: a draining session
		// half-closes the stream only after that. Its progress ends here, before the
		// answer's send (see running.progress).
		r.done.Store(true)
		defer s.finish(r)
		if !r.claimed.CompareAndSwap(false, true) || !s.inFlight(r) || s.ctx.Err() != nil {
			return // abandoned, or the session is ending: nobody awaits this result
		}
		if res.GetCancelled() && !r.toldToStop.Load() && s.callCtx.Err() != nil {
			return // stopped by the provider's shutdown: left to PROVIDER_GONE (see session)
		}
		s.sendResult(r.id, res, r.toldToStop.Load())
	}()
	res = s.invoke(ctx, t, call, args)
}

// invoke calls the handler, turning a panic into an error result.
func (s *session) invoke(ctx context.Context, t *toolImpl, call Call, args string) (res *toolsdv1.ExecuteResult) {
	defer func() {
		if v := recover(); v != nil {
			s.log.Error("tool panicked", zap.String("tool", t.Name()), zap.Uint64("request_id", call.run.id),
				zap.Any("panic", v), zap.StackSkip("stack", 1))
			res = errorResult(fmt.Sprintf("tool %q failed unexpectedly (panic)", t.Name()))
		}
	}()
	return t.invoke(ctx, call, args)
}

// hasCall reports whether a call with request id id is in flight. Only the receive
// loop adds calls, so the answer holds until it adds one.
func (s *session) hasCall(id uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[id] != nil
}

// inFlight reports whether r is in flight on the session (which has not ended).
func (s *session) inFlight(r *running) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[r.id] == r
}

// finish removes r from the calls in flight.
func (s *session) finish(r *running) {
	r.done.Store(true)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.calls[r.id] != r {
		return
	}
	delete(s.calls, r.id)
	if s.draining && len(s.calls) == 0 {
		select {
		case <-s.drained:
		default:
			close(s.drained)
		}
	}
}

// cancelCall cancels the call's context; the call stays in flight until its handler
// returns, and its result is sent as for any call.
func (s *session) cancelCall(id uint64) {
	s.mu.Lock()
	r := s.calls[id]
	s.mu.Unlock()
	if r != nil {
		r.toldToStop.Store(true)
		r.done.Store(true)
		r.cancel()
	}
}

// sendResult sends res as the answer to request id; toldToStop says toolsd cancelled
// the call.
func (s *session) sendResult(id uint64, res *toolsdv1.ExecuteResult, toldToStop bool) {
	n := uint64(len(res.GetContent()) + len(res.GetValueJson()) + len(res.GetErrorMessage()) + len(res.GetMetaJson()))
	switch {
	case s.maxResult == 0 || n <= s.maxResult:
	case toldToStop && !res.GetIsError():
		// toolsd records a success after its cancel ABORTED, whatever it carries: this one
		// goes as a success without its payload, not as its size (RESULT_TOO_LARGE).
		res = &toolsdv1.ExecuteResult{ConcludesTurn: res.GetConcludesTurn()}
	default:
		s.log.Warn("result larger than toolsd accepts; sending its size instead (the call fails with RESULT_TOO_LARGE)",
			zap.Uint64("request_id", id), zap.Uint64("bytes", n), zap.Uint64("max_result_bytes", s.maxResult))
		// Its request to end the turn and its report that the tool stopped are not
		// payload: they stay with the size (a stopped call is ABORTED, not too large).
		res = &toolsdv1.ExecuteResult{OversizedBytes: n, ConcludesTurn: res.GetConcludesTurn(), Cancelled: res.GetCancelled()}
	}
	res.RequestId = id
	err := s.send(&toolsdv1.ProviderServiceConnectRequest{Msg: &toolsdv1.ProviderServiceConnectRequest_Result{Result: res}})
	if err != nil && !errors.Is(s.ctx.Err(), context.Canceled) {
		s.log.Debug("result not sent", zap.Uint64("request_id", id), zap.Error(err))
	}
}

// maxProgressBytes caps a progress message. Progress is a status line for the agent
// loop's UI, and a message larger than toolsd receives at all would end the stream,
// failing every call on it.
const maxProgressBytes = 64 << 10

func (r *running) progress(message string, progress, total float64) {
	if r.done.Load() {
		return
	}
	limit := uint64(maxProgressBytes)
	if r.s.maxResult > 0 {
		limit = min(limit, r.s.maxResult)
	}
	m := &toolsdv1.ProviderServiceConnectRequest{Msg: &toolsdv1.ProviderServiceConnectRequest_Progress{
		Progress: &toolsdv1.ExecuteProgress{RequestId: r.id, Message: []byte(textcut.Prefix(message, int(limit))), Progress: progress, Total: total},
	}}
	if err := r.sendProgress(m); err != nil {
		r.s.log.Debug("progress not sent", zap.Uint64("request_id", r.id), zap.Error(err))
	}
}

// sendProgress sends m unless the call is done, which it reads holding sendMu: the
// call's answer is sent holding it once the call is done, so a report from a goroutine
// the handler left running, which read the call as running before the answer went, is
// not sent after it (toolsd would drop it).
func (r *running) sendProgress(m *toolsdv1.ProviderServiceConnectRequest) error {
	r.s.sendMu.Lock()
	defer r.s.sendMu.Unlock()
	if r.done.Load() {
		return nil
	}
	return r.s.sendLocked(m)
}
