package tool

import (
	"encoding/json"
	"time"
)

// Mode is a tool's concurrency mode inside one batch.
type Mode int

const (
	// ModeUnspecified defers to operator config, then to [ModeParallel].
	ModeUnspecified Mode = iota
	// ModeParallel calls share the batch's bounded rolling pool.
	ModeParallel
	// ModeExclusive calls are barriers: they wait for the pool to drain and run alone.
	ModeExclusive
)

// String returns the mode as config files and logs spell it.
func (m Mode) String() string {
	switch m {
	case ModeParallel:
		return "parallel"
	case ModeExclusive:
		return "exclusive"
	default:
		return "unspecified"
	}
}

// Annotations are provider-supplied hints (MCP's tool annotations). They never decide
// policy or scheduling on their own: the operator's config does.
type Annotations struct {
	Title       string
	ReadOnly    bool
	Destructive bool
	Idempotent  bool
	OpenWorld   bool
}

// Definition is one tool as its provider declares it. Parameters and OutputSchema are
// the exact JSON bytes the provider sent: they reach the prompt byte-stable.
type Definition struct {
	Name        string
	Description string
	// Parameters is the JSON Schema of the arguments; its root must be an object schema.
	Parameters json.RawMessage
	// OutputSchema optionally constrains the tool's JSON value.
	OutputSchema json.RawMessage
	Mode         Mode
	// Timeout is the definition's own deadline; zero means the configured default.
	Timeout      time.Duration
	Annotations  Annotations
	DeferLoading bool
	// Condition is an optional CEL expression evaluated once per step (conditional tools).
	Condition string
	// MaxContentBytes, when positive, truncates model-facing content at finalization
	// with an explicit marker.
	MaxContentBytes int
}

// Schema is the model-facing projection of a definition: nothing else reaches a prompt.
type Schema struct {
	Name         string
	Description  string
	Parameters   json.RawMessage
	DeferLoading bool
	// ContentHash pins the registration (name, description, schemas, annotations).
	ContentHash string
}
