package broker

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/tool"
)

func TestDecodeResult(t *testing.T) {
	for name, tc := range map[string]struct {
		in   *toolsdv1.ExecuteResult
		want tool.Result
	}{
		"content only": {
			in:   &toolsdv1.ExecuteResult{Content: []byte("hello")},
			want: tool.Result{Content: "hello"},
		},
		"content and value kept apart": {
			in:   &toolsdv1.ExecuteResult{Content: []byte("three"), ValueJson: []byte("3")},
			want: tool.Result{Content: "three", Value: json.RawMessage("3")},
		},
		"string value gives its text": {
			in:   &toolsdv1.ExecuteResult{ValueJson: []byte(` "a \"b\" \u00e9" `)},
			want: tool.Result{Content: `a "b" é`, Value: json.RawMessage(` "a \"b\" \u00e9" `)},
		},
		"object value gives compact JSON": {
			in:   &toolsdv1.ExecuteResult{ValueJson: []byte("{ \"a\" : [1, 2] }")},
			want: tool.Result{Content: `{"a":[1,2]}`, Value: json.RawMessage("{ \"a\" : [1, 2] }")},
		},
		"number value": {
			in:   &toolsdv1.ExecuteResult{ValueJson: []byte("4.5")},
			want: tool.Result{Content: "4.5", Value: json.RawMessage("4.5")},
		},
		"invalid value JSON": {
			in:   &toolsdv1.ExecuteResult{ValueJson: []byte(`{"a":`)},
			want: tool.Failure(tool.CodeInvalidResult, "the tool's value is not valid UTF-8 JSON"),
		},
		"trailing data after the value": {
			in:   &toolsdv1.ExecuteResult{ValueJson: []byte(`1 2`)},
			want: tool.Failure(tool.CodeInvalidResult, "the tool's value is not valid UTF-8 JSON"),
		},
		"invalid UTF-8 inside a string value": {
			in:   &toolsdv1.ExecuteResult{ValueJson: []byte("\"\xff\"")},
			want: tool.Failure(tool.CodeInvalidResult, "the tool's value is not valid UTF-8 JSON"),
		},
		"invalid UTF-8 content": {
			in:   &toolsdv1.ExecuteResult{Content: []byte("\xff")},
			want: tool.Failure(tool.CodeInvalidResult, "the tool's content is not valid UTF-8"),
		},
		"error with meta": {
			in: &toolsdv1.ExecuteResult{IsError: true, ErrorMessage: []byte("nope"), MetaJson: []byte(`{"x":1}`), Content: []byte("ignored")},
			want: func() tool.Result {
				r := tool.Failure(tool.CodeToolError, "nope")
				r.Meta = json.RawMessage(`{"x":1}`)
				return r
			}(),
		},
		"error without message": {
			in:   &toolsdv1.ExecuteResult{IsError: true},
			want: tool.Failure(tool.CodeToolError, "the tool failed without a message"),
		},
		"arguments the tool could not read": {
			in: &toolsdv1.ExecuteResult{IsError: true, InvalidArguments: true, ErrorMessage: []byte("bad time"), MetaJson: []byte(`{"x":1}`)},
			want: func() tool.Result {
				r := tool.Failure(tool.CodeInvalidArguments, "bad time")
				r.Meta = json.RawMessage(`{"x":1}`)
				return r
			}(),
		},
		"arguments the tool could not read, without a message": {
			in:   &toolsdv1.ExecuteResult{IsError: true, InvalidArguments: true},
			want: tool.Failure(tool.CodeInvalidArguments, "the tool could not read its arguments"),
		},
		"invalid arguments without is_error is a success": {
			in:   &toolsdv1.ExecuteResult{InvalidArguments: true, Content: []byte("fine")},
			want: tool.Result{Content: "fine"},
		},
		"arguments the tool could not read, message not UTF-8": {
			in:   &toolsdv1.ExecuteResult{IsError: true, InvalidArguments: true, ErrorMessage: []byte("\xff")},
			want: tool.Failure(tool.CodeInvalidResult, "the tool's error message is not valid UTF-8"),
		},
		"error message not UTF-8": {
			in:   &toolsdv1.ExecuteResult{IsError: true, ErrorMessage: []byte("\xff")},
			want: tool.Failure(tool.CodeInvalidResult, "the tool's error message is not valid UTF-8"),
		},
		"over the size limit": {
			in:   &toolsdv1.ExecuteResult{Content: []byte("0123456789"), ValueJson: []byte("12345"), MetaJson: []byte(`{"k":"0123456789"}`)},
			want: tool.Failure(tool.CodeResultTooLarge, "the tool's result is 33 bytes, over the limit of 32 bytes"),
		},
		"empty result": {
			in:   &toolsdv1.ExecuteResult{ConcludesTurn: true},
			want: tool.Result{ConcludesTurn: true},
		},
	} {
		t.Run(name, func(t *testing.T) {
			got := decodeResult(tc.in, 32)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("decodeResult(%v) mismatch (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}
