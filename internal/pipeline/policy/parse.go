package policy

import (
	"fmt"
	"math"
	"strings"

	"cel.dev/cel-go/cel"
	"gopkg.in/yaml.v3"

	"github.com/toolsd/toolsd/internal/config"
	"github.com/toolsd/toolsd/internal/glob"
	"github.com/toolsd/toolsd/internal/pipeline"
)

// Parse parses a policy section. data is either the section itself or a whole config
// document with a top-level `policy:` key (its other keys are left to their owners).
// source names the file in error positions ("config.yaml:12:7: policy.rules[2].when: …").
// Every problem found is reported, joined; each matches [ErrInvalid].
func Parse(data []byte, source string, opts ...ParseOption) (*Set, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w: %w", source, ErrInvalid, err)
	}
	n := &doc
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == "policy" {
				n = n.Content[i+1]
				break
			}
		}
	}
	return ParseNode(n, source, opts...)
}

// ParseOption tells [Parse] and [ParseNode] about the rest of the configuration.
type ParseOption func(*parser)

// WithMaxResultBytes refuses a tool's max_result_bytes over n, the limit every result
// is held to before the tool's own applies (limits.max_result_bytes): a tool's limit can
// only lower it. 0 means no bound but the most, 8MiB.
func WithMaxResultBytes(n int) ParseOption {
	return func(p *parser) { p.maxResult = n }
}

// ParseNode parses a policy section already decoded as a YAML node (the config loader
// keeps the section raw so positions refer to the original file). A nil, empty or null
// node gives an empty set: default allow, no rules, no tool settings.
func ParseNode(n *yaml.Node, source string, opts ...ParseOption) (*Set, error) {
	s := &Set{source: source, def: pipeline.Allow, tools: map[string]pipeline.ToolSettings{}}
	n = deref(n)
	if n != nil && n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = deref(n.Content[0])
	}
	if n == nil || n.Kind == 0 || isNull(n) || n.Kind == yaml.DocumentNode {
		return s, nil
	}
	p := &parser{errs: errs{source: source}}
	for _, o := range opts {
		o(p)
	}
	if n.Kind != yaml.MappingNode {
		p.add(n, section, "must be a mapping")
		return nil, p.err()
	}
	p.fields(n, section, map[string]func(*yaml.Node, string){
		"default": func(v *yaml.Node, path string) { s.def = p.decision(v, path) },
		"rules":   func(v *yaml.Node, path string) { s.rules = p.items(v, path, "rules", p.rule) },
		"guards":  func(v *yaml.Node, path string) { s.guards = guardsOf(p.items(v, path, "guards", p.guard)) },
		"tools":   func(v *yaml.Node, path string) { p.tools(v, path, s.tools) },
	})
	if err := p.err(); err != nil {
		return nil, err
	}
	return s, nil
}

// section is the policy's key in the config file: errors name a field by its full key
// ("policy.rules[2].when"), as the config loader names every other key.
const section = "policy"

type parser struct {
	errs
	// maxResult bounds a tool's max_result_bytes (0: tool.MaxResultBytes alone).
	maxResult int
}

// items parses a list of rules or guards (what), each item by item; items with errors
// are reported and left out.
func (p *parser) items(v *yaml.Node, path, what string, item func(*yaml.Node, string) (rule, bool)) []rule {
	if isNull(v) {
		return nil
	}
	if v.Kind != yaml.SequenceNode {
		p.add(v, path, "must be a list of %s", what)
		return nil
	}
	out := make([]rule, 0, len(v.Content))
	for i, n := range v.Content {
		rp := fmt.Sprintf("%s[%d]", path, i)
		if n = deref(n); n.Kind != yaml.MappingNode {
			p.add(n, rp, "must be a mapping")
			continue
		}
		if r, ok := item(n, rp); ok {
			out = append(out, r)
		}
	}
	return out
}

func (p *parser) rule(item *yaml.Node, rp string) (rule, bool) {
	before := len(p.list)
	r := rule{scope: anyScope, tool: anyTool}
	hasDecision := false
	fields := p.ruleFields(&r)
	fields["decision"] = func(v *yaml.Node, path string) {
		hasDecision = true
		if r.verdict.Decision = p.decision(v, path); r.verdict.Decision == pipeline.Abstain {
			r.verdict.Decision = pipeline.Deny // reported; keep the rule fail-closed
		}
	}
	p.fields(item, rp, fields)
	if !hasDecision {
		p.add(item, rp+".decision", "missing (want allow, deny or ask)")
	}
	return r, len(p.list) == before
}

// guard parses one guard: a rule without a decision, which only denies.
func (p *parser) guard(item *yaml.Node, gp string) (rule, bool) {
	before := len(p.list)
	// Named by its position in the section, as its denials say: "guards[0]".
	r := rule{name: strings.TrimPrefix(gp, section+"."), scope: anyScope, tool: anyTool, verdict: pipeline.Verdict{Decision: pipeline.Deny}}
	fields := p.ruleFields(&r)
	fields["decision"] = func(v *yaml.Node, path string) {
		p.add(v, path, "a guard only denies and takes no decision (allow and ask are for rules)")
	}
	p.fields(item, gp, fields)
	return r, len(p.list) == before
}

// ruleFields are the handlers of the fields rules and guards share: what they match
// (scope, tool, when) and how a denial reads (reason, user_reason, private).
func (p *parser) ruleFields(r *rule) map[string]func(*yaml.Node, string) {
	globField := func(mk func(string) (glob.Pattern, error), dst *glob.Pattern) func(*yaml.Node, string) {
		return func(v *yaml.Node, path string) {
			if s, ok := p.str(v, path); ok {
				g, err := mk(s)
				if err != nil {
					p.add(v, path, "bad glob %q: %v", s, err)
				}
				*dst = g
			}
		}
	}
	return map[string]func(*yaml.Node, string){
		"scope": globField(scopeGlob, &r.scope),
		"tool": func(v *yaml.Node, path string) {
			if v.Kind == yaml.ScalarNode && !isNull(v) && v.Value == "" { // no tool has that name
				p.add(v, path, "must not be empty (\"*\" matches every tool)")
				return
			}
			globField(toolGlob, &r.tool)(v, path)
		},
		"when": func(v *yaml.Node, path string) {
			r.where = fmt.Sprintf("%s:%d:%d: %s", p.source, v.Line, v.Column, path)
			r.when = p.cel(v, path, cel.BoolType)
		},
		"reason":      func(v *yaml.Node, path string) { r.verdict.Reason, _ = p.str(v, path) },
		"user_reason": func(v *yaml.Node, path string) { r.verdict.UserReason, _ = p.str(v, path) },
		"private":     func(v *yaml.Node, path string) { r.verdict.Private = p.boolean(v, path) },
	}
}

// decision parses allow | deny | ask; errors are reported and yield Abstain.
func (p *parser) decision(v *yaml.Node, path string) pipeline.Decision {
	s, ok := p.str(v, path)
	if !ok {
		return pipeline.Abstain
	}
	switch s {
	case "allow":
		return pipeline.Allow
	case "deny":
		return pipeline.Deny
	case "ask":
		return pipeline.Ask
	}
	p.add(v, path, "unknown decision %q (want allow, deny or ask)", s)
	return pipeline.Abstain
}

func (p *parser) cel(v *yaml.Node, path string, want *cel.Type) cel.Program {
	expr, ok := p.str(v, path)
	if !ok {
		return nil
	}
	if expr == "" {
		p.add(v, path, "empty expression")
		return nil
	}
	prg, err := compile(expr, want)
	if err != nil {
		p.add(v, path, "%v", err)
		return nil
	}
	return prg
}

// fields walks a mapping, dispatching each key to its handler; unknown and duplicate
// keys are errors at the key's position.
func (p *parser) fields(n *yaml.Node, path string, handlers map[string]func(*yaml.Node, string)) {
	seen := make(map[string]bool, len(handlers))
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], deref(n.Content[i+1])
		fp := path + "." + k.Value
		h, ok := handlers[k.Value]
		switch {
		case !ok:
			p.add(k, fp, "unknown field")
		case seen[k.Value]:
			p.add(k, fp, "duplicate field")
		default:
			seen[k.Value] = true
			h(v, fp)
		}
	}
}

func (p *parser) str(v *yaml.Node, path string) (string, bool) {
	if v.Kind != yaml.ScalarNode || isNull(v) {
		p.add(v, path, "must be a string")
		return "", false
	}
	return v.Value, true
}

func (p *parser) boolean(v *yaml.Node, path string) bool {
	var b bool
	if v.Kind != yaml.ScalarNode || v.Tag != "!!bool" || v.Decode(&b) != nil {
		p.add(v, path, "must be true or false")
	}
	return b
}

// size reads a positive byte count written as the config writes sizes: 65536, 64KiB.
func (p *parser) size(v *yaml.Node, path string) int {
	if v.Kind == yaml.ScalarNode && (v.Tag == "!!int" || v.Tag == "!!str") {
		if n, err := config.ParseSize(v.Value); err == nil && n > 0 && n <= math.MaxInt32 {
			return int(n)
		}
	}
	p.add(v, path, "must be a positive byte count like 65536 or 64KiB")
	return 0
}

func deref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }
