package broker

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/tool"
)

// decodeResult turns a provider's result into the call's outcome. Payloads arrive as
// bytes so that a bad one fails only this call: oversized → RESULT_TOO_LARGE, text that
// is not UTF-8 → INVALID_RESULT. An error is TOOL_ERROR, or INVALID_ARGUMENTS when the
// provider says it could not read the arguments. A provider that kept an oversized result back says so
// with oversized_bytes. The value and meta JSON pass through unjudged (the
// pipeline validates them) except when content must be derived from the value. A
// result refused here still carries the tool's concludes_turn: the request to end the
// turn survives its result being replaced by an error, as it does in the pipeline.
func decodeResult(r *toolsdv1.ExecuteResult, maxBytes int) tool.Result {
	res := decodePayload(r, maxBytes)
	res.ConcludesTurn = r.GetConcludesTurn()
	return res
}

// decodePayload is decodeResult without concludes_turn.
func decodePayload(r *toolsdv1.ExecuteResult, maxBytes int) tool.Result {
	content, value, errMsg, meta := r.GetContent(), r.GetValueJson(), r.GetErrorMessage(), r.GetMetaJson()
	n := uint64(len(content) + len(value) + len(errMsg) + len(meta))
	dropped := r.GetOversizedBytes() // the provider kept the result back for its size
	if dropped > 0 {
		return tool.Failure(tool.CodeResultTooLarge,
			fmt.Sprintf("the provider kept back the tool's result of %d bytes as too large (the limit is %d bytes)", dropped, maxBytes))
	}
	if n > uint64(maxBytes) {
		return tool.Failure(tool.CodeResultTooLarge,
			fmt.Sprintf("the tool's result is %d bytes, over the limit of %d bytes", n, maxBytes))
	}
	if r.GetIsError() {
		return decodeError(r, errMsg, meta)
	}
	if !utf8.Valid(content) {
		return tool.Failure(tool.CodeInvalidResult, "the tool's content is not valid UTF-8")
	}
	res := tool.Result{
		Content: string(content),
		Value:   nilIfEmpty(value),
		Meta:    nilIfEmpty(meta),
	}
	if len(content) == 0 && len(value) > 0 {
		text, ok := tool.ContentFromValue(value)
		if !ok {
			return tool.Failure(tool.CodeInvalidResult, "the tool's value is not valid UTF-8 JSON")
		}
		res.Content = text
	}
	return res
}

// decodeError is the outcome of a result with is_error: TOOL_ERROR, or
// INVALID_ARGUMENTS when the provider could not read the call's arguments (as a schema
// violation is, the model's mistake, which no retry repeats).
func decodeError(r *toolsdv1.ExecuteResult, errMsg, meta []byte) tool.Result {
	if !utf8.Valid(errMsg) {
		return tool.Failure(tool.CodeInvalidResult, "the tool's error message is not valid UTF-8")
	}
	code, msg := tool.CodeToolError, string(errMsg)
	if r.GetInvalidArguments() {
		code = tool.CodeInvalidArguments
	}
	if msg == "" {
		msg = "the tool failed without a message"
		if code == tool.CodeInvalidArguments {
			msg = "the tool could not read its arguments"
		}
	}
	res := tool.Failure(code, msg)
	res.Meta = nilIfEmpty(meta)
	return res
}

func nilIfEmpty(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	return b
}

// validUTF8 returns s with invalid sequences replaced by U+FFFD. Every string the
// broker puts into a proto string field passes through it: a marshal failure in Send
// would end the whole stream.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// finite maps NaN and infinities to 0 so progress can always be encoded as JSON.
func finite(f float64) float64 {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0
	}
	return f
}

// truncate cuts b to at most n bytes, at a UTF-8 character boundary when b is UTF-8.
func truncate(b []byte, n int) []byte {
	if len(b) <= n {
		return b
	}
	for i := n; i > n-utf8.UTFMax && i > 0; i-- {
		if utf8.RuneStart(b[i]) {
			return b[:i]
		}
	}
	return b[:n]
}
