package tool

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	"github.com/toolsd/toolsd/internal/textcut"
)

// Code is a stable, machine-readable outcome code carried by error results. Clients
// match on codes, never on message text.
type Code string

// The error codes of tool results. They are part of the public API.
const (
	CodeUnknownTool           Code = "UNKNOWN_TOOL"
	CodeInvalidArguments      Code = "INVALID_ARGUMENTS"
	CodeDenied                Code = "DENIED"
	CodeGuardDenied           Code = "GUARD_DENIED"
	CodeApprovalDenied        Code = "APPROVAL_DENIED"
	CodeApprovalTimeout       Code = "APPROVAL_TIMEOUT"
	CodeApprovalUnavailable   Code = "APPROVAL_UNAVAILABLE"
	CodePolicyUnavailable     Code = "POLICY_UNAVAILABLE"
	CodeBlocked               Code = "BLOCKED"
	CodeToolError             Code = "TOOL_ERROR"
	CodeToolTimeout           Code = "TOOL_TIMEOUT"
	CodeProviderGone          Code = "PROVIDER_GONE"
	CodeProviderUnavailable   Code = "PROVIDER_UNAVAILABLE"
	CodeProviderOverloaded    Code = "PROVIDER_OVERLOADED"
	CodeInvalidResult         Code = "INVALID_RESULT"
	CodeResultTooLarge        Code = "RESULT_TOO_LARGE"
	CodeAborted               Code = "ABORTED"
	CodeAbortedBeforeDispatch Code = "ABORTED_BEFORE_DISPATCH"
	CodeToolActivationFailed  Code = "TOOL_ACTIVATION_FAILED"
	CodeInternal              Code = "INTERNAL"
)

// Error is the structured failure of one call. Message is model-facing (it becomes
// "Error: <message>"); Reason is user-facing detail that never reaches model content.
type Error struct {
	Code    Code
	Message string
	Reason  string
	// Tool is the name of the tool the call asked for.
	Tool string
}

// Error implements error so policies can return an *Error through ordinary error paths.
func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

// Result is one call's outcome. Content is what the model sees; Value is the tool's
// canonical JSON value (nil for errors and text-only tools).
type Result struct {
	Content string
	IsError bool
	Value   json.RawMessage
	Err     *Error
	Meta    json.RawMessage
	// ConcludesTurn asks the loop to end the turn at this step.
	ConcludesTurn bool
	// AdditionalContexts are delivered, in FIFO order, when the batch settles.
	AdditionalContexts []string
}

// MaxResultBytes bounds every configured result size limit (limits.max_result_bytes and
// a tool's own): half the session log's 16 MiB limit for one event, so that a success
// the pipeline accepted fits its event. An error result records its message twice (in
// its content and in its error), so a message near the limit can still take the event
// past it: the pipeline checks the final result against the log's limit before anyone
// observes it (pipeline.WithResultFits), and the scheduler when it commits.
const MaxResultBytes = 8 << 20

// ErrorContentPrefix starts the model-facing content of every error result.
const ErrorContentPrefix = "Error: "

// Failure builds the error result for code and a model-facing message.
func Failure(code Code, message string) Result {
	return Result{
		Content: ErrorContentPrefix + message,
		IsError: true,
		Err:     &Error{Code: code, Message: message},
	}
}

// maxNamedBytes bounds a tool name quoted in a result (see [NamedInResult]).
const maxNamedBytes = 128

// NamedInResult is name as a failure quotes it (in Error.Tool and its message): cut at
// 128 bytes. A call may name a tool that does not exist with any text the request size
// allows, and each copy would reach the client and the session log; a registered name
// is never that long.
func NamedInResult(name string) string { return textcut.Ellipsis(name, maxNamedBytes) }

// FailureWithReason is like [Failure] with a private, user-facing reason kept out of the content.
func FailureWithReason(code Code, message, reason string) Result {
	r := Failure(code, message)
	r.Err.Reason = reason
	return r
}

// Code returns the result's error code, or "" for a success.
func (r Result) Code() Code {
	if r.Err == nil {
		return ""
	}
	return r.Err.Code
}

// ContentFromValue derives the model-facing text of a result that has only a JSON
// value: a JSON string becomes its text, anything else its compact JSON. It reports
// false for a value that is not valid UTF-8 JSON.
func ContentFromValue(v []byte) (string, bool) {
	if !utf8.Valid(v) {
		return "", false // encoding/json would silently replace invalid UTF-8 in strings
	}
	v = bytes.TrimSpace(v)
	if len(v) > 0 && v[0] == '"' {
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return "", false
		}
		return s, true
	}
	var buf bytes.Buffer
	buf.Grow(len(v))
	if err := json.Compact(&buf, v); err != nil {
		return "", false
	}
	return buf.String(), true
}

// DerivedFrom reports whether content is what [ContentFromValue] derives from value: a
// result whose tool returned only a value, or the same text as its value.
func DerivedFrom(content string, value []byte) bool {
	if len(value) == 0 {
		return false
	}
	text, ok := ContentFromValue(value)
	return ok && text == content
}
