package broker

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"google.golang.org/protobuf/types/known/durationpb"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/textcut"
	"github.com/toolsd/toolsd/internal/tool"
)

// maxQuotedName bounds the tool name a refusal quotes: the name is the provider's, of
// any size its message may have, and the refusal's status names the tool already.
const maxQuotedName = 64

// DefinitionError is a definition [DefinitionFromProto] cannot map. Field names the
// offending field of the ToolDefinition ("mode", "timeout", "max_content_bytes").
type DefinitionError struct {
	Field string
	err   error
}

func (e *DefinitionError) Error() string { return e.err.Error() }
func (e *DefinitionError) Unwrap() error { return e.err }

func definitionError(field, format string, args ...any) error {
	return &DefinitionError{Field: field, err: fmt.Errorf(format, args...)}
}

// DefinitionFromProto maps the wire definition to the shared vocabulary. Schemas stay the
// exact bytes the provider sent; judging them is the registrar's job. Only what the
// mapping itself cannot represent honestly (negative durations and sizes, a mode that is
// no ExecutionMode) fails here, with a [*DefinitionError].
// Both registration paths — a provider's stream and the unary RegisterTool — use it.
func DefinitionFromProto(d *toolsdv1.ToolDefinition) (tool.Definition, error) {
	def := tool.Definition{
		Name:         d.GetName(),
		Description:  d.GetDescription(),
		Parameters:   rawJSON(d.GetParametersJson()),
		OutputSchema: rawJSON(d.GetOutputSchemaJson()),
		DeferLoading: d.GetDeferLoading(),
		Condition:    d.GetCondition(),
	}
	mode, ok := modeFrom(d.GetMode())
	if !ok {
		// Run as unspecified, a newer client's mode (say, one stricter than exclusive)
		// would be scheduled in parallel.
		return def, definitionError("mode", "tool %s: mode %d is not an ExecutionMode (EXECUTION_MODE_UNSPECIFIED, EXECUTION_MODE_PARALLEL or EXECUTION_MODE_EXCLUSIVE)",
			quoteName(def.Name), int32(d.GetMode()))
	}
	def.Mode = mode
	if t := d.GetTimeout(); t != nil {
		if why := durationProblem(t); why != "" {
			return def, definitionError("timeout", "tool %s: timeout is not a valid duration: %s", quoteName(def.Name), why)
		}
		if def.Timeout = t.AsDuration(); def.Timeout < 0 {
			return def, definitionError("timeout", "tool %s: timeout %s is negative", quoteName(def.Name), def.Timeout)
		}
	}
	switch n := d.GetMaxContentBytes(); {
	case n < 0:
		return def, definitionError("max_content_bytes", "tool %s: max_content_bytes %d is negative", quoteName(def.Name), n)
	case n > math.MaxInt:
		def.MaxContentBytes = math.MaxInt
	default:
		def.MaxContentBytes = int(n)
	}
	if a := d.GetAnnotations(); a != nil {
		def.Annotations = tool.Annotations{
			Title:       a.GetTitle(),
			ReadOnly:    a.GetReadOnlyHint(),
			Destructive: a.GetDestructiveHint(),
			Idempotent:  a.GetIdempotentHint(),
			OpenWorld:   a.GetOpenWorldHint(),
		}
	}
	return def, nil
}

// maxDurationSeconds bounds a google.protobuf.Duration's seconds: 10,000 years.
const maxDurationSeconds = 315_576_000_000

// durationProblem says what makes d no valid google.protobuf.Duration, in its fields'
// terms, or "" when it is valid. It checks what d.CheckValid checks; that error quotes d
// in protobuf's text format ("proto: duration (seconds:1 nanos:-1) has ...").
func durationProblem(d *durationpb.Duration) string {
	if d.CheckValid() == nil {
		return ""
	}
	s, n := d.GetSeconds(), d.GetNanos()
	switch {
	case s < -maxDurationSeconds || s > maxDurationSeconds:
		return fmt.Sprintf("seconds %d is not within ±%d (10000 years)", s, int64(maxDurationSeconds))
	case n <= -1e9 || n >= 1e9:
		return fmt.Sprintf("nanos %d is not within ±999999999", n)
	case s > 0 && n < 0 || s < 0 && n > 0:
		return fmt.Sprintf("seconds %d and nanos %d have different signs", s, n)
	}
	return fmt.Sprintf("seconds %d, nanos %d", s, n)
}

// quoteName quotes a tool name for an error, cut at maxQuotedName bytes.
func quoteName(name string) string { return strconv.Quote(textcut.Ellipsis(name, maxQuotedName)) }

func rawJSON(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(s)
}

// modeFrom maps a wire mode; ok is false for a value ExecutionMode does not define.
func modeFrom(m toolsdv1.ExecutionMode) (_ tool.Mode, ok bool) {
	switch m {
	case toolsdv1.ExecutionMode_EXECUTION_MODE_UNSPECIFIED:
		return tool.ModeUnspecified, true
	case toolsdv1.ExecutionMode_EXECUTION_MODE_PARALLEL:
		return tool.ModeParallel, true
	case toolsdv1.ExecutionMode_EXECUTION_MODE_EXCLUSIVE:
		return tool.ModeExclusive, true
	default:
		return tool.ModeUnspecified, false
	}
}
