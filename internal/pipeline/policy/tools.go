package policy

import (
	"context"
	"fmt"
	"time"

	"cel.dev/cel-go/cel"
	"gopkg.in/yaml.v3"

	"github.com/toolsd/toolsd/internal/pipeline"
	"github.com/toolsd/toolsd/internal/tool"
)

// tools parses the per-tool settings mapping into dst.
func (p *parser) tools(v *yaml.Node, path string, dst map[string]pipeline.ToolSettings) {
	if isNull(v) {
		return
	}
	if v.Kind != yaml.MappingNode {
		p.add(v, path, "must be a mapping of tool names to settings")
		return
	}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, sv := v.Content[i], deref(v.Content[i+1])
		tp := path + "." + k.Value
		if _, dup := dst[k.Value]; dup {
			p.add(k, tp, "duplicate tool")
			continue
		}
		if sv.Kind != yaml.MappingNode {
			p.add(sv, tp, "must be a mapping")
			continue
		}
		if why := tool.NameProblem(k.Value); why != "" {
			// Keys are exact names: "fs_*" would apply to no tool.
			p.add(k, tp, "no tool can have this name (keys are exact names, not globs): %s", why)
		}
		dst[k.Value] = p.toolSettings(k, sv, tp)
	}
}

func (p *parser) toolSettings(k, sv *yaml.Node, tp string) pipeline.ToolSettings {
	var ts pipeline.ToolSettings
	p.fields(sv, tp, map[string]func(*yaml.Node, string){
		"timeout": func(v *yaml.Node, path string) {
			s, ok := p.str(v, path)
			if !ok {
				return
			}
			d, err := time.ParseDuration(s)
			if err != nil || d <= 0 {
				p.add(v, path, "must be a positive duration like 2s or 500ms")
				return
			}
			ts.Timeout = d
		},
		"mode": func(v *yaml.Node, path string) {
			s, ok := p.str(v, path)
			if !ok {
				return
			}
			m, err := parseMode(s)
			if err != nil {
				p.add(v, path, "%v", err)
			}
			ts.Mode = m
		},
		"mode_when": func(v *yaml.Node, path string) {
			where := fmt.Sprintf("%s:%d:%d: %s", p.source, v.Line, v.Column, path)
			if prg := p.cel(v, path, cel.StringType); prg != nil {
				ts.ModeFunc = modeFunc(prg, where)
			}
		},
		"idempotent": func(v *yaml.Node, path string) { ts.Idempotent = p.boolean(v, path) },
		"max_result_bytes": func(v *yaml.Node, path string) {
			switch ts.MaxResultBytes = p.size(v, path); {
			case ts.MaxResultBytes > tool.MaxResultBytes:
				p.add(v, path, "%d bytes, over the most, %d (8MiB, as limits.max_result_bytes)", ts.MaxResultBytes, tool.MaxResultBytes)
			case p.maxResult > 0 && ts.MaxResultBytes > p.maxResult:
				// A provider's larger result is refused before this limit applies.
				p.add(v, path, "%d bytes, over limits.max_result_bytes (%d): a tool's limit can only lower it", ts.MaxResultBytes, p.maxResult)
			}
		},
	})
	if ts.Mode != tool.ModeUnspecified && ts.ModeFunc != nil {
		p.add(k, tp, "mode and mode_when are mutually exclusive")
	}
	return ts
}

func parseMode(s string) (tool.Mode, error) {
	switch s {
	case "parallel":
		return tool.ModeParallel, nil
	case "exclusive":
		return tool.ModeExclusive, nil
	}
	return tool.ModeUnspecified, fmt.Errorf("unknown mode %q (want parallel or exclusive)", s)
}

// modeFunc evaluates a mode expression per call; where locates it in errors.
func modeFunc(prg cel.Program, where string) func(context.Context, *tool.Call) (tool.Mode, error) {
	return func(ctx context.Context, c *tool.Call) (tool.Mode, error) {
		act, err := vars(c)
		if err != nil {
			return tool.ModeUnspecified, fmt.Errorf("policy: %s: %w", where, err)
		}
		s, err := evalString(ctx, prg, act)
		if err != nil {
			return tool.ModeUnspecified, fmt.Errorf("policy: %s: %w", where, err)
		}
		m, err := parseMode(s)
		if err != nil {
			// s may be the model's text (mode_when: 'args.mode'), quoted whole: cut as
			// an evaluation error is.
			return tool.ModeUnspecified, fmt.Errorf("policy: %s: %w", where, evalError(err))
		}
		return m, nil
	}
}
