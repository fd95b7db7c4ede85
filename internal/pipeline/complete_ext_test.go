package pipeline_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/toolsd/toolsd/internal/jsonx"
	"github.com/toolsd/toolsd/internal/pipeline"
	"github.com/toolsd/toolsd/internal/tool"
)

func post(name string, fn func(r tool.Result) pipeline.PostVerdict) pipeline.PostExecute {
	return pipeline.PostExecuteFunc(name, func(_ context.Context, _ *tool.Exec, _ pipeline.Tool, r tool.Result) pipeline.PostVerdict {
		return fn(r)
	})
}

func ptr(s string) *string { return &s }

// onlyObjects is an output schema stand-in: values must be JSON objects.
func onlyObjects(v []byte) error {
	if len(v) == 0 || v[0] != '{' {
		return errors.New("expected object")
	}
	return nil
}

func TestPostExecute(t *testing.T) {
	tests := map[string]struct {
		result       tool.Result
		post         []pipeline.PostExecute
		want         tool.Result
		wantLastSeen string
	}{
		"replacements apply in order, each seeing the previous": {
			result: tool.Result{Content: "a", Value: json.RawMessage(`{"n":1}`)},
			post: []pipeline.PostExecute{
				post("p1", func(r tool.Result) pipeline.PostVerdict {
					return pipeline.PostVerdict{Action: pipeline.Replace, Content: ptr(r.Content + "b")}
				}),
				post("p2", func(r tool.Result) pipeline.PostVerdict {
					return pipeline.PostVerdict{Action: pipeline.Replace, Content: ptr(r.Content + "c"), Value: json.RawMessage(`{"n":2}`)}
				}),
			},
			want: tool.Result{Content: "abc", Value: json.RawMessage(`{"n":2}`)},
		},
		"replaced value must match the output schema": {
			result: tool.Result{Content: "a", Value: json.RawMessage(`{"n":1}`)},
			post: []pipeline.PostExecute{post("p", func(tool.Result) pipeline.PostVerdict {
				return pipeline.PostVerdict{Action: pipeline.Replace, Value: json.RawMessage(`[1]`)}
			})},
			want: failureFor(tool.CodeInvalidResult, "result value does not match the output schema: expected object", ""),
		},
		"a value replaced alone takes along content derived from the old value": {
			result: tool.Result{Content: `{"token":"s3cret"}`, Value: json.RawMessage(`{"token":"s3cret"}`)},
			post: []pipeline.PostExecute{post("redact", func(tool.Result) pipeline.PostVerdict {
				return pipeline.PostVerdict{Action: pipeline.Replace, Value: json.RawMessage(`{"token": "[redacted]"}`)}
			})},
			want: tool.Result{Content: `{"token":"[redacted]"}`, Value: json.RawMessage(`{"token": "[redacted]"}`)},
		},
		"a value replaced alone keeps the tool's own content": {
			result: tool.Result{Content: "one token issued", Value: json.RawMessage(`{"token":"s3cret"}`)},
			post: []pipeline.PostExecute{post("redact", func(tool.Result) pipeline.PostVerdict {
				return pipeline.PostVerdict{Action: pipeline.Replace, Value: json.RawMessage(`{"token":"[redacted]"}`)}
			})},
			want: tool.Result{Content: "one token issued", Value: json.RawMessage(`{"token":"[redacted]"}`)},
		},
		"block gives feedback and stops the chain": {
			result: tool.Result{Content: "secret stuff", AdditionalContexts: []string{"tool"}, ConcludesTurn: true},
			post: []pipeline.PostExecute{
				post("ctx", func(tool.Result) pipeline.PostVerdict { return pipeline.PostVerdict{AddContext: []string{"a"}} }),
				post("dlp", func(tool.Result) pipeline.PostVerdict {
					return pipeline.PostVerdict{Action: pipeline.Block, Reason: "result contained a credential", AddContext: []string{"b"}}
				}),
				post("never", func(tool.Result) pipeline.PostVerdict { panic("ran after block") }),
			},
			want: concluding(withContexts(failureFor(tool.CodeBlocked, "result contained a credential", ""), "tool", "a", "b")),
		},
		"add context is FIFO": {
			result: tool.Result{Content: "x", AdditionalContexts: []string{"tool-1"}},
			post: []pipeline.PostExecute{
				post("p1", func(tool.Result) pipeline.PostVerdict { return pipeline.PostVerdict{AddContext: []string{"a", "b"}} }),
				post("p2", func(tool.Result) pipeline.PostVerdict { return pipeline.PostVerdict{AddContext: []string{"c"}} }),
			},
			want: tool.Result{Content: "x", AdditionalContexts: []string{"tool-1", "a", "b", "c"}},
		},
		"runs on tool errors and may redact their content": {
			result: tool.Failure(tool.CodeToolError, "password=hunter2 rejected"),
			post: []pipeline.PostExecute{post("redact", func(r tool.Result) pipeline.PostVerdict {
				if !r.IsError {
					return pipeline.PostVerdict{}
				}
				return pipeline.PostVerdict{Action: pipeline.Replace, Content: ptr("credential rejected")}
			})},
			want: tool.Result{Content: "Error: credential rejected", IsError: true,
				Err: &tool.Error{Code: tool.CodeToolError, Message: "credential rejected", Tool: "echo"}},
		},
		"a value replacing an error's is INVALID_RESULT": {
			result: tool.Failure(tool.CodeToolError, "no such file"),
			post: []pipeline.PostExecute{post("fill", func(tool.Result) pipeline.PostVerdict {
				return pipeline.PostVerdict{Action: pipeline.Replace, Value: json.RawMessage(`{"n":1}`)}
			})},
			want: failureFor(tool.CodeInvalidResult, "post-execute policy produced an invalid result",
				`post-execute "fill" replaced the value of an error result`),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			echo := newTool("echo")
			echo.outErr = onlyObjects
			p := pipeline.New(staticResolver(echo), returning(tc.result), pipeline.WithPostExecute(tc.post...))
			e := newExec("echo", `{}`)
			r := p.Run(t.Context(), e)
			checkShape(t, e, r)
			if diff := cmp.Diff(tc.want, r); diff != "" {
				t.Errorf("Run() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func failureFor(code tool.Code, msg, reason string) tool.Result {
	r := tool.FailureWithReason(code, msg, reason)
	r.Err.Tool = "echo"
	return r
}

// jsonErr is jsonx's verdict on doc as normalization reports it (jsonx.Describe).
func jsonErr(doc string) string {
	err := jsonx.Valid([]byte(doc), jsonx.Limits{})
	if err == nil {
		panic("jsonErr: document is valid: " + doc)
	}
	return jsonx.Describe(err)
}

func withContexts(r tool.Result, cs ...string) tool.Result {
	r.AdditionalContexts = cs
	return r
}

func concluding(r tool.Result) tool.Result {
	r.ConcludesTurn = true
	return r
}

func TestNormalize(t *testing.T) {
	big := strings.Repeat("x", 60)
	tests := map[string]struct {
		result   tool.Result
		settings pipeline.ToolSettings
		want     tool.Result
	}{
		"valid success unchanged": {
			result: tool.Result{Content: "héllo", Value: json.RawMessage(`{"a":"é"}`), Meta: json.RawMessage(`{"m":1}`)},
			want:   tool.Result{Content: "héllo", Value: json.RawMessage(`{"a":"é"}`), Meta: json.RawMessage(`{"m":1}`)},
		},
		"content not UTF-8": {
			result: tool.Result{Content: "bad \xff byte"},
			want:   failureFor(tool.CodeInvalidResult, "result content is not valid UTF-8", ""),
		},
		"value not JSON": {
			result: tool.Result{Content: "x", Value: json.RawMessage(`{"a":`)},
			want:   failureFor(tool.CodeInvalidResult, "result value is not valid JSON: "+jsonErr(`{"a":`), ""),
		},
		"value not UTF-8": {
			result: tool.Result{Content: "x", Value: json.RawMessage("{\"a\":\"\xff\"}")},
			want:   failureFor(tool.CodeInvalidResult, "result value is not valid JSON: "+jsonErr("{\"a\":\"\xff\"}"), ""),
		},
		"value with duplicate keys": {
			result: tool.Result{Content: "x", Value: json.RawMessage(`{"a":1,"a":2}`)},
			want:   failureFor(tool.CodeInvalidResult, "result value is not valid JSON: "+jsonErr(`{"a":1,"a":2}`), ""),
		},
		"value fails output schema": {
			result: tool.Result{Content: "x", Value: json.RawMessage(`42`)},
			want:   failureFor(tool.CodeInvalidResult, "result value does not match the output schema: expected object", ""),
		},
		"meta not JSON": {
			result: tool.Result{Content: "x", Meta: json.RawMessage(`nope`)},
			want:   failureFor(tool.CodeInvalidResult, "result metadata is not valid JSON: "+jsonErr(`nope`), ""),
		},
		"too large by config": {
			result: tool.Result{Content: big, Value: json.RawMessage(`{"a":1}`), AdditionalContexts: []string{"kept"}, ConcludesTurn: true},
			want:   concluding(withContexts(failureFor(tool.CodeResultTooLarge, "result is 67 bytes, over the 64-byte limit", ""), "kept")),
		},
		"per-tool limit": {
			result:   tool.Result{Content: "0123456789a"},
			settings: pipeline.ToolSettings{MaxResultBytes: 10},
			want:     failureFor(tool.CodeResultTooLarge, "result is 11 bytes, over the 10-byte limit", ""),
		},
		"per-tool limit can raise the default": {
			result:   tool.Result{Content: big + big},
			settings: pipeline.ToolSettings{MaxResultBytes: 1000},
			want:     tool.Result{Content: big + big},
		},
		"error keeps its code with UTF-8 repaired": {
			result: tool.Result{Content: "Error: bad \xff", IsError: true, Err: &tool.Error{Code: tool.CodeToolError, Message: "bad \xff"}},
			want:   failureFor(tool.CodeToolError, "bad \uFFFD", ""),
		},
		"error without Err or prefix": {
			result: tool.Result{Content: "it broke", IsError: true},
			want:   failureFor(tool.CodeToolError, "it broke", ""),
		},
		"oversized error": {
			result: tool.Failure(tool.CodeToolError, big),
			want:   failureFor(tool.CodeResultTooLarge, "result is 67 bytes, over the 64-byte limit", "replaced a TOOL_ERROR result"),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			echo := newTool("echo")
			echo.outErr = onlyObjects
			p := pipeline.New(staticResolver(echo), returning(tc.result), pipeline.WithConfig(pipeline.Config{
				MaxResultBytes: 64,
				ToolPolicy:     func(string, string) pipeline.ToolSettings { return tc.settings },
			}))
			e := newExec("echo", `{}`)
			r := p.Run(t.Context(), e)
			checkShape(t, e, r)
			if diff := cmp.Diff(tc.want, r); diff != "" {
				t.Errorf("Run() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFinalizeTruncatesAtRuneBoundary(t *testing.T) {
	content := strings.Repeat("é", 100) // 200 bytes of 2-byte runes
	const marker = "\n[truncated: 200 bytes total]"
	tests := map[string]struct {
		limit int
		want  string
	}{
		"cut lands mid-rune": {limit: 60, want: strings.Repeat("é", 15) + marker},                   // 60-29=31 → 30
		"cut on a boundary":  {limit: 61, want: strings.Repeat("é", 16) + marker},                   // 61-29=32
		"limit below marker": {limit: 10, want: marker},                                             // nothing kept
		"under the limit":    {limit: 200, want: content},                                           // untouched
		"no limit":           {limit: 0, want: content},                                             // untouched
		"one byte over":      {limit: 199, want: strings.Repeat("é", (199-len(marker))/2) + marker}, // 170 → 85 runes
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tl := newTool("cat")
			tl.def.MaxContentBytes = tc.limit
			p := pipeline.New(staticResolver(tl), returning(tool.Result{Content: content}))
			r := p.Run(t.Context(), newExec("cat", `{}`))
			if r.Content != tc.want {
				t.Errorf("Run().Content = %q, want %q", r.Content, tc.want)
			}
			if !utf8.ValidString(r.Content) {
				t.Errorf("Run().Content is not valid UTF-8")
			}
			if tc.limit >= len(marker) && len(r.Content) > tc.limit {
				t.Errorf("len(Run().Content) = %d, want <= %d", len(r.Content), tc.limit)
			}
		})
	}
}

// Finalization must keep an error result's "Error: <message>" shape: a limit smaller
// than the error (even than its prefix plus the marker) cuts the message, never the
// prefix, and the structured message says what the content says.
func TestFinalizeKeepsErrorShape(t *testing.T) {
	tests := map[string]struct {
		limit int
		pre   []pipeline.PreExecute
		disp  *dispatcher
	}{
		"denial, limit below the marker": {limit: 10, pre: []pipeline.PreExecute{verdict(pipeline.Deny, "")}, disp: returning(tool.Result{Content: "x"})},
		"tool error, long message":       {limit: 40, disp: returning(tool.Failure(tool.CodeToolError, strings.Repeat("y", 100)))},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tl := newTool("cat")
			tl.def.MaxContentBytes = tc.limit
			p := pipeline.New(staticResolver(tl), tc.disp, pipeline.WithPreExecute(tc.pre...))
			e := newExec("cat", `{}`)
			r := p.Run(t.Context(), e)
			if !r.IsError || r.Err == nil {
				t.Fatalf("Run() = %+v, want an error result", r)
			}
			if want := tool.ErrorContentPrefix + r.Err.Message; r.Content != want {
				t.Errorf("Run().Content = %q, want %q (\"Error: \" + Err.Message)", r.Content, want)
			}
			if !strings.Contains(r.Content, "[truncated: ") {
				t.Errorf("Run().Content = %q, want the truncation marker", r.Content)
			}
		})
	}
}

// Additional contexts are made valid UTF-8 whatever becomes of the result, including a
// success that normalization itself turns into INVALID_RESULT: they are logged as
// user/message events and sent in settled.additional_contexts, a proto string.
func TestNormalizeSanitizesContextsOfInvalidResults(t *testing.T) {
	addBad := pipeline.PostExecuteFunc("ctx", func(context.Context, *tool.Exec, pipeline.Tool, tool.Result) pipeline.PostVerdict {
		return pipeline.PostVerdict{AddContext: []string{"note \xff"}}
	})
	p := pipeline.New(staticResolver(newTool("cat")), returning(tool.Result{Content: "bad \xff"}), pipeline.WithPostExecute(addBad))
	r := p.Run(t.Context(), newExec("cat", `{}`))
	if r.Code() != tool.CodeInvalidResult {
		t.Fatalf("Run().Code() = %q, want %q", r.Code(), tool.CodeInvalidResult)
	}
	if want := []string{"note \uFFFD"}; !slices.Equal(r.AdditionalContexts, want) {
		t.Errorf("Run().AdditionalContexts = %q, want %q", r.AdditionalContexts, want)
	}
}
