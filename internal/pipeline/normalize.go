package pipeline

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/toolsd/toolsd/internal/jsonx"
	"github.com/toolsd/toolsd/internal/textcut"
	"github.com/toolsd/toolsd/internal/tool"
)

// normalize makes a dispatched result safe to log and show. A success whose content is
// not valid UTF-8, whose value or metadata is not strict JSON, or whose value fails the
// output schema becomes INVALID_RESULT; an error result keeps its code and has invalid
// UTF-8 replaced instead. Either kind over the result size limit (content plus value)
// becomes RESULT_TOO_LARGE. Error content always starts with "Error: ".
func (s *snapshot) normalize(e *tool.Exec, st *callState, r tool.Result) tool.Result {
	limit := st.settings.MaxResultBytes
	if limit <= 0 {
		limit = s.cfg.MaxResultBytes
	}
	for i, c := range r.AdditionalContexts {
		if !utf8.ValidString(c) {
			r.AdditionalContexts = append([]string(nil), r.AdditionalContexts...)
			r.AdditionalContexts[i] = strings.ToValidUTF8(c, "\uFFFD")
		}
	}
	if r.IsError {
		r = sanitizeError(r)
	} else if f, ok := checkSuccess(e, st.tool, r); !ok {
		return keepContexts(r, f)
	}
	if n := len(r.Content) + len(r.Value); n > limit {
		f := failure(e, tool.CodeResultTooLarge,
			fmt.Sprintf("result is %d bytes, over the %d-byte limit", n, limit), tooLargeReason(r))
		return keepContexts(r, f)
	}
	return r
}

func checkSuccess(e *tool.Exec, t Tool, r tool.Result) (tool.Result, bool) {
	invalid := func(msg string) (tool.Result, bool) {
		return failure(e, tool.CodeInvalidResult, msg, ""), false
	}
	if !utf8.ValidString(r.Content) {
		return invalid("result content is not valid UTF-8")
	}
	if len(r.Value) > 0 {
		if err := strictJSON(r.Value); err != nil {
			return invalid("result value is not valid JSON: " + jsonx.Describe(err))
		}
		if err := t.ValidateOutput(r.Value); err != nil {
			return invalid("result value does not match the output schema: " + err.Error())
		}
	}
	if len(r.Meta) > 0 {
		if err := strictJSON(r.Meta); err != nil {
			return invalid("result metadata is not valid JSON: " + jsonx.Describe(err))
		}
	}
	return r, true
}

func sanitizeError(r tool.Result) tool.Result {
	er := *r.Err
	er.Message = strings.ToValidUTF8(er.Message, "\uFFFD")
	er.Reason = strings.ToValidUTF8(er.Reason, "\uFFFD")
	r.Err = &er
	r.Content = strings.ToValidUTF8(r.Content, "\uFFFD")
	if !strings.HasPrefix(r.Content, tool.ErrorContentPrefix) {
		r.Content = tool.ErrorContentPrefix + r.Content
	}
	r.Value = nil
	if len(r.Meta) > 0 && strictJSON(r.Meta) != nil {
		r.Meta = nil
	}
	return r
}

// strictJSON accepts exactly one lossless JSON text: valid UTF-8, no duplicate keys,
// nesting within jsonx's default depth. Size is limited separately (RESULT_TOO_LARGE).
func strictJSON(b []byte) error {
	return jsonx.Valid(b, jsonx.Limits{MaxBytes: len(b) + 1})
}

// finalizeContent is the definition-owned, content-only last step: content over
// MaxContentBytes is cut at a UTF-8 boundary and ends with an explicit marker, the
// whole staying within the limit whenever the limit can hold the marker. An error
// result keeps its "Error: <message>" shape: its message is cut, never the prefix.
func finalizeContent(def *tool.Definition, r tool.Result) tool.Result {
	if def == nil || def.MaxContentBytes <= 0 || len(r.Content) <= def.MaxContentBytes {
		return r
	}
	if !r.IsError || r.Err == nil {
		r.Content = truncate(r.Content, def.MaxContentBytes)
		return r
	}
	er := *r.Err
	er.Message = truncate(er.Message, def.MaxContentBytes-len(tool.ErrorContentPrefix))
	r.Err, r.Content = &er, tool.ErrorContentPrefix+er.Message
	return r
}

func truncate(s string, limit int) string {
	marker := fmt.Sprintf("\n[truncated: %d bytes total]", len(s))
	return textcut.Prefix(s, max(limit-len(marker), 0)) + marker
}

// tooLargeReason keeps the code of an error result that was replaced for its size.
func tooLargeReason(r tool.Result) string {
	if r.Err == nil {
		return ""
	}
	return "replaced a " + string(r.Err.Code) + " result"
}
