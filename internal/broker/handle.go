package broker

import (
	"fmt"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/rpcerr"
	"github.com/toolsd/toolsd/internal/textcut"
	"github.com/toolsd/toolsd/internal/tool"
)

// handle processes one message after the hello. Malformed messages are logged, counted
// and ignored; only a register or unregister far over the per-message limit (see
// [Broker.farOverPerMessage]) ends the stream, with the error returned.
func (b *Broker) handle(c *conn, m *toolsdv1.ProviderServiceConnectRequest) error {
	switch msg := m.GetMsg().(type) {
	case *toolsdv1.ProviderServiceConnectRequest_Result:
		b.result(c, msg.Result)
	case *toolsdv1.ProviderServiceConnectRequest_Progress:
		b.progress(c, msg.Progress)
	case *toolsdv1.ProviderServiceConnectRequest_Register:
		return b.register(c, msg.Register)
	case *toolsdv1.ProviderServiceConnectRequest_Unregister:
		return b.unregister(c, msg.Unregister)
	default:
		b.obs.MalformedMessage()
		c.warnStray("ignored provider message", zap.String("kind", messageKind(m)))
	}
	return nil
}

// maxStrayLogs bounds the warnings one stream's stray messages write (the metrics count
// them all), so a provider cannot flood the log.
const maxStrayLogs = 10

// warnStray logs a stray message at warn, the first maxStrayLogs of the stream only.
// It runs on the receive loop.
func (c *conn) warnStray(msg string, fields ...zap.Field) {
	c.strays++
	switch {
	case c.strays <= maxStrayLogs:
		c.log.Warn(msg, fields...)
	case c.strays == maxStrayLogs+1:
		c.log.Warn("further stray messages on this stream are not logged", zap.Int("logged", maxStrayLogs))
	}
}

// messageKind names a message for logs and errors.
func messageKind(m *toolsdv1.ProviderServiceConnectRequest) string {
	switch m.GetMsg().(type) {
	case *toolsdv1.ProviderServiceConnectRequest_Hello:
		return "a second hello"
	case *toolsdv1.ProviderServiceConnectRequest_Register:
		return "register"
	case *toolsdv1.ProviderServiceConnectRequest_Unregister:
		return "unregister"
	case *toolsdv1.ProviderServiceConnectRequest_Result:
		return "result"
	case *toolsdv1.ProviderServiceConnectRequest_Progress:
		return "progress"
	default:
		return "an empty message"
	}
}

// result resolves the pending call the result answers; anything else is dropped.
func (b *Broker) result(c *conn, r *toolsdv1.ExecuteResult) {
	id := r.GetRequestId()
	p := c.answer(id)
	if p == nil {
		b.stale(c, id)
		return
	}
	res := decodeResult(r, b.limits.MaxResultBytes)
	if r.GetCancelled() {
		if p.cancelled.Load() {
			res = abortedAnswer(res) // the tool stopped because it was told to
		} else {
			p.stopped.Store(true) // perhaps at its deadline: the call judges (see taken)
		}
	}
	if code := res.Code(); code == tool.CodeInvalidResult || code == tool.CodeResultTooLarge {
		b.obs.InvalidResult()
		c.log.Warn("invalid result", zap.Uint64("request_id", id), zap.String("call_id", textcut.Ellipsis(p.callID, textcut.MaxLoggedID)),
			zap.String("code", string(code)), zap.String("reason", res.Err.Message))
	}
	p.done <- res
}

// stale drops a result for a request that is not pending on c: finished, cancelled,
// not sent yet, or never issued on c. Request ids are numbered per stream: an id
// another provider was sent names, on c, at most one of c's own calls.
func (b *Broker) stale(c *conn, id uint64) {
	b.obs.StaleResult()
	if !c.issued(id) {
		c.warnStray("dropped result for a request id never issued", zap.Uint64("request_id", id))
		return
	}
	c.log.Debug("dropped result for a request not pending on this stream", zap.Uint64("request_id", id))
}

// MaxProgressBytes caps a progress message forwarded to the agent loop; a longer one is
// cut. Progress is a status line, and toolsd receives provider messages up to its
// request or result limit: forwarded whole, one could exceed what the agent loop's gRPC
// client receives (4 MiB by default) and fail its whole batch, or fill the memory of a
// batch's outbox.
const MaxProgressBytes = 64 << 10

// progressText is a progress message as forwarded: valid UTF-8 of at most
// MaxProgressBytes. It is cut before it is repaired, so that a long message is not
// copied whole, and again after: a repair makes each run of bad bytes a three-byte
// U+FFFD, so that text cut to the limit, then repaired, could be twice as long.
func progressText(b []byte) string {
	return textcut.Prefix(validUTF8(string(truncate(b, MaxProgressBytes))), MaxProgressBytes)
}

// progress forwards a progress report to the waiting call's observer. It runs on the
// receive loop, so the callback must not block.
func (b *Broker) progress(c *conn, pr *toolsdv1.ExecuteProgress) {
	var (
		fn     func(tool.Progress)
		callID string
		index  int
	)
	c.mu.Lock()
	if p := c.pending[pr.GetRequestId()]; p != nil && p.sent.Load() {
		fn, callID, index = p.progress, p.callID, p.index
	}
	c.mu.Unlock()
	if fn == nil {
		return
	}
	fn(tool.Progress{
		CallID:   callID,
		Index:    index,
		Message:  progressText(pr.GetMessage()),
		Progress: finite(pr.GetProgress()),
		Total:    finite(pr.GetTotal()),
	})
}

// register registers each tool with the provider as owner and answers with one status
// per tool, in request order. Each tool is taken or refused on its own: past
// MaxToolsPerRegister, the rest of the message is refused (RESOURCE_EXHAUSTED) and the
// tools before them are registered. A message far over it is refused whole (see
// [Broker.farOverPerMessage]).
func (b *Broker) register(c *conn, r *toolsdv1.RegisterTools) error {
	defs, scope := r.GetTools(), r.GetScope()
	if err := b.farOverPerMessage("register", len(defs)); err != nil {
		return err
	}
	statuses := make([]*toolsdv1.ToolRegistrationStatus, len(defs))
	taken := min(len(defs), b.limits.MaxToolsPerRegister)
	b.overPerMessage(statuses, "register", taken, func(i int) string { return defs[i].GetName() })
	if !c.registering(func() {
		for i, d := range defs[:taken] {
			statuses[i] = b.registerOne(c, scope, d)
		}
	}) {
		return nil
	}
	b.reply(c, r.GetRef(), statuses)
	return nil
}

// farOverPerMessage refuses a register or unregister message that names more than twice
// MaxToolsPerRegister tools. Its answer, a status per tool, would be tens of times its
// size (an empty definition or name is two bytes on the wire, its refusal tens): a 4 MiB
// message would draw hundreds of MiB. The stream ends with the error.
func (b *Broker) farOverPerMessage(kind string, n int) error {
	limit := b.limits.MaxToolsPerRegister
	if n-limit <= limit {
		return nil
	}
	return rpcerr.Errorf(codes.ResourceExhausted, rpcerr.LimitExceeded,
		"broker: %s names %d tools; one message may name %d, and one naming over twice that is refused whole", kind, n, limit)
}

// overPerMessage fills the statuses from index taken on, which one register or
// unregister message carries past MaxToolsPerRegister.
func (b *Broker) overPerMessage(statuses []*toolsdv1.ToolRegistrationStatus, kind string, taken int, name func(int) string) {
	if taken == len(statuses) {
		return
	}
	msg := fmt.Sprintf("%s carries %d tools; only the first %d of one message are taken", kind, len(statuses), taken)
	for i := taken; i < len(statuses); i++ {
		statuses[i] = &toolsdv1.ToolRegistrationStatus{Name: name(i), ErrorCode: "RESOURCE_EXHAUSTED", ErrorMessage: msg}
	}
}

// maxLoggedScope bounds the scope a refused registration logs: longer than any valid one.
const maxLoggedScope = 1024

func (b *Broker) registerOne(c *conn, scope string, d *toolsdv1.ToolDefinition) *toolsdv1.ToolRegistrationStatus {
	st := &toolsdv1.ToolRegistrationStatus{Name: d.GetName()}
	def, err := DefinitionFromProto(d)
	if gerr := b.checkScope(c, scope); gerr != nil {
		err = gerr
		st.ErrorCode, st.ErrorMessage = "PERMISSION_DENIED", validUTF8(gerr.Error())
	} else if err != nil {
		st.ErrorCode, st.ErrorMessage = "INVALID_ARGUMENT", validUTF8(err.Error())
	} else if hash, held, rerr := b.reg.Register(scope, def, c.id); rerr != nil {
		err = rerr
		b.fail(st, err)
	} else {
		st.ContentHash, st.Quarantined = validUTF8(hash), held
		c.log.Debug("tool registered", zap.String("scope", scope), zap.String("tool", st.Name))
		return st
	}
	// Cut: a refused scope may be megabytes, and this is logged for every tool of the
	// message; a refused name may be as long as the message.
	c.logRejected(zap.String("scope", textcut.Ellipsis(scope, maxLoggedScope)),
		zap.String("tool", textcut.Ellipsis(st.Name, textcut.MaxLoggedID)),
		zap.String("code", st.ErrorCode), zap.Error(err))
	return st
}

// logRejected logs a refused registration at info, the first maxStrayLogs of the stream
// only, and the rest at debug: the provider learns of each refusal from its status,
// and an empty definition is two bytes on the wire and its line hundreds, so a provider
// sending register messages without end would otherwise flood the log. It runs on the
// receive loop.
func (c *conn) logRejected(fields ...zap.Field) {
	c.rejections++
	if c.rejections <= maxStrayLogs {
		c.log.Info("tool registration rejected", fields...)
		return
	}
	if c.rejections == maxStrayLogs+1 {
		c.log.Info("further rejected registrations on this stream are logged at debug", zap.Int("logged", maxStrayLogs))
	}
	c.log.Debug("tool registration rejected", fields...)
}

// unregister removes the named tools and answers like register (the same per-message
// limit applies).
func (b *Broker) unregister(c *conn, r *toolsdv1.UnregisterTools) error {
	names, scope := r.GetNames(), r.GetScope()
	if err := b.farOverPerMessage("unregister", len(names)); err != nil {
		return err
	}
	statuses := make([]*toolsdv1.ToolRegistrationStatus, len(names))
	taken := min(len(names), b.limits.MaxToolsPerRegister)
	b.overPerMessage(statuses, "unregister", taken, func(i int) string { return names[i] })
	if !c.registering(func() {
		for i, n := range names[:taken] {
			st := &toolsdv1.ToolRegistrationStatus{Name: n}
			if err := b.checkScope(c, scope); err != nil {
				st.ErrorCode, st.ErrorMessage = "PERMISSION_DENIED", validUTF8(err.Error())
			} else if err := b.reg.Unregister(scope, n, c.id); err != nil {
				b.fail(st, err)
			}
			statuses[i] = st
		}
	}) {
		return nil
	}
	b.reply(c, r.GetRef(), statuses)
	return nil
}

// fail fills st's error fields from a registrar error.
func (b *Broker) fail(st *toolsdv1.ToolRegistrationStatus, err error) {
	code, msg := b.mapErr(err)
	if code == "" { // an empty code would read as success
		code = "INVALID_ARGUMENT"
	}
	if msg == "" {
		msg = err.Error()
	}
	st.ErrorCode, st.ErrorMessage = validUTF8(code), validUTF8(msg)
}

// reply answers a register or unregister. It runs on the receive loop, so it posts the
// answer rather than send it (see [conn.post]).
func (b *Broker) reply(c *conn, ref uint64, statuses []*toolsdv1.ToolRegistrationStatus) {
	m := &toolsdv1.ProviderServiceConnectResponse{Msg: &toolsdv1.ProviderServiceConnectResponse_RegisterResult{
		RegisterResult: &toolsdv1.RegisterToolsResult{Ref: ref, Tools: statuses},
	}}
	c.post(m)
}

// checkScope applies the tenancy guard, if any, with the provider's stream context (which
// carries its authenticated identity).
func (b *Broker) checkScope(c *conn, scope string) error {
	if b.guard == nil {
		return nil
	}
	return b.guard(c.ctx, scope)
}
