// Package examplehook is a small remote policy hook for toolsd: it denies calls whose
// arguments contain "rm -rf" (with a private reason), shouts echo results that start
// with "shout:" and tells the model when echo was called. It is importable so that tests
// can run it in-process; the example binary in the parent directory only dials.
package examplehook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
)

// Name is the hook's name, as toolsd reports it to users.
const Name = "example-hook"

// Messages of the hook's decisions.
const (
	DenyReason  = `arguments contain "rm -rf"`
	EchoContext = "echo was called"
	ShoutPrefix = "shout:"
)

// Hello is the hook's first message: pre-execute for every tool, post-execute for echo.
// The hook fails closed: if it cannot answer, toolsd denies.
func Hello() *toolsdv1.HookHello {
	return &toolsdv1.HookHello{
		Name: Name,
		Subscriptions: []*toolsdv1.HookSubscription{
			{Stage: toolsdv1.HookStage_HOOK_STAGE_PRE_EXECUTE, Priority: 10},
			{Stage: toolsdv1.HookStage_HOOK_STAGE_POST_EXECUTE, Tool: "echo", Priority: 10},
		},
	}
}

// Decide answers one request; it returns nil for notifications, which take no answer.
func Decide(req *toolsdv1.HookRequest) *toolsdv1.HookDecision {
	d := &toolsdv1.HookDecision{RequestId: req.GetRequestId()}
	switch req.GetStage() {
	case toolsdv1.HookStage_HOOK_STAGE_PRE_EXECUTE:
		if mentionsRmRf(req.GetCall().GetArgumentsJson()) {
			// Private: the user learns why, the model only that policy denied the call.
			d.Verdict, d.Reason, d.Private = toolsdv1.HookVerdict_HOOK_VERDICT_DENY, DenyReason, true
		}
	case toolsdv1.HookStage_HOOK_STAGE_POST_EXECUTE:
		if req.GetCall().GetTool() != "echo" {
			return d // accept
		}
		d.AddContext = []string{EchoContext}
		if r := req.GetResult(); !r.GetIsError() && strings.HasPrefix(r.GetContent(), ShoutPrefix) {
			d.Verdict = toolsdv1.HookVerdict_HOOK_VERDICT_REPLACE
			d.ReplaceContent = proto.String(strings.ToUpper(r.GetContent()))
		}
	default:
		return nil
	}
	return d
}

// mentionsRmRf reports whether a string of the arguments, a value or a key, contains
// "rm -rf". The strings are read decoded, as the tool reads them: in the JSON text an
// escape ("rm -r\u0066") would hide it. Arguments that are not JSON (toolsd validates
// them before this stage) are read as text.
func mentionsRmRf(args string) bool {
	var v any
	if err := json.Unmarshal([]byte(args), &v); err != nil {
		return strings.Contains(args, "rm -rf")
	}
	return anyString(v, func(s string) bool { return strings.Contains(s, "rm -rf") })
}

// anyString reports whether f holds for a string in the decoded JSON value v: a string
// value or an object's key, at any depth.
func anyString(v any, f func(string) bool) bool {
	switch v := v.(type) {
	case string:
		return f(v)
	case []any:
		for _, e := range v {
			if anyString(e, f) {
				return true
			}
		}
	case map[string]any:
		for k, e := range v {
			if f(k) || anyString(e, f) {
				return true
			}
		}
	}
	return false
}

// Run connects to toolsd's HookService over conn and answers its requests until ctx
// ends or toolsd says goodbye (both return nil), or the stream fails.
func Run(ctx context.Context, conn grpc.ClientConnInterface, log *zap.Logger) error {
	if log == nil {
		log = zap.NewNop()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the stream on every return
	// A request carries the call's arguments and, after execution, its result: together
	// they can pass gRPC's default 4 MiB receive limit within toolsd's own limits, and a
	// request over it would end the stream at Recv, failing every call pending on it.
	stream, err := toolsdv1.NewHookServiceClient(conn).Connect(ctx, grpc.MaxCallRecvMsgSize(math.MaxInt32))
	if err != nil {
		return fmt.Errorf("examplehook: connect: %w", err)
	}
	hello := &toolsdv1.HookServiceConnectRequest{Msg: &toolsdv1.HookServiceConnectRequest_Hello{Hello: Hello()}}
	if err := stream.Send(hello); err != nil {
		return ended(ctx, fmt.Errorf("examplehook: send hello: %w", err))
	}
	for {
		m, err := stream.Recv()
		if err != nil {
			return ended(ctx, fmt.Errorf("examplehook: receive: %w", err))
		}
		switch msg := m.GetMsg().(type) {
		case *toolsdv1.HookServiceConnectResponse_Welcome:
			log.Info("hook connected", zap.String("hook_id", msg.Welcome.GetHookId()))
		case *toolsdv1.HookServiceConnectResponse_Goodbye:
			log.Info("toolsd said goodbye", zap.String("reason", msg.Goodbye.GetReason()))
			return nil
		case *toolsdv1.HookServiceConnectResponse_Request:
			d := Decide(msg.Request)
			if d == nil {
				continue
			}
			log.Debug("decision", zap.String("tool", msg.Request.GetCall().GetTool()),
				zap.String("stage", msg.Request.GetStage().String()), zap.String("verdict", d.GetVerdict().String()))
			out := &toolsdv1.HookServiceConnectRequest{Msg: &toolsdv1.HookServiceConnectRequest_Decision{Decision: d}}
			if err := stream.Send(out); err != nil {
				return ended(ctx, fmt.Errorf("examplehook: send decision: %w", err))
			}
		}
	}
}

// ended is Run's result for a stream error: nil when ctx ended or the server closed
// the stream cleanly.
func ended(ctx context.Context, err error) error {
	if ctx.Err() != nil || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}
