package server

import (
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/session"
	"github.com/toolsd/toolsd/internal/tool"
)

func schemasToProto(in []tool.Schema) []*toolsdv1.ToolSchema {
	out := make([]*toolsdv1.ToolSchema, len(in))
	for i := range in {
		s := &in[i]
		out[i] = &toolsdv1.ToolSchema{
			Name:           s.Name,
			Description:    s.Description,
			ParametersJson: string(s.Parameters),
			DeferLoading:   s.DeferLoading,
			ContentHash:    s.ContentHash,
		}
	}
	return out
}

func errorToProto(e *tool.Error) *toolsdv1.ToolError {
	if e == nil {
		return nil
	}
	return &toolsdv1.ToolError{Code: string(e.Code), Message: e.Message, Reason: e.Reason, Tool: e.Tool}
}

// resultMsg is one committed result as a stream message, its parts allocated together.
func resultMsg(index int, callID string, callSeq, seq uint64, r *tool.Result) *toolsdv1.ExecuteBatchResponse {
	m := &struct {
		resp   toolsdv1.ExecuteBatchResponse
		msg    toolsdv1.ExecuteBatchResponse_Result
		result toolsdv1.ToolResult
	}{}
	m.result = toolsdv1.ToolResult{
		CallId:        callID,
		Index:         uint32(index),
		Content:       r.Content,
		IsError:       r.IsError,
		Error:         errorToProto(r.Err),
		ValueJson:     string(r.Value),
		MetaJson:      string(r.Meta),
		Seq:           seq,
		CallSeq:       callSeq,
		ConcludesTurn: r.ConcludesTurn,
	}
	m.msg.Result = &m.result
	m.resp.Msg = &m.msg
	return &m.resp
}

// EventToProto converts one session log event.
func EventToProto(ev *session.Event) *toolsdv1.SessionEvent {
	out := &toolsdv1.SessionEvent{
		SessionId:       ev.SessionID,
		Seq:             ev.Seq,
		Type:            string(ev.Type),
		BatchId:         ev.BatchID,
		Turn:            ev.Turn,
		Step:            ev.Step,
		SourceEventSeqs: ev.SourceSeqs,
	}
	if !ev.Time.IsZero() {
		out.Time = timestamppb.New(ev.Time)
	}
	switch {
	case ev.Call != nil:
		out.Payload = &toolsdv1.SessionEvent_ToolCall{ToolCall: &toolsdv1.ToolCallRecord{
			CallId: ev.Call.CallID, Name: ev.Call.Name, ArgumentsJson: ev.Call.Arguments,
		}}
	case ev.Result != nil:
		r := ev.Result
		out.Payload = &toolsdv1.SessionEvent_ToolResult{ToolResult: &toolsdv1.ToolResultRecord{
			Message:       &toolsdv1.ToolResultMessage{CallId: r.CallID, Content: r.Content, IsError: r.IsError},
			Error:         errorToProto(r.Error),
			MetaJson:      string(r.Meta),
			ConcludesTurn: r.ConcludesTurn,
			Recovered:     r.Recovered,
		}}
	case ev.Message != nil:
		out.Payload = &toolsdv1.SessionEvent_UserMessage{UserMessage: &toolsdv1.UserMessageRecord{Content: ev.Message.Content}}
	}
	return out
}

var _ = time.Second
