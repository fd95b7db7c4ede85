package session

import (
	"encoding/json"
	"time"

	"github.com/toolsd/toolsd/internal/tool"
)

// EventType names what an [Event] records.
type EventType string

// The event types toolsd writes.
const (
	// TypeToolCall records a call before it runs.
	TypeToolCall EventType = "tool/call"
	// TypeToolResult records a call's outcome; it cites the call's seq.
	TypeToolResult EventType = "tool/result"
	// TypeUserMessage records an additional context delivered when a batch settles; it
	// cites the result that added it.
	TypeUserMessage EventType = "user/message"
)

// Event is one entry of a session's log. Seq, Time and SessionID are assigned by the
// store. Events returned by a store share their records with the store: treat them as
// read-only.
type Event struct {
	SessionID string
	// Seq is per session, dense, starting at 1 and increasing.
	Seq  uint64
	Type EventType
	// Time is when the store appended the event (UTC, no monotonic reading).
	Time    time.Time
	BatchID string
	Turn    uint64
	Step    uint64
	// SourceSeqs cites the events this one derives from: a tool/result cites its
	// tool/call, a user/message cites the tool/result that added it.
	SourceSeqs []uint64
	Call       *CallRecord
	Result     *ResultRecord
	Message    *MessageRecord
}

// CallRecord is the payload of a tool/call event.
type CallRecord struct {
	CallID string
	Name   string
	// Arguments is the exact text the model sent. It may be malformed JSON: it is kept
	// as bytes and never re-encoded.
	Arguments json.RawMessage
}

// ResultRecord is the payload of a tool/result event.
type ResultRecord struct {
	CallID  string
	Content string
	IsError bool
	Error   *tool.Error
	Meta    json.RawMessage
	// ConcludesTurn asks the loop to end the turn at this step.
	ConcludesTurn bool
	// Recovered marks the synthetic result written at start-up for a call interrupted by
	// a restart; the call was not re-run.
	Recovered bool
}

// MessageRecord is the payload of a user/message event.
type MessageRecord struct {
	Content string
}

// payloadSize is the size [WithMaxEventBytes] limits: the bytes of every variable-length
// field. Both stores measure it the same way; the Bolt encoding adds a few dozen bytes.
func payloadSize(ev *Event) int {
	n := len(ev.Type) + len(ev.BatchID) + 8*len(ev.SourceSeqs)
	if c := ev.Call; c != nil {
		n += len(c.CallID) + len(c.Name) + len(c.Arguments)
	}
	if r := ev.Result; r != nil {
		n += len(r.CallID) + len(r.Content) + len(r.Meta)
		if e := r.Error; e != nil {
			n += len(e.Code) + len(e.Message) + len(e.Reason) + len(e.Tool)
		}
	}
	if m := ev.Message; m != nil {
		n += len(m.Content)
	}
	return n
}

// clone deep-copies ev so that the store never aliases memory its caller may reuse.
// Strings are immutable and shared.
func clone(ev *Event) Event {
	out := *ev
	if ev.SourceSeqs != nil {
		out.SourceSeqs = append([]uint64(nil), ev.SourceSeqs...)
	}
	if c := ev.Call; c != nil {
		cc := *c
		cc.Arguments = cloneBytes(c.Arguments)
		out.Call = &cc
	}
	if r := ev.Result; r != nil {
		rc := *r
		rc.Meta = cloneBytes(r.Meta)
		if r.Error != nil {
			e := *r.Error
			rc.Error = &e
		}
		out.Result = &rc
	}
	if m := ev.Message; m != nil {
		mc := *m
		out.Message = &mc
	}
	return out
}

// cloneBytes copies b, keeping the difference between nil and empty.
func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append(make([]byte, 0, len(b)), b...)
}
