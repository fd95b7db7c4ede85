package observe

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
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
	ce.Write(append(callFields(e),
		zap.String("provider", owner),
		zap.String("code", code),
		zap.Duration("duration", d),
		zap.Int("args_bytes", len(e.Arguments)),
		zap.String("args_sha256", digest(e.Arguments)),
		zap.Int("result_bytes", len(r.Content)+len(r.Value)),
		zap.String("result_sha256", digest([]byte(r.Content), r.Value)),
	)...)
	if !o.payloads {
		return
	}
	if pe := o.log.Check(zapcore.DebugLevel, msgPayload); pe != nil {
		fields := append(callFields(e),
			zap.String("arguments", capText(string(e.Arguments), o.payloadCap)),
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

// maxLoggedID bounds the call id and tool name in the log and on spans: the model
// chooses them, and only the request size bounds them (a registered name has at most
// 64 bytes).
const maxLoggedID = 128

// callFields identify a call in both lines.
func callFields(e *tool.Exec) []zap.Field {
	fields := make([]zap.Field, 0, 16)
	return append(fields,
		zap.String("session_id", e.SessionID),
		zap.String("batch_id", e.BatchID),
		zap.Uint64("turn", e.Turn),
		zap.Uint64("step", e.Step),
		zap.Int("index", e.Index),
		zap.String("call_id", textcut.Ellipsis(e.CallID, maxLoggedID)),
		zap.String("tool", textcut.Ellipsis(e.Name, maxLoggedID)),
	)
}

// digest is the hex prefix of the SHA-256 of the concatenated parts.
func digest(parts ...[]byte) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write(p)
	}
	var sum [sha256.Size]byte
	return hex.EncodeToString(h.Sum(sum[:0])[:hashBytes])
}

// capText cuts s to at most limit bytes at a UTF-8 boundary, saying how long it was.
func capText(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	return textcut.Prefix(s, limit) + fmt.Sprintf("…[%d bytes total]", len(s))
}
