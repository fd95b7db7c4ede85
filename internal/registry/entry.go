package registry

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"slices"
	"unicode/utf8"

	"cel.dev/cel-go/cel"

	"github.com/toolsd/toolsd/internal/jsonx"
	"github.com/toolsd/toolsd/internal/tool"
)

// Entry is an immutable snapshot of one registration: the definition as registered, its
// compiled schemas and condition, and its content hash. A replaced or removed tool
// leaves existing entries intact, so a call that resolved an entry keeps a consistent
// view of it.
type Entry struct {
	def    tool.Definition
	scope  string
	owner  string
	hash   string
	params *schema
	output *schema
	cond   cel.Program
	// readsHistory is whether cond calls session.called or session.succeeded.
	readsHistory bool

	schema     tool.Schema
	projDigest [sha256.Size]byte
	argLimits  jsonx.Limits
	outLimits  jsonx.Limits
}

// Definition returns the registered definition. It is shared: callers must not modify
// it or the bytes it holds.
func (e *Entry) Definition() *tool.Definition { return &e.def }

// Name returns the tool name.
func (e *Entry) Name() string { return e.def.Name }

// Scope returns the scope the tool was registered in.
func (e *Entry) Scope() string { return e.scope }

// Owner returns the registering owner ("" for the operator).
func (e *Entry) Owner() string { return e.owner }

// Hash returns the content hash (see [ContentHash]).
func (e *Entry) Hash() string { return e.hash }

// Conditional reports whether the tool has a condition, and so is only usable through
// a tool set that admitted it.
func (e *Entry) Conditional() bool { return e.cond != nil }

// Schema returns the model-facing projection.
func (e *Entry) Schema() tool.Schema { return e.schema }

// ContentHash is the hex SHA-256 that pins a definition. It covers, in this order, each
// written as an 8-byte big-endian length followed by the bytes, after the tag
// "toolsd.tool.v1": name, description, parameters (exact bytes), output schema (exact
// bytes), annotation title, the annotation flags read_only, destructive, idempotent,
// open_world (one byte each, '0' or '1'), mode ("unspecified", "parallel",
// "exclusive"), defer_loading ('0' or '1') and condition. Timeout and MaxContentBytes
// are operational and not hashed.
func ContentHash(def *tool.Definition) string {
	h := sha256.New()
	w := fieldWriter{h: h}
	w.str("toolsd.tool.v1")
	w.str(def.Name)
	w.str(def.Description)
	w.bytes(def.Parameters)
	w.bytes(def.OutputSchema)
	a := def.Annotations
	w.str(a.Title)
	w.str(flags(a.ReadOnly, a.Destructive, a.Idempotent, a.OpenWorld))
	w.str(def.Mode.String())
	w.str(flags(def.DeferLoading))
	w.str(def.Condition)
	return hex.EncodeToString(h.Sum(nil))
}

// projectionDigest hashes one model-facing schema for fingerprints (the encoding is
// documented on [Registry.Schemas]).
func projectionDigest(s *tool.Schema) [sha256.Size]byte {
	h := sha256.New()
	w := fieldWriter{h: h}
	w.str("toolsd.schema.v1")
	w.str(s.Name)
	w.str(s.Description)
	w.bytes(s.Parameters)
	w.str(flags(s.DeferLoading))
	w.str(s.ContentHash)
	var d [sha256.Size]byte
	h.Sum(d[:0])
	return d
}

func fingerprint(entries []*Entry) string {
	h := sha256.New()
	h.Write([]byte("toolsd.schemas.v1"))
	for _, e := range entries {
		h.Write(e.projDigest[:])
	}
	return hex.EncodeToString(h.Sum(nil))
}

type fieldWriter struct{ h hash.Hash }

func (w fieldWriter) bytes(b []byte) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(b)))
	w.h.Write(n[:])
	w.h.Write(b)
}

func (w fieldWriter) str(s string) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(s)))
	w.h.Write(n[:])
	w.h.Write([]byte(s))
}

func flags(bs ...bool) string {
	b := make([]byte, len(bs))
	for i, v := range bs {
		b[i] = '0'
		if v {
			b[i] = '1'
		}
	}
	return string(b)
}

// newEntry validates and compiles a definition; it touches no registry state.
func newEntry(scope string, def tool.Definition, owner string, o *options) (*Entry, error) {
	if err := ValidateName(def.Name); err != nil {
		return nil, err
	}
	if def.Name == ReservedRunCode && owner != "" {
		return nil, fmt.Errorf("%w %q: the name is reserved for the operator", ErrInvalidName, def.Name)
	}
	lim := o.limits
	if err := checkDefinition(&def, &lim); err != nil {
		return nil, err
	}
	e := &Entry{scope: scope, owner: owner, argLimits: lim.Args, outLimits: lim.Output}
	e.def = def
	e.def.Parameters = bytes.Clone(def.Parameters)
	e.def.OutputSchema = bytes.Clone(def.OutputSchema)
	var err error
	if len(def.Parameters) == 0 {
		return nil, fmt.Errorf("%w: tool %s parameters: a schema is required", ErrInvalidSchema, quoteName(def.Name))
	}
	if e.params, err = compileSchema(def.Name, e.def.Parameters, parametersSchema, true, schemaLimits{lim.MaxSchemaBytes, lim.Args.MaxDepth}); err != nil {
		return nil, err
	}
	if len(def.OutputSchema) > 0 {
		if e.output, err = compileSchema(def.Name, e.def.OutputSchema, outputSchema, false, schemaLimits{lim.MaxSchemaBytes, lim.Output.MaxDepth}); err != nil {
			return nil, err
		}
	}
	if def.Condition != "" {
		if e.cond, e.readsHistory, err = compileCondition(def.Name, def.Condition, o.costLimit); err != nil {
			return nil, err
		}
	}
	e.hash = ContentHash(&e.def)
	e.schema = tool.Schema{
		Name:         e.def.Name,
		Description:  e.def.Description,
		Parameters:   slices.Clip(e.def.Parameters),
		DeferLoading: e.def.DeferLoading,
		ContentHash:  e.hash,
	}
	e.projDigest = projectionDigest(&e.schema)
	return e, nil
}

// checkDefinition refuses a definition over the size limits or one no provider can
// mean. Over gRPC only the sizes are judged here: text that is not UTF-8, an unknown
// mode and a negative timeout or max content are refused (or repaired) before a
// definition reaches the registry.
func checkDefinition(def *tool.Definition, lim *Limits) error {
	t := "tool " + quoteName(def.Name)
	switch {
	case len(def.Description) > lim.MaxDescriptionBytes:
		return fmt.Errorf("%w: %s description is %d bytes, over the limit of %d", ErrLimit, t, len(def.Description), lim.MaxDescriptionBytes)
	case !utf8.ValidString(def.Description):
		return fmt.Errorf("%w: %s description is not valid UTF-8", ErrInvalidDefinition, t)
	case len(def.Condition) > lim.MaxConditionBytes:
		return fmt.Errorf("%w: %s condition is %d bytes, over the limit of %d", ErrLimit, t, len(def.Condition), lim.MaxConditionBytes)
	case !utf8.ValidString(def.Condition):
		return fmt.Errorf("%w: %s condition is not valid UTF-8", ErrInvalidDefinition, t)
	case len(def.Annotations.Title) > lim.MaxDescriptionBytes:
		return fmt.Errorf("%w: %s annotation title is %d bytes, over the limit of %d", ErrLimit, t, len(def.Annotations.Title), lim.MaxDescriptionBytes)
	case !utf8.ValidString(def.Annotations.Title):
		return fmt.Errorf("%w: %s annotation title is not valid UTF-8", ErrInvalidDefinition, t)
	case def.Mode < tool.ModeUnspecified || def.Mode > tool.ModeExclusive:
		return fmt.Errorf("%w: %s unknown mode %d", ErrInvalidDefinition, t, def.Mode)
	case def.Timeout < 0:
		return fmt.Errorf("%w: %s negative timeout", ErrInvalidDefinition, t)
	case def.MaxContentBytes < 0:
		return fmt.Errorf("%w: %s negative max content bytes", ErrInvalidDefinition, t)
	}
	return nil
}
