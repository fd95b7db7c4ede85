package observe

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"sync"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/toolsd/toolsd/internal/textcut"
	"github.com/toolsd/toolsd/internal/tool"
)

// Messages of the call log.
const (
	msgCall    = "tool call"
	msgPayload = "tool call payload"
)

// hashBytes is how much of a SHA-256 the log shows: enough to tell payloads apart and
// to match a log line to a session-log event, too little to be mistaken for content.
const hashBytes = 8

// logCall writes the call's info line and, with payload logging on at debug level, its
// payload line.
func (o *CallObserver) logCall(e *tool.Exec, owner, code string, r tool.Result, d time.Duration) {
	ce := o.log.Check(zapcore.InfoLevel, msgCall)
	if ce == nil {
		return
	}
	line := &callLine{
		callIdent: identOf(e),
		owner:     owner, code: code, d: d,
		argsBytes: len(e.Arguments), resultBytes: len(r.Content) + len(r.Value),
	}
	digestInto(&line.argsHash, e.Arguments, nil)
	digestInto(&line.resultHash, r.Content, r.Value)
	ce.Write(zap.Inline(line))
	if !o.payloads {
		return
	}
	if pe := o.log.Check(zapcore.DebugLevel, msgPayload); pe != nil {
		fields := append(make([]zap.Field, 0, 5), zap.Inline(&line.callIdent),
			zap.String("arguments", capText(e.Arguments, o.payloadCap)),
			zap.String("content", capText(r.Content, o.payloadCap)),
		)
		if len(r.Value) > 0 {
			fields = append(fields, zap.String("value", capText(string(r.Value), o.payloadCap)))
		}
		if r.Err != nil && r.Err.Reason != "" {
			fields = append(fields, zap.String("reason", capText(r.Err.Reason, o.payloadCap)))
		}
		pe.Write(fields...)
	}
}

// callIdent identifies a call in both lines, by the same fields. It holds copies, not
// the call: a core may keep a line past the call (a test's observer does).
type callIdent struct {
	session, batch, callID, tool string
	turn, step                   uint64
	index                        int
}

func identOf(e *tool.Exec) callIdent {
	return callIdent{
		session: e.SessionID, batch: e.BatchID, turn: e.Turn, step: e.Step, index: e.Index,
		callID: textcut.Ellipsis(e.CallID, textcut.MaxLoggedID), tool: textcut.Ellipsis(e.Name, textcut.MaxLoggedID),
	}
}

// MarshalLogObject implements [zapcore.ObjectMarshaler].
func (c *callIdent) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddString("session_id", c.session)
	enc.AddString("batch_id", c.batch)
	enc.AddUint64("turn", c.turn)
	enc.AddUint64("step", c.step)
	enc.AddInt64("index", int64(c.index))
	enc.AddString("call_id", c.callID)
	enc.AddString("tool", c.tool)
	return nil
}

// callLine is the info line's fields, encoded by one marshaler: one allocation per
// line instead of a slice of fields and two digest strings.
type callLine struct {
	callIdent
	owner, code            string
	argsBytes, resultBytes int
	d                      time.Duration
	argsHash, resultHash   [2 * hashBytes]byte
}

// MarshalLogObject implements [zapcore.ObjectMarshaler]: the call's identity, then the
// outcome.
func (l *callLine) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	if err := l.callIdent.MarshalLogObject(enc); err != nil {
		return err
	}
	enc.AddString("provider", l.owner)
	enc.AddString("code", l.code)
	enc.AddDuration("duration", l.d)
	enc.AddInt64("args_bytes", int64(l.argsBytes))
	enc.AddByteString("args_sha256", l.argsHash[:])
	enc.AddInt64("result_bytes", int64(l.resultBytes))
	enc.AddByteString("result_sha256", l.resultHash[:])
	return nil
}

// digestInto writes the hex prefix of the SHA-256 of text followed by raw to dst. The
// text is hashed through the digester's buffer, a piece at a time: a 16 KiB argument is
// not copied whole to be hashed.
func digestInto(dst *[2 * hashBytes]byte, text string, raw []byte) {
	d := digesters.Get().(*digester)
	d.h.Reset()
	for len(text) > 0 {
		n := copy(d.buf[:], text)
		d.h.Write(d.buf[:n])
		text = text[n:]
	}
	d.h.Write(raw)
	hex.Encode(dst[:], d.h.Sum(d.sum[:0])[:hashBytes])
	digesters.Put(d)
}

// digester is a SHA-256 state with the buffers [digestInto] writes through.
type digester struct {
	h   hash.Hash
	buf [2048]byte
	sum [sha256.Size]byte
}

// digesters recycles digesters: the call log hashes two texts for every call.
var digesters = sync.Pool{New: func() any { return &digester{h: sha256.New()} }}

// capText cuts s to at most limit bytes at a UTF-8 boundary, saying how long it was.
func capText(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	return textcut.Prefix(s, limit) + fmt.Sprintf("…[%d bytes total]", len(s))
}
