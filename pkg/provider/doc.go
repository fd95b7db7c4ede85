// Package provider is the Go SDK for toolsd tool providers. A provider is a process that
// opens one long-lived callback stream to toolsd, registers tools on it and runs the
// calls toolsd sends down it. The tools live exactly as long as the stream: when the
// process exits or the stream breaks they disappear from toolsd, and [Provider.Run]
// reconnects and registers them again. A registration toolsd refuses because the name
// is taken (ALREADY_EXISTS) is sent again with a growing delay (50 ms up to 5 s) for up
// to two minutes ([WithRetakeWindow]): after a quick reconnect or a restart, toolsd may
// not yet have seen the previous stream close, and its tools are removed only then.
// A connection that stops carrying anything without closing (toolsd's host lost power,
// the network partitioned) is found by keepalive: after 10 s without traffic the
// provider pings toolsd and, with no answer 5 s later, gives the connection up and
// reconnects ([WithKeepalive]; toolsd permits a ping every 5 s).
//
// A tool is a typed Go function:
//
//	type AddArgs struct {
//		A float64 `json:"a" description:"The first addend."`
//		B float64 `json:"b" description:"The second addend."`
//	}
//
//	add := provider.NewTool("add", "Adds two numbers.",
//		func(ctx context.Context, call provider.Call, args AddArgs) (float64, error) {
//			return args.A + args.B, nil
//		})
//
//	p := provider.New("calculator", provider.WithVersion("1.0.0"))
//	p.Add(add)
//	err := p.Run(ctx, "127.0.0.1:50151") // returns nil when ctx ends
//
// toolsd may refuse a tool (an invalid schema or condition, a scope the provider may not
// register in, a name another provider holds) or hold it back (pinning): such a tool is
// never called. A provider says so in its log, which is standard error (warnings and
// errors only) unless [WithLogger] gives it a logger, and [Provider.Registrations] says
// so to its code: each tool's state on the current stream (registered, quarantined,
// refused with toolsd's code and message, or pending: not answered yet, a name taken
// and registered again, or no stream, as from a stream's end until the next one's
// answers). [Provider.Ready] closes once the first registration is answered, whatever
// toolsd accepted: a readiness probe or a test waits for it, then reads Registrations.
//
// # Argument schemas
//
// [NewTool] derives the JSON Schema of the arguments from the argument type, which must
// be a struct (or a map). The schema is deterministic: properties appear in field order
// and keywords in a fixed order, so the prompt toolsd builds from it is byte-stable.
//
//   - Each exported field is a property named by its `json` tag (or the field name, also
//     when encoding/json ignores the tag's name: one with quotes or a backslash);
//     `json:"-"` fields are skipped and embedded structs are inlined, as encoding/json
//     does — including its rule for a name several fields share: the shallowest field
//     wins, then the one whose tag names it, and a name still shared is left out.
//   - Go types map to JSON types: bool → boolean, integers → integer (unsigned ones with
//     minimum 0, 8-, 16- and 32-bit ones within their range; 64-bit ones, int and uint
//     have no maximum), floats and json.Number → number,
//     string → string, slices and arrays → array with items, maps → object with
//     additionalProperties (and, for integer keys, propertyNames holding the decimal
//     integers encoding/json parses, within the range of an 8-, 16- or 32-bit key type:
//     a key it cannot parse, or one out of its type's range, fails the whole decoding),
//     structs → object, time.Time → string (date-time), []byte →
//     base64 string, interfaces and json.RawMessage → any value. As encoding/json decodes
//     them: a type that decodes itself (json.Unmarshaler) → any value (the arguments
//     struct itself is still described by its fields; one that gets UnmarshalJSON from
//     an embedded field is decoded by that field alone, so it is described by that
//     field's type, and NewTool panics if it has other fields, which would never be
//     set, or if the field is a pointer, which would be nil), one that decodes from text
//     (encoding.TextUnmarshaler, such as netip.Addr) → string (a struct type without a
//     name, which can get these methods from an embedded field, uses them only through
//     a pointer, as encoding/json does), and a boolean, number or
//     string field tagged `json:",string"` → string whose pattern admits the field's
//     value written as JSON ("5", "true", "\"text\"", a JSON string too for a type
//     decoding from text). Recursive types, channels and functions need an explicit
//     schema ([WithSchema]).
//   - A field is required unless it is a pointer or its json tag says omitempty or
//     omitzero; `jsonschema:"required"` and `jsonschema:"optional"` override that.
//   - A `description:"..."` tag sets the property's description.
//   - A `jsonschema:"..."` tag holds comma-separated keywords; write `\,` for a comma
//     inside a value:
//     description=TEXT, title=TEXT, required, optional, enum=a|b|c, default=V,
//     minimum=N, maximum=N, exclusiveMinimum=N, exclusiveMaximum=N, minLength=N,
//     maxLength=N, minItems=N, maxItems=N, pattern=REGEXP, format=NAME.
//     Enum and default values take the property's JSON type (string, number or
//     boolean): strings for a type decoding from text, and strings holding the value as
//     JSON for a `json:",string"` field (`enum=debug|warn` → "\"debug\"", "\"warn\"" when
//     the type decodes from text); an integer field's are integers its Go type holds.
//     An unknown keyword makes NewTool panic, so typos surface at once; so do a value
//     of the wrong type or out of an integer type's range, and a
//     pattern Go's regexp does not compile (toolsd would refuse the tool: it compiles
//     patterns with regexp, which has no lookaround or backreferences). Two fields of
//     one struct with the same JSON name are left out, as encoding/json ignores both
//     (go vet reports them).
//
// For example
//
//	type SearchArgs struct {
//		Query string `json:"query" description:"What to look for."`
//		Limit int    `json:"limit,omitempty" jsonschema:"minimum=1,maximum=50,default=10"`
//		Sort  string `json:"sort,omitempty" jsonschema:"enum=relevance|date"`
//	}
//
// derives
//
//	{"type":"object","properties":{"query":{"type":"string","description":"What to look for."},"limit":{"type":"integer","default":10,"minimum":1,"maximum":50},"sort":{"type":"string","enum":["relevance","date"]}},"required":["query"]}
//
// [StrictArguments] additionally rejects unknown argument fields and says
// "additionalProperties": false. toolsd validates arguments against the schema before
// it sends a call, so a handler sees only arguments that match it. JSON Schema counts
// 1.0 and 2e3 as integers; the SDK decodes them into integer fields as 1 and 2000
// (encoding/json alone would refuse them). Property names are case-sensitive, as in
// the schema: a key that differs from a field's JSON name in case only ("LIMIT" for
// "limit"), which the schema lets through unchecked as an additional property, is
// ignored like any other unknown key (refused with [StrictArguments]), where
// encoding/json alone would decode it into the field, over the checked value.
//
// # Results
//
// A handler returning a string answers with that text. Any other result type is
// JSON-encoded as the tool's value and toolsd derives the model-facing text from it; a
// [Result] sets text, value, metadata and the end-of-turn request explicitly. A result
// type that encoding/json refuses whatever its value makes NewTool panic: a channel, a
// function or a complex number, a map whose keys it cannot write, or a struct with such
// a field that it always writes (one tagged omitzero, or behind a pointer, a slice, a map
// or an interface, may be left out, null or empty; omitempty never leaves out a channel
// or a function).
//
// A returned error is how a tool fails: the result returned with it is discarded, and
// the model sees "Error: " and the error's message (an empty message reads "the tool
// failed without a message"); the session log and the agent loop see the code
// TOOL_ERROR. A call whose arguments do not decode into the argument type fails before
// the handler runs, with "invalid arguments: ..." (the decoder's message cut to 1 KiB)
// and the code INVALID_ARGUMENTS, as when toolsd's own validation refuses them:
// encoding/json is stricter than the schema for some types (a [time.Time] not in RFC
// 3339, a []byte not in base64, a number out of its Go type's range), and the mistake is
// the model's, not the tool's (toolsd does not retry it). The SDK fails a call with
// TOOL_ERROR when its value or metadata cannot be
// JSON-encoded (a channel, a NaN or infinite float, a cyclic structure: "cannot encode
// the tool's value: ...") and when the handler panics (the panic and its stack are
// logged, the model sees only that the tool failed unexpectedly, and the provider keeps
// running). toolsd itself fails a result whose text is not valid UTF-8 with
// INVALID_RESULT.
//
// # Cancellation
//
// Every call runs on its own goroutine with a context that ends when toolsd cancels the
// call (its batch was cancelled, or its timeout fired), when its deadline passes, or
// when the stream ends. The deadline is timed on the provider's clock from when the call
// arrived (the time toolsd had left for it then), so a clock that disagrees with
// toolsd's neither ends calls early nor gives them longer than toolsd waits. A handler
// that returns its context's error (ctx.Err(), or an error wrapping it) once the
// context has ended reports that the tool stopped: toolsd
// records the call as ABORTED, or TOOL_TIMEOUT when its timeout fired, not as a
// failure of the tool. Any other error is kept as the tool's failure, and a success
// that comes after the cancellation is ABORTED too. toolsd waits for a cancelled
// call's answer for its limits.cancel_grace (2 s by default), so a handler that
// returns promptly lets the batch go on sooner.
//
// Handlers should honour their context. When Run's (or Serve's) context ends, every
// handler's context ends with it, while the stream to toolsd stays open for the
// shutdown grace (5 s by default, [WithShutdownGrace]): a handler that finishes in
// time still has its result delivered. The provider unregisters its tools as the
// shutdown begins, so toolsd sends it no new calls meanwhile: they go to another
// provider that registers the name, or find the tool unknown. Then the provider
// closes its side of the stream, toolsd ends it (the provider waits up to a second for
// that), and Run returns. Calls that did not finish — a handler that returned the
// shutdown's cancellation, one still running after the grace (abandoned, and logged as
// left running), one toolsd sent before it saw the unregister (not started) — fail in
// toolsd with PROVIDER_GONE as the stream ends, so toolsd may retry an idempotent tool on
// another provider. A reconnect does not wait for the handlers of the stream that
// ended.
//
// # Tracing
//
// When toolsd traces (tracing.enabled), a handler's context carries the call's trace as
// a remote span context (trace.SpanContextFromContext), whose span is toolsd's of the
// call: a span the handler starts in ctx with any OpenTelemetry tracer joins the agent's
// trace. It is extracted with W3C's propagator, not the global one, which does nothing
// until a program installs one. [Call].TraceContext holds the same W3C headers for
// handlers that trace otherwise. The SDK needs the OpenTelemetry API only.
package provider
