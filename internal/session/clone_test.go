package session

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolsd/toolsd/internal/tool"
)

func TestCloneAllOwnsItsCopies(t *testing.T) {
	in := []Event{
		{Type: TypeToolCall, BatchID: "b", Call: &CallRecord{CallID: "c1", Name: "n", Arguments: `{"a":1}`}},
		{Type: TypeToolCall, Call: &CallRecord{CallID: "c2", Name: "n", Arguments: `{}`}},
		{Type: TypeToolResult, SourceSeqs: []uint64{1}, Result: &ResultRecord{CallID: "c1", Content: "ok", Meta: json.RawMessage(`{"m":2}`)}},
		{Type: TypeToolResult, SourceSeqs: []uint64{}, Result: &ResultRecord{CallID: "c2", IsError: true, Error: &tool.Error{Code: tool.CodeToolError, Message: "x"}, Meta: json.RawMessage(`{"n":3}`)}},
		{Type: TypeUserMessage, SourceSeqs: []uint64{3}, Message: &MessageRecord{Content: "ctx"}},
		{Type: TypeToolResult, Result: &ResultRecord{CallID: "c3", Content: "ok", Meta: json.RawMessage{}}},
	}
	want := []Event{
		{Type: TypeToolCall, BatchID: "b", Call: &CallRecord{CallID: "c1", Name: "n", Arguments: `{"a":1}`}},
		{Type: TypeToolCall, Call: &CallRecord{CallID: "c2", Name: "n", Arguments: `{}`}},
		{Type: TypeToolResult, SourceSeqs: []uint64{1}, Result: &ResultRecord{CallID: "c1", Content: "ok", Meta: json.RawMessage(`{"m":2}`)}},
		{Type: TypeToolResult, Result: &ResultRecord{CallID: "c2", IsError: true, Error: &tool.Error{Code: tool.CodeToolError, Message: "x"}, Meta: json.RawMessage(`{"n":3}`)}},
		{Type: TypeUserMessage, SourceSeqs: []uint64{3}, Message: &MessageRecord{Content: "ctx"}},
		{Type: TypeToolResult, Result: &ResultRecord{CallID: "c3", Content: "ok", Meta: json.RawMessage{}}},
	}
	got := cloneAll(in)
	// Scribble over everything the caller owns: the copies must not change.
	in[0].Call.CallID = "changed"
	in[2].SourceSeqs[0] = 99
	in[2].Result.Meta[1] = 'X'
	in[3].Result.Error.Message = "changed"
	in[4].Message.Content = "changed"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("cloneAll() (-want +got):\n%s", diff)
	}
	if got[5].Result.Meta == nil {
		t.Error("cloneAll() made empty meta nil, want empty")
	}
	// Carved slices end at their own length: growing one leaves its neighbour alone.
	_ = append(got[2].Result.Meta, '!')
	if string(got[3].Result.Meta) != `{"n":3}` {
		t.Errorf("appending to one copy's meta changed another's to %s", got[3].Result.Meta)
	}
	_ = append(got[2].SourceSeqs, 7)
	if got[4].SourceSeqs[0] != 3 {
		t.Errorf("appending to one copy's seqs changed another's to %v", got[4].SourceSeqs)
	}
}
