package app_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/app"
	"github.com/toolsd/toolsd/internal/session"
)

// internalPrefixes are toolsd's Go packages whose names a message must not carry past
// its first word: a message names its field, tool or value in the caller's terms.
var internalPrefixes = []string{"jsonx: ", "broker: ", "registry: ", "hook: ", "server: ", "scheduler: ", "session: ", "pipeline: ", "proto: "}

// checkWording fails unless msg is want, and reports an internal package named past the
// message's start (a repeated prefix, or another package's) either way.
func checkWording(t *testing.T, what, msg, want string) {
	t.Helper()
	if msg != want {
		t.Errorf("%s message = %q, want %q", what, msg, want)
	}
	for _, p := range internalPrefixes {
		if len(msg) > 0 && strings.Contains(msg[1:], p) {
			t.Errorf("%s message = %q names %q past its start", what, msg, p)
		}
	}
}

// TestSchemaNotJSONSaysMalformedJSON: a parameters or output schema that is not JSON is
// refused, on RegisterTool and on a provider's stream, with the words a call's malformed
// arguments get ("malformed JSON: ... at offset N"); the message carried the JSON
// parser's package name ("parameters: jsonx: invalid character ...").
func TestSchemaNotJSONSaysMalformedJSON(t *testing.T) {
	e := start(t, "")
	p, _ := runProvider(t, e.app.Addr(), constTool("fine", "ok"))
	for name, tc := range map[string]struct {
		def  *toolsdv1.ToolDefinition
		want string
	}{
		"parameters": {
			def:  &toolsdv1.ToolDefinition{Name: "t1", ParametersJson: `no`},
			want: `registry: invalid schema: tool "t1" parameters: malformed JSON: invalid character 'o' in literal null at offset 1`,
		},
		"duplicate key": {
			def:  &toolsdv1.ToolDefinition{Name: "t1", ParametersJson: `{"type":"object","type":"object"}`},
			want: `registry: invalid schema: tool "t1" parameters: malformed JSON: duplicate key "type" at offset 17`,
		},
		"output schema": {
			def:  &toolsdv1.ToolDefinition{Name: "t1", ParametersJson: `{"type":"object"}`, OutputSchemaJson: `{`},
			want: `registry: invalid schema: tool "t1" output schema: malformed JSON: unexpected end of input looking for beginning of object key string at offset 1`,
		},
		"too deep": {
			def: &toolsdv1.ToolDefinition{Name: "t1", ParametersJson: strings.Repeat("[", 130)},
			want: `registry: limit exceeded: tool "t1" parameters nests deeper than 129 levels (twice the depth of the documents it validates plus one, at least 64): ` +
				`nesting deeper than 129 at offset 129`,
		},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := e.tools.RegisterTool(t.Context(), &toolsdv1.RegisterToolRequest{ProviderId: p.ProviderID(), Tool: tc.def})
			if c := status.Code(err); c != codes.InvalidArgument && c != codes.ResourceExhausted {
				t.Errorf("RegisterTool() = %v, want InvalidArgument or ResourceExhausted", err)
			}
			checkWording(t, "RegisterTool()", status.Convert(err).Message(), tc.want)

			hp := helloHand(t, e.conn, "raw")
			hp.send(t, &toolsdv1.ProviderServiceConnectRequest{Msg: &toolsdv1.ProviderServiceConnectRequest_Register{
				Register: &toolsdv1.RegisterTools{Ref: 1, Tools: []*toolsdv1.ToolDefinition{tc.def}},
			}})
			sts := hp.recv(t).GetRegisterResult().GetTools()
			if len(sts) != 1 {
				t.Fatalf("register result = %v, want one status", sts)
			}
			checkWording(t, "register result", sts[0].GetErrorMessage(), tc.want)
		})
	}
}

// TestRestrictionOfAnInvalidNameNamesTheRegistryOnce: a Restrict whose allow or deny
// list holds a name no tool may have is refused (INVALID_TOOL_NAME, as before) with
// the restriction's refusal naming the list and the name once; the name's own refusal
// was wrapped whole, so the message read "registry:" twice ("deny list: registry:
// invalid tool name ...").
func TestRestrictionOfAnInvalidNameNamesTheRegistryOnce(t *testing.T) {
	e := start(t, "")
	for name, tc := range map[string]struct {
		req  *toolsdv1.RestrictRequest
		want string
	}{
		"deny": {
			req:  &toolsdv1.RestrictRequest{Scope: "a", Deny: []string{"x y"}},
			want: `registry: invalid restriction: scope "a": deny list: invalid tool name "x y": invalid character ' ' (allowed: A-Z a-z 0-9 _ - . /)`,
		},
		"allow": {
			req:  &toolsdv1.RestrictRequest{Scope: "a", Allow: []string{"ok", "a[*"}},
			want: `registry: invalid restriction: scope "a": allow list: invalid tool name "a[*": invalid character '[' (allowed: A-Z a-z 0-9 _ - . /)`,
		},
		"empty": {
			req:  &toolsdv1.RestrictRequest{Scope: "a", Deny: []string{""}},
			want: `registry: invalid restriction: scope "a": deny list: invalid tool name: empty name`,
		},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := e.tools.Restrict(t.Context(), tc.req)
			if status.Code(err) != codes.InvalidArgument || reason(err) != "INVALID_TOOL_NAME" {
				t.Errorf("Restrict() = %v, want InvalidArgument, reason INVALID_TOOL_NAME", err)
			}
			checkWording(t, "Restrict()", status.Convert(err).Message(), tc.want)
		})
	}
}

// TestDefinitionRefusalsSayWhatToChange: a definition refused for its mode, timeout or
// max_content_bytes says so in the ToolDefinition's terms, on RegisterTool (after the
// field, tool.mode: ...) and in a provider's register result: the values allowed, and
// what is wrong with a timeout that is no duration. The message named toolsd's broker
// package after the field ("tool.mode: broker: tool ..."), and an invalid timeout
// repeated protobuf's own error, the message in its text format ("proto: duration
// (seconds:1 nanos:-1) has ...").
func TestDefinitionRefusalsSayWhatToChange(t *testing.T) {
	e := start(t, "")
	p, _ := runProvider(t, e.app.Addr(), constTool("fine", "ok"))
	for name, tc := range map[string]struct {
		def   *toolsdv1.ToolDefinition
		field string
		want  string
	}{
		"mode": {
			def:   &toolsdv1.ToolDefinition{Mode: 7},
			field: "tool.mode",
			want:  `tool "a": mode 7 is not an ExecutionMode (EXECUTION_MODE_UNSPECIFIED, EXECUTION_MODE_PARALLEL or EXECUTION_MODE_EXCLUSIVE)`,
		},
		"negative timeout": {
			def:   &toolsdv1.ToolDefinition{Timeout: durationpb.New(-1)},
			field: "tool.timeout",
			want:  `tool "a": timeout -1ns is negative`,
		},
		"timeout signs": {
			def:   &toolsdv1.ToolDefinition{Timeout: &durationpb.Duration{Seconds: 1, Nanos: -1}},
			field: "tool.timeout",
			want:  `tool "a": timeout is not a valid duration: seconds 1 and nanos -1 have different signs`,
		},
		"timeout nanos": {
			def:   &toolsdv1.ToolDefinition{Timeout: &durationpb.Duration{Nanos: 2e9}},
			field: "tool.timeout",
			want:  `tool "a": timeout is not a valid duration: nanos 2000000000 is not within ±999999999`,
		},
		"timeout seconds": {
			def:   &toolsdv1.ToolDefinition{Timeout: &durationpb.Duration{Seconds: 1 << 40}},
			field: "tool.timeout",
			want:  `tool "a": timeout is not a valid duration: seconds 1099511627776 is not within ±315576000000 (10000 years)`,
		},
		"max_content_bytes": {
			def:   &toolsdv1.ToolDefinition{MaxContentBytes: -1},
			field: "tool.max_content_bytes",
			want:  `tool "a": max_content_bytes -1 is negative`,
		},
	} {
		t.Run(name, func(t *testing.T) {
			tc.def.Name, tc.def.ParametersJson = "a", `{"type":"object"}`
			_, err := e.tools.RegisterTool(t.Context(), &toolsdv1.RegisterToolRequest{ProviderId: p.ProviderID(), Tool: tc.def})
			if status.Code(err) != codes.InvalidArgument || reason(err) != "BAD_REQUEST" {
				t.Errorf("RegisterTool() = %v, want InvalidArgument, reason BAD_REQUEST", err)
			}
			checkWording(t, "RegisterTool()", status.Convert(err).Message(), tc.field+": "+tc.want)

			hp := helloHand(t, e.conn, "raw")
			hp.send(t, &toolsdv1.ProviderServiceConnectRequest{Msg: &toolsdv1.ProviderServiceConnectRequest_Register{
				Register: &toolsdv1.RegisterTools{Ref: 1, Tools: []*toolsdv1.ToolDefinition{tc.def}},
			}})
			sts := hp.recv(t).GetRegisterResult().GetTools()
			if len(sts) != 1 || sts[0].GetErrorCode() != "INVALID_ARGUMENT" {
				t.Fatalf("register result = %v, want one INVALID_ARGUMENT status", sts)
			}
			checkWording(t, "register result", sts[0].GetErrorMessage(), tc.want)
		})
	}
}

// TestHookFailureReasonsNameTheHookOnce: a call a policy hook could not decide is
// denied (POLICY_UNAVAILABLE) with a reason naming the hook once, by its name: the
// reason read `hook "policy": required hook not connected`, the hook's error
// carrying toolsd's package name after the hook's own.
func TestHookFailureReasonsNameTheHookOnce(t *testing.T) {
	e := start(t, "hooks:\n  required:\n    - {name: policy, stage: pre_execute, tool: echo}\n")
	runProvider(t, e.app.Addr(), echoTool())
	reasonOf := func(session string) string {
		t.Helper()
		out := e.mustExecute(t, &toolsdv1.Batch{SessionId: session, Calls: []*toolsdv1.ToolCall{call("c1", "echo", `{"text":"hi"}`)}}, batchOptions{})
		if got := resultCodes(out.results); len(got) != 1 || got[0] != "POLICY_UNAVAILABLE" {
			t.Fatalf("codes = %v, want [POLICY_UNAVAILABLE]", got)
		}
		return out.results[0].GetError().GetReason()
	}
	checkWording(t, "reason without the hook", reasonOf("s-absent"), `hook "policy": required hook not connected`)
	connectPolicyHook(t, e.app.Addr(), false, toolsdv1.HookVerdict_HOOK_VERDICT_BLOCK)
	checkWording(t, "reason of a verdict out of place", reasonOf("s-protocol"),
		`hook "policy": protocol error: verdict HOOK_VERDICT_BLOCK is not valid before execution`)
}

// TestResultNotJSONSaysWhereInTheUsersTerms: a provider's result whose value or
// metadata is not strict JSON becomes INVALID_RESULT saying what is wrong and where,
// without the name of toolsd's JSON parser: the message, which the model reads,
// was "result value is not valid JSON: jsonx: duplicate key ...".
func TestResultNotJSONSaysWhereInTheUsersTerms(t *testing.T) {
	e := start(t, "")
	p := connectHand(t, e, "raw")
	p.serve(func(ex *toolsdv1.ExecuteRequest) []*toolsdv1.ProviderServiceConnectRequest {
		r := &toolsdv1.ExecuteResult{RequestId: ex.GetRequestId()}
		switch ex.GetCallId() {
		case "value":
			r.ValueJson = []byte(`{"a":1,"a":2}`)
		case "meta":
			r.Content, r.MetaJson = []byte("fine"), []byte(`{"n":nope}`)
		}
		return []*toolsdv1.ProviderServiceConnectRequest{result(r)}
	})
	out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-raw", Calls: []*toolsdv1.ToolCall{
		call("value", "raw", `{}`), call("meta", "raw", `{}`),
	}}, batchOptions{})
	want := []string{
		`result value is not valid JSON: duplicate key "a" at offset 7`,
		`result metadata is not valid JSON: invalid character 'o' in literal null at offset 6`,
	}
	for i, r := range out.results {
		if r.GetError().GetCode() != "INVALID_RESULT" {
			t.Errorf("result %s = %v, want INVALID_RESULT", r.GetCallId(), r.GetError())
		}
		checkWording(t, "result "+r.GetCallId(), r.GetError().GetMessage(), want[i])
	}
}

// closingStore fails what closing says with session.ErrClosed, as a store does once
// it is closed: Hold (a batch's claim of its session) or Append (its plan).
type closingStore struct {
	session.Store
	closing string
}

func (s closingStore) Hold(ctx context.Context, sessionID string) (func(), error) {
	if s.closing == "hold" {
		return nil, session.ErrClosed
	}
	return s.Store.Hold(ctx, sessionID)
}

func (s closingStore) Append(ctx context.Context, sessionID string, events ...session.Event) ([]session.Event, error) {
	if s.closing == "append" {
		return nil, session.ErrClosed
	}
	return s.Store.Append(ctx, sessionID, events...)
}

// TestBatchStoreFailureNamesTheStoreOnce: a session store that fails a batch, as it is
// claimed or as its plan is appended, gives the client the store's error, named once;
// it read "server: session log: scheduler: append calls: session: store closed".
func TestBatchStoreFailureNamesTheStoreOnce(t *testing.T) {
	for _, closing := range []string{"hold", "append"} {
		t.Run(closing, func(t *testing.T) {
			e := start(t, "", app.WithSessionStoreWrapper(func(s session.Store) session.Store { return closingStore{s, closing} }))
			runProvider(t, e.app.Addr(), echoTool())
			_, err := e.execute(t, &toolsdv1.Batch{SessionId: "s-closed", Calls: []*toolsdv1.ToolCall{call("c1", "echo", `{"text":"hi"}`)}}, batchOptions{})
			if status.Code(err) != codes.Unavailable || reason(err) != "SESSION_STORE_CLOSED" {
				t.Fatalf("ExecuteBatch() with a closed store = %v, want Unavailable with reason SESSION_STORE_CLOSED", err)
			}
			checkWording(t, "ExecuteBatch() with a closed store", status.Convert(err).Message(), "session: store closed")
		})
	}
}

// TestResolveToolSetStoreFailureNamesTheStoreOnce: a session store that fails as
// ResolveToolSet holds the step's session gives the client the store's error, named
// once, as ExecuteBatch does; it read "server: session log: session: store closed".
func TestResolveToolSetStoreFailureNamesTheStoreOnce(t *testing.T) {
	e := start(t, "", app.WithSessionStoreWrapper(func(s session.Store) session.Store { return closingStore{s, "hold"} }))
	_, err := e.tools.ResolveToolSet(t.Context(), &toolsdv1.ResolveToolSetRequest{SessionId: "s-closed", Turn: 1, Step: 1})
	if status.Code(err) != codes.Unavailable || reason(err) != "SESSION_STORE_CLOSED" {
		t.Fatalf("ResolveToolSet() with a closed store = %v, want Unavailable with reason SESSION_STORE_CLOSED", err)
	}
	checkWording(t, "ResolveToolSet() with a closed store", status.Convert(err).Message(), "session: store closed")
}

// TestArgumentViolationsReachTheModelInItsTerms: over ExecuteBatch, arguments that break
// a numeric bound, a false subschema, a "not" or an object "enum" fail their call with
// INVALID_ARGUMENTS whose content says what was wrong with exact numbers, not the
// schema library's words ("exclusiveMinimum: got 0, want 0", "false schema", "'not'
// failed", "'enum' failed").
func TestArgumentViolationsReachTheModelInItsTerms(t *testing.T) {
	e := start(t, "")
	p := helloHand(t, e.conn, "raw")
	schema := `{"type":"object","properties":{` +
		`"pos":{"exclusiveMinimum":0},"big":{"maximum":9007199254740993},"gone":false,` +
		`"word":{"not":{"const":"no"}},"pick":{"enum":[{"a":1},"b"]}}}`
	p.send(t, &toolsdv1.ProviderServiceConnectRequest{Msg: &toolsdv1.ProviderServiceConnectRequest_Register{Register: &toolsdv1.RegisterTools{
		Ref: 1, Tools: []*toolsdv1.ToolDefinition{{Name: "bounded", ParametersJson: schema}},
	}}})
	if st := p.recv(t).GetRegisterResult().GetTools(); len(st) != 1 || st[0].GetErrorCode() != "" {
		t.Fatalf("registering bounded: %v", st)
	}
	prefix := `Error: invalid arguments for tool "bounded": `
	cases := []struct{ args, want string }{
		{`{"pos":0}`, prefix + "/pos: exclusiveMinimum: got 0, want more than 0"},
		{`{"big":9007199254740994}`, prefix + "/big: maximum: got 9007199254740994, want 9007199254740993"},
		{`{"gone":1}`, prefix + "/gone: no value is allowed here"},
		{`{"word":"no"}`, prefix + `/word: must not match the schema under "not"`},
		{`{"pick":"c"}`, prefix + `/pick: value must be one of {"a":1}, "b"`},
	}
	calls := make([]*toolsdv1.ToolCall, len(cases))
	for i, tc := range cases {
		calls[i] = call(fmt.Sprint("c", i), "bounded", tc.args)
	}
	out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-words", Calls: calls}, batchOptions{})
	for i, tc := range cases {
		r := out.results[i]
		if r.GetError().GetCode() != "INVALID_ARGUMENTS" {
			t.Errorf("call %s: code %q, want INVALID_ARGUMENTS", tc.args, r.GetError().GetCode())
		}
		checkWording(t, tc.args, r.GetContent(), tc.want)
	}
}
