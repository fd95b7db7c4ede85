package broker

import (
	"encoding/json"
	"fmt"
	"math"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/tool"
)

// DefinitionFromProto maps the wire definition to the shared vocabulary. Schemas stay the
// exact bytes the provider sent; judging them is the registrar's job. Only what the
// mapping itself cannot represent honestly (negative durations and sizes) fails here.
// Both registration paths — a provider's stream and the unary RegisterTool — use it.
func DefinitionFromProto(d *toolsdv1.ToolDefinition) (tool.Definition, error) {
	def := tool.Definition{
		Name:         d.GetName(),
		Description:  d.GetDescription(),
		Parameters:   rawJSON(d.GetParametersJson()),
		OutputSchema: rawJSON(d.GetOutputSchemaJson()),
		Mode:         modeFrom(d.GetMode()),
		DeferLoading: d.GetDeferLoading(),
		Condition:    d.GetCondition(),
	}
	if t := d.GetTimeout(); t != nil {
		if err := t.CheckValid(); err != nil {
			return def, fmt.Errorf("broker: tool %q: invalid timeout: %w", def.Name, err)
		}
		if def.Timeout = t.AsDuration(); def.Timeout < 0 {
			return def, fmt.Errorf("broker: tool %q: timeout %s is negative", def.Name, def.Timeout)
		}
	}
	switch n := d.GetMaxContentBytes(); {
	case n < 0:
		return def, fmt.Errorf("broker: tool %q: max_content_bytes %d is negative", def.Name, n)
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

func rawJSON(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(s)
}

func modeFrom(m toolsdv1.ExecutionMode) tool.Mode {
	switch m {
	case toolsdv1.ExecutionMode_EXECUTION_MODE_PARALLEL:
		return tool.ModeParallel
	case toolsdv1.ExecutionMode_EXECUTION_MODE_EXCLUSIVE:
		return tool.ModeExclusive
	default:
		return tool.ModeUnspecified
	}
}
