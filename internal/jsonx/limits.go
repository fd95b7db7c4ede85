package jsonx

// Defaults applied to zero (or negative) [Limits] fields.
const (
	DefaultMaxBytes = 1 << 20
	DefaultMaxDepth = 64
	// MaxDepthCeiling bounds the recursion of the parser whatever the caller asks for.
	MaxDepthCeiling = 10000
)

// Bounds on one number, whatever the limits. Schema validation computes with exact
// rationals, whose cost grows with the digits and the exponent (1e999999 takes seconds,
// a larger exponent makes the validator fail); no float64 needs more than these.
const (
	MaxNumberLen = 128
	MaxExponent  = 400
)

// Limits bound one document. Zero fields take the defaults (1 MiB, depth 64).
type Limits struct {
	// MaxBytes is the largest accepted input, in bytes.
	MaxBytes int
	// MaxDepth is the deepest accepted nesting of objects and arrays; a top-level object
	// is depth 1. Values above 10000 are capped at 10000.
	MaxDepth int
}

// WithDefaults returns l with zero fields replaced by the defaults.
func (l Limits) WithDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultMaxDepth
	}
	if l.MaxDepth > MaxDepthCeiling {
		l.MaxDepth = MaxDepthCeiling
	}
	return l
}
