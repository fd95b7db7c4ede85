package hook

import (
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/timestamppb"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/tool"
)

// hookCall describes e and its batch for a hook. Every string is made valid UTF-8: a
// proto string that is not would fail the send and, with it, the hook's stream.
func hookCall(e *tool.Exec) *toolsdv1.HookCall {
	siblings := make([]string, len(e.Siblings))
	for i, s := range e.Siblings {
		siblings[i] = validUTF8(s)
	}
	return &toolsdv1.HookCall{
		SessionId:     validUTF8(e.SessionID),
		Scope:         validUTF8(e.Scope),
		BatchId:       validUTF8(e.BatchID),
		Turn:          e.Turn,
		Step:          e.Step,
		Index:         uint32(max(e.Index, 0)), //nolint:gosec // clamped; batches are far smaller than 2^32
		CallId:        validUTF8(e.CallID),
		Tool:          validUTF8(e.Name),
		ArgumentsJson: validUTF8(e.Arguments),
		SiblingTools:  siblings,
	}
}

// hookResult describes a result for a hook.
func hookResult(r *tool.Result) *toolsdv1.HookResult {
	out := &toolsdv1.HookResult{
		Content:   validUTF8(r.Content),
		IsError:   r.IsError,
		ValueJson: validUTF8(string(r.Value)),
	}
	if r.Err != nil {
		out.Error = &toolsdv1.ToolError{
			Code:    string(r.Err.Code),
			Message: validUTF8(r.Err.Message),
			Reason:  validUTF8(r.Err.Reason),
			Tool:    validUTF8(r.Err.Tool),
		}
	}
	return out
}

// requestMsg builds one request for one hook, without its request id: the stream's
// writer sets it when it sends the message. deadline is nil for notifications.
func requestMsg(stage Stage, call *toolsdv1.HookCall, result *toolsdv1.HookResult, deadline *timestamppb.Timestamp) *response {
	return &response{Msg: &toolsdv1.HookServiceConnectResponse_Request{Request: &toolsdv1.HookRequest{
		Stage:    stage.proto(),
		Call:     call,
		Result:   result,
		Deadline: deadline,
	}}}
}

func deadlineOf(t time.Time) *timestamppb.Timestamp { return timestamppb.New(t) }

func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
