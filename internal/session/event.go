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
	// Arguments is the exact text the model sent, except that "" is logged as {}, the
	// empty object toolsd takes it for. It may be malformed JSON: it is kept as text
	// and never re-encoded.
	Arguments string
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

// EventSize is the size of ev that [WithMaxEventBytes] limits, so that a caller can
// tell before an Append whether an event it builds will fit.
func EventSize(ev *Event) int { return payloadSize(ev) }

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

// cloneAll returns deep copies of events (records, cited seqs and result meta bytes are
// the store's own; nil stays nil and empty bytes stay empty) with the copies' records,
// cited seqs and bytes carved from one allocation per kind: an append costs a handful
// of allocations however many events it carries. Each carved slice is capped at its own
// length, so appending to one never writes into its neighbour. Texts (a call's
// arguments among them) are strings, which are shared: no one can write to them.
func cloneAll(events []Event) []Event {
	var nSeqs, nBytes, nCalls, nResults, nErrs, nMsgs int
	for i := range events {
		ev := &events[i]
		nSeqs += len(ev.SourceSeqs)
		if c := ev.Call; c != nil {
			nCalls++
		}
		if r := ev.Result; r != nil {
			nResults++
			nBytes += len(r.Meta)
			if r.Error != nil {
				nErrs++
			}
		}
		if ev.Message != nil {
			nMsgs++
		}
	}
	var (
		out     = make([]Event, len(events))
		seqs    = make([]uint64, 0, nSeqs)
		buf     = make([]byte, 0, nBytes)
		calls   = make([]CallRecord, 0, nCalls)
		results = make([]ResultRecord, 0, nResults)
		errs    = make([]tool.Error, 0, nErrs)
		msgs    = make([]MessageRecord, 0, nMsgs)
	)
	carve := func(b []byte) []byte {
		if b == nil {
			return nil
		}
		start := len(buf)
		buf = append(buf, b...)
		return buf[start:len(buf):len(buf)]
	}
	for i := range events {
		ev, o := &events[i], &out[i]
		*o = *ev
		o.SourceSeqs = nil
		if len(ev.SourceSeqs) > 0 {
			start := len(seqs)
			seqs = append(seqs, ev.SourceSeqs...)
			o.SourceSeqs = seqs[start:len(seqs):len(seqs)]
		}
		if c := ev.Call; c != nil {
			calls = append(calls, *c)
			o.Call = &calls[len(calls)-1] // Arguments is a string: shared, not copied
		}
		if r := ev.Result; r != nil {
			results = append(results, *r)
			rc := &results[len(results)-1]
			rc.Meta = carve(r.Meta)
			if r.Error != nil {
				errs = append(errs, *r.Error)
				rc.Error = &errs[len(errs)-1]
			}
			o.Result = rc
		}
		if m := ev.Message; m != nil {
			msgs = append(msgs, *m)
			o.Message = &msgs[len(msgs)-1]
		}
	}
	return out
}
