package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/durationpb"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/textcut"
	"github.com/toolsd/toolsd/internal/tool"
)

// Tool is a tool definition bound to its handler. Build one with [NewTool]; the
// interface is sealed.
type Tool interface {
	// Name returns the tool's name.
	Name() string
	// Schema returns the JSON Schema of the arguments exactly as it is registered.
	Schema() string

	impl() *toolImpl
}

// Annotations are hints about a tool's behaviour (MCP's tool annotations). toolsd shows
// them to operators; its configuration, not the hints, decides policy and scheduling.
type Annotations struct {
	// Title is a human-readable name.
	Title string
	// ReadOnly: the tool does not modify its environment.
	ReadOnly bool
	// Destructive: the tool may perform destructive updates.
	Destructive bool
	// Idempotent: repeating a call with the same arguments has no additional effect.
	Idempotent bool
	// OpenWorld: the tool interacts with an open world of external entities.
	OpenWorld bool
}

// Result is a handler's full answer, for when a string or a JSON value is not enough.
// Return it (or *Result) as R from the handler.
type Result struct {
	// Content is the model-facing text; when empty, toolsd derives it from Value (a JSON
	// string becomes its text, anything else its compact JSON).
	Content string
	// Value is JSON-encoded as the tool's value; nil means none.
	Value any
	// Meta is JSON-encoded as metadata recorded in the session log; nil means none.
	Meta any
	// ConcludesTurn asks the agent loop to end the turn after this step, also when the
	// call fails because Value or Meta cannot be JSON-encoded.
	ConcludesTurn bool
}

// ToolOption configures a tool built by [NewTool].
type ToolOption func(*toolConfig)

type toolConfig struct {
	schema, outputSchema string
	mode                 toolsdv1.ExecutionMode
	timeout              time.Duration
	annotations          *Annotations
	deferLoading         bool
	condition            string
	maxContentBytes      int64
	strict               bool
}

// WithSchema replaces the derived argument schema with an explicit JSON Schema. Its root
// must be an object schema. The text is registered byte for byte.
func WithSchema(jsonSchema string) ToolOption { return func(c *toolConfig) { c.schema = jsonSchema } }

// WithOutputSchema sets a JSON Schema that the tool's JSON value must satisfy.
func WithOutputSchema(jsonSchema string) ToolOption {
	return func(c *toolConfig) { c.outputSchema = jsonSchema }
}

// Exclusive marks the tool's calls as barriers: within a batch they wait for running
// calls to finish and run alone. Use it for tools that mutate shared state.
func Exclusive() ToolOption {
	return func(c *toolConfig) { c.mode = toolsdv1.ExecutionMode_EXECUTION_MODE_EXCLUSIVE }
}

// Parallel marks the tool's calls as safe to run alongside others in a batch.
func Parallel() ToolOption {
	return func(c *toolConfig) { c.mode = toolsdv1.ExecutionMode_EXECUTION_MODE_PARALLEL }
}

// WithTimeout sets the tool's own per-call deadline; 0 or less (and no WithTimeout)
// keeps toolsd's default.
func WithTimeout(d time.Duration) ToolOption { return func(c *toolConfig) { c.timeout = d } }

// WithAnnotations attaches behaviour hints.
func WithAnnotations(a Annotations) ToolOption { return func(c *toolConfig) { c.annotations = &a } }

// DeferLoading marks the tool for deferred definition loading in the prompt.
func DeferLoading() ToolOption { return func(c *toolConfig) { c.deferLoading = true } }

// WithCondition makes the tool conditional: the CEL expression (for example
// `session.succeeded("get_db_schema")`) is evaluated once per step, and the tool is only
// callable through a tool set in which it holds.
func WithCondition(cel string) ToolOption { return func(c *toolConfig) { c.condition = cel } }

// WithMaxContentBytes truncates model-facing content longer than n bytes, with an
// explicit marker, when toolsd finalizes the result; 0 or less means no limit.
func WithMaxContentBytes(n int) ToolOption {
	return func(c *toolConfig) { c.maxContentBytes = int64(max(n, 0)) }
}

// StrictArguments rejects arguments with fields the argument type does not have. The
// derived schema then says "additionalProperties": false for every struct.
func StrictArguments() ToolOption { return func(c *toolConfig) { c.strict = true } }

// toolImpl is the one implementation of [Tool].
type toolImpl struct {
	def    *toolsdv1.ToolDefinition // immutable once built; shared by register messages
	invoke func(ctx context.Context, call Call, args string) *toolsdv1.ExecuteResult
}

func (t *toolImpl) Name() string    { return t.def.GetName() }
func (t *toolImpl) Schema() string  { return t.def.GetParametersJson() }
func (t *toolImpl) impl() *toolImpl { return t }

// NewTool defines a tool whose arguments decode into A and whose handler returns R.
//
// The argument schema is derived from A (see the package documentation for the struct
// tags) unless [WithSchema] gives one. The handler's answer becomes the result:
//   - a string R is the model-facing content;
//   - a [Result] or *Result R sets content, value, meta and concludes_turn directly;
//   - any other R is JSON-encoded as the tool's value, and toolsd derives the content
//     from it;
//   - a non-nil error makes an error result whose message is err.Error(), and the R
//     returned with it is discarded; the error of a cancelled call's context reports
//     that the tool stopped (see the package documentation, Cancellation).
//
// Arguments that do not decode into A produce an error result without calling fn; so
// does an R that cannot be JSON-encoded; a panic in fn produces an error result and is
// logged, and the provider keeps running.
//
// NewTool panics if the name breaks toolsd's rule (1 to 64 bytes of A-Z a-z 0-9 _ - .
// /, and not run_code, which only the operator registers), if fn is nil, if A cannot be
// described by a JSON Schema object, if no value of R can be JSON-encoded (see the
// package documentation, Results), or if an explicit schema is not a JSON object in
// UTF-8: these are programming errors that the first test building the tool reveals
// (toolsd would refuse the tool, and the provider would only log it). A description
// that is not UTF-8 has its invalid bytes replaced by U+FFFD.
func NewTool[A any, R any](name, description string, fn func(ctx context.Context, call Call, args A) (R, error), opts ...ToolOption) Tool {
	if why := tool.NameProblem(name); why != "" {
		panic(fmt.Sprintf("provider: tool %q: invalid name: %s", name, why))
	}
	if name == tool.ReservedRunCode {
		panic(fmt.Sprintf("provider: tool %q: the name is reserved for the operator", name))
	}
	if fn == nil {
		panic(fmt.Sprintf("provider: tool %q has a nil handler", name))
	}
	if why := unencodable(reflect.TypeFor[R]()); why != "" {
		if strings.HasPrefix(why, "field ") {
			why = fmt.Sprintf("%s: %s", reflect.TypeFor[R](), why)
		}
		panic(fmt.Sprintf("provider: tool %q: result type %s", name, why))
	}
	var cfg toolConfig
	for _, opt := range opts {
		opt(&cfg)
	}
	params := cfg.schema
	if params == "" {
		s, err := deriveSchema(reflect.TypeFor[A](), cfg.strict)
		if err != nil {
			panic(fmt.Sprintf("provider: tool %q: %v", name, err))
		}
		params = s
	} else if err := checkObjectSchema(params); err != nil {
		panic(fmt.Sprintf("provider: tool %q: schema: %v", name, err))
	}
	if cfg.outputSchema != "" {
		if err := checkObjectSchema(cfg.outputSchema); err != nil {
			panic(fmt.Sprintf("provider: tool %q: output schema: %v", name, err))
		}
	}
	// Text that is not UTF-8 cannot be sent at all: gRPC refuses to marshal it and ends
	// the stream, failing every call on it, again after every reconnect. The schemas are
	// checked above; the rest is repaired, and toolsd judges what it then receives.
	def := &toolsdv1.ToolDefinition{
		Name:             name,
		Description:      validUTF8(description),
		ParametersJson:   params,
		OutputSchemaJson: cfg.outputSchema,
		Mode:             cfg.mode,
		DeferLoading:     cfg.deferLoading,
		Condition:        validUTF8(cfg.condition),
		MaxContentBytes:  cfg.maxContentBytes,
	}
	if cfg.timeout > 0 {
		def.Timeout = durationpb.New(cfg.timeout)
	}
	if a := cfg.annotations; a != nil {
		def.Annotations = &toolsdv1.ToolAnnotations{
			Title:           validUTF8(a.Title),
			ReadOnlyHint:    a.ReadOnly,
			DestructiveHint: a.Destructive,
			IdempotentHint:  a.Idempotent,
			OpenWorldHint:   a.OpenWorld,
		}
	}
	strict, keys := cfg.strict, newKeyCheck(reflect.TypeFor[A]())
	return &toolImpl{def: def, invoke: func(ctx context.Context, call Call, args string) *toolsdv1.ExecuteResult {
		var a A
		if err := decodeArgs(args, &a, strict, keys); err != nil {
			return invalidArguments(err)
		}
		r, err := fn(ctx, call, a)
		if err != nil {
			res := errorResult(err.Error())
			// The tool returned the cancellation it was given: toolsd records ABORTED (or
			// TOOL_TIMEOUT) rather than a failure of the tool's own.
			res.Cancelled = ctx.Err() != nil && errors.Is(err, ctx.Err())
			return res
		}
		return encodeResult(r)
	}}
}

// checkObjectSchema checks that s is a single JSON object in UTF-8.
func checkObjectSchema(s string) error {
	if !utf8.ValidString(s) {
		return errors.New("not valid UTF-8")
	}
	if !json.Valid([]byte(s)) {
		return errors.New("not valid JSON")
	}
	if t := strings.TrimSpace(s); t == "" || t[0] != '{' {
		return errors.New("not a JSON object")
	}
	return nil
}

// decodeArgs decodes the call's arguments into dst; empty arguments leave the zero value.
// A key that names a field in case only, which keys finds, is not one of its properties
// (see caseOnlyKeys): ignored, or, when strict, refused as an unknown field.
//
// JSON Schema counts 1.0 and 2e3 as integers, so toolsd's validation lets them through
// to an "integer" property, but encoding/json will not decode them into a Go integer.
// When that is why decoding failed, such numbers are rewritten as plain integers and the
// arguments decoded again.
func decodeArgs(args string, dst any, strict bool, keys *keyCheck) error {
	if strings.TrimSpace(args) == "" {
		return nil
	}
	if found := keys.find(args); len(found) > 0 {
		if strict {
			return fmt.Errorf("json: unknown field %q", found[0].name)
		}
		args = hideKeys(args, found)
	}
	err := decodeJSON(args, dst, strict)
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) || !strings.HasPrefix(te.Value, "number") {
		return err
	}
	plain, ok := plainIntegers(args)
	if !ok {
		return err
	}
	// The failed decode may have filled part of dst: start again from the zero value.
	reflect.ValueOf(dst).Elem().SetZero()
	return decodeJSON(plain, dst, strict)
}

func decodeJSON(args string, dst any, strict bool) error {
	if !strict {
		return json.Unmarshal([]byte(args), dst)
	}
	dec := json.NewDecoder(strings.NewReader(args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("unexpected data after the arguments")
	}
	return nil
}

// plainIntegers returns doc with every integral number written with a fraction or an
// exponent (1.0, -2.50e1, 3E2) rewritten as a plain integer (1, -25, 300), and whether
// there was any. The rest of the text is kept byte for byte (a json.RawMessage field
// sees its keys in their order). A doc that is not a single JSON value is left alone.
func plainIntegers(doc string) (string, bool) {
	dec := json.NewDecoder(strings.NewReader(doc))
	dec.UseNumber()
	var (
		out         strings.Builder
		kept, depth int // doc[:kept] is in out
		seen        bool
	)
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) && seen && depth == 0 {
			break
		}
		if err != nil {
			return "", false
		}
		seen = true
		switch t := tok.(type) {
		case json.Delim:
			if t == '{' || t == '[' {
				depth++
			} else {
				depth--
			}
		case json.Number:
			// The token is the number's text, which ends where the decoder stands.
			end := int(dec.InputOffset())
			if i, ok := integral(string(t)); ok {
				out.WriteString(doc[kept : end-len(t)])
				out.WriteString(i)
				kept = end
			}
		}
		if depth == 0 && dec.More() {
			return "", false // a second value follows the first
		}
	}
	if kept == 0 {
		return "", false
	}
	out.WriteString(doc[kept:])
	return out.String(), true
}

// integral returns the number s as a plain integer if it has a fraction or an exponent
// and its value is a whole number. Numbers too long or too large for any Go integer are
// left as they are (decoding reports them).
func integral(s string) (string, bool) {
	if len(s) > 64 || !strings.ContainsAny(s, ".eE") {
		return "", false
	}
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		if e, err := strconv.Atoi(s[i+1:]); err != nil || e < -64 || e > 64 {
			return "", false
		}
	}
	var r big.Rat
	if _, ok := r.SetString(s); !ok || !r.IsInt() {
		return "", false
	}
	return r.Num().String(), true
}

// encodeResult turns a handler's answer into the wire result.
func encodeResult(r any) *toolsdv1.ExecuteResult {
	switch v := r.(type) {
	case string:
		return &toolsdv1.ExecuteResult{Content: []byte(v)}
	case Result:
		return v.encode()
	case *Result:
		if v == nil {
			return &toolsdv1.ExecuteResult{}
		}
		return v.encode()
	}
	b, err := marshal(r)
	if err != nil {
		return errorResult("cannot encode the tool's value: " + err.Error())
	}
	return &toolsdv1.ExecuteResult{ValueJson: b}
}

// encode turns r into the wire result. A value or metadata that cannot be encoded
// makes an error result that still asks to end the turn, as toolsd's own replacements
// of a result do.
func (r Result) encode() *toolsdv1.ExecuteResult {
	out := &toolsdv1.ExecuteResult{Content: []byte(r.Content), ConcludesTurn: r.ConcludesTurn}
	var err error
	if r.Value != nil {
		if out.ValueJson, err = marshal(r.Value); err != nil {
			out = errorResult("cannot encode the tool's value: " + err.Error())
			out.ConcludesTurn = r.ConcludesTurn
			return out
		}
	}
	if r.Meta != nil {
		if out.MetaJson, err = marshal(r.Meta); err != nil {
			out = errorResult("cannot encode the tool's metadata: " + err.Error())
			out.ConcludesTurn = r.ConcludesTurn
			return out
		}
	}
	return out
}

// marshal encodes v as compact JSON without HTML escaping.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}

// errorResult is a tool error whose message is valid UTF-8 (toolsd rejects anything else).
func errorResult(msg string) *toolsdv1.ExecuteResult {
	return &toolsdv1.ExecuteResult{IsError: true, ErrorMessage: []byte(validUTF8(msg))}
}

// maxDecodeErrorBytes bounds the decoder's part of an invalid-arguments message:
// encoding/json quotes the offending value in some errors (a time that does not parse),
// and a message that grew with the arguments would cost the model's context, or fail
// the call as RESULT_TOO_LARGE under a small max_result_bytes.
const maxDecodeErrorBytes = 1024

// invalidArguments is the answer to a call whose arguments do not decode into the
// tool's argument type: the model's mistake, not the tool's, which toolsd records as
// INVALID_ARGUMENTS (and does not retry) rather than TOOL_ERROR.
func invalidArguments(err error) *toolsdv1.ExecuteResult {
	res := errorResult("invalid arguments: " + textcut.Ellipsis(err.Error(), maxDecodeErrorBytes))
	res.InvalidArguments = true
	return res
}

// validUTF8 returns s with invalid sequences replaced by U+FFFD.
func validUTF8(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }
