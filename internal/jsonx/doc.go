// Package jsonx is toolsd's strict JSON reader for untrusted input: model-emitted tool
// arguments, provider results and provider-supplied JSON Schemas.
//
// It accepts exactly RFC 8259 JSON and additionally rejects what encoding/json lets
// through silently: invalid UTF-8 (raw or as a lone \u surrogate escape), duplicate object
// keys at any depth, nesting deeper than a limit, inputs over a size limit, empty input and
// trailing data. Numbers are kept as [encoding/json.Number], so nothing is lost in a
// round trip. Every rejection is an [*Error] carrying the byte offset and wrapping one of
// the sentinel errors ([ErrSyntax], [ErrDuplicateKey], [ErrTooDeep], [ErrInvalidUTF8],
// [ErrTooLarge]).
//
// jsonx owns no state and never panics on any input; it must never accept a document that
// encoding/json would reject (the fuzz test enforces both).
package jsonx
