package policy_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/toolsd/toolsd/internal/pipeline"
	"github.com/toolsd/toolsd/internal/pipeline/policy"
	"github.com/toolsd/toolsd/internal/tool"
)

const example = `listen: 127.0.0.1:7000
policy:
  default: allow            # allow | deny | ask when every participant abstains
  rules:
    - scope: "*"
      tool: "echo"
      when: 'args.text.contains("forbidden")'
      decision: deny
      reason: "echo may not say forbidden"
      private: false
  tools:
    sleep:   { timeout: 2s }
    write_note: { mode: exclusive, idempotent: false, max_result_bytes: 64KiB }
    fetch: { idempotent: true }
    shell:   { mode_when: 'args.command.startsWith("ls") ? "parallel" : "exclusive"' }
`

func exec(scope, name, args string) *tool.Exec {
	return &tool.Exec{Call: tool.Call{Scope: scope, Name: name, Arguments: args}}
}

func TestParseExample(t *testing.T) {
	s, err := policy.Parse([]byte(example), "config.yaml")
	if err != nil {
		t.Fatalf("Parse(example) error = %v", err)
	}
	if s.DefaultDecision() != pipeline.Allow || s.Rules() != 1 {
		t.Errorf("Parse(example) default %s with %d rules, want allow with 1", s.DefaultDecision(), s.Rules())
	}
	ctx := t.Context()
	deny := s.PreExecute(ctx, exec("global", "echo", `{"text":"a forbidden word"}`), nil)
	if want := (pipeline.Verdict{Decision: pipeline.Deny, Reason: "echo may not say forbidden"}); deny != want {
		t.Errorf("PreExecute(forbidden echo) = %+v, want %+v", deny, want)
	}
	for _, e := range []*tool.Exec{exec("global", "echo", `{"text":"hello"}`), exec("global", "cat", `{"text":"forbidden"}`)} {
		if v := s.PreExecute(ctx, e, nil); v.Decision != pipeline.Abstain {
			t.Errorf("PreExecute(%s %s) = %+v, want abstain", e.Name, e.Arguments, v)
		}
	}
	if got := s.Tool("global", "sleep"); got.Timeout != 2*time.Second {
		t.Errorf("Tool(sleep).Timeout = %v, want 2s", got.Timeout)
	}
	if got := s.Tool("global", "write_note"); got.Mode != tool.ModeExclusive || got.MaxResultBytes != 65536 || got.Idempotent {
		t.Errorf("Tool(write_note) = %+v, want exclusive, 65536 bytes, not idempotent", got)
	}
	if got := s.Tool("global", "fetch"); !got.Idempotent {
		t.Errorf("Tool(fetch).Idempotent = false, want true")
	}
	// A tools entry has no scope (README): a tenant's own fetch is marked as well.
	if got := s.Tool("tenant-a/bot", "fetch"); !got.Idempotent {
		t.Errorf("Tool(tenant-a/bot, fetch).Idempotent = false, want true: tools entries apply in every scope")
	}
	shell := s.Tool("global", "shell")
	modes := map[string]tool.Mode{`{"command":"ls -la"}`: tool.ModeParallel, `{"command":"rm -rf /"}`: tool.ModeExclusive}
	for args, want := range modes {
		if got, err := shell.ModeFunc(ctx, &tool.Call{Name: "shell", Arguments: args}); got != want || err != nil {
			t.Errorf("Tool(shell).ModeFunc(%s) = %s, %v; want %s", args, got, err, want)
		}
	}
	if _, err := shell.ModeFunc(ctx, &tool.Call{Name: "shell", Arguments: `{}`}); err == nil || !strings.Contains(err.Error(), "config.yaml:15:27: policy.tools.shell.mode_when") {
		t.Errorf("Tool(shell).ModeFunc({}) error = %v, want the expression's location", err)
	}
}

func TestParseNodeKeepsFilePositions(t *testing.T) {
	var cfg struct {
		Listen string    `yaml:"listen"`
		Policy yaml.Node `yaml:"policy"`
	}
	doc := strings.Replace(example, "decision: deny", "decision: maybe", 1)
	if err := yaml.Unmarshal([]byte(doc), &cfg); err != nil {
		t.Fatal(err)
	}
	_, err := policy.ParseNode(&cfg.Policy, "config.yaml")
	want := `config.yaml:8:17: policy.rules[0].decision: unknown decision "maybe" (want allow, deny or ask)`
	if err == nil || err.Error() != want {
		t.Errorf("ParseNode() error = %v, want %s", err, want)
	}
}

func TestParseEmpty(t *testing.T) {
	for name, src := range map[string]string{"empty": "", "null section": "policy:\n"} {
		t.Run(name, func(t *testing.T) {
			s, err := policy.Parse([]byte(src), "config.yaml")
			if err != nil || s.Rules() != 0 || s.DefaultDecision() != pipeline.Allow {
				t.Errorf("Parse(%q) = %d rules default %s, %v; want an empty allow set", src, s.Rules(), s.DefaultDecision(), err)
			}
		})
	}
	var nilSet *policy.Set
	if v := nilSet.PreExecute(t.Context(), exec("", "x", `{}`), nil); v.Decision != pipeline.Abstain || nilSet.DefaultDecision() != pipeline.Allow {
		t.Errorf("nil Set = %+v default %s, want abstain and allow", v, nilSet.DefaultDecision())
	}
}

func TestParseErrors(t *testing.T) {
	tests := map[string]parseErrorCase{
		"bad tool glob": {
			src:  "rules:\n  - tool: \"[bad\"\n    decision: deny\n",
			want: `config.yaml:2:11: policy.rules[0].tool: bad glob "[bad": syntax error in pattern`,
		},
		"tool name no tool can have": {
			src:  "rules:\n  - tool: \"fs read\"\n    decision: deny\n",
			want: `config.yaml:2:11: policy.rules[0].tool: bad glob "fs read": no tool can have this name: invalid character ' ' (allowed: A-Z a-z 0-9 _ - . /)`,
		},
		"tool glob that never matches": {
			src:  "rules:\n  - tool: \"fs:*\"\n    decision: deny\n",
			want: `config.yaml:2:11: policy.rules[0].tool: bad glob "fs:*": can never match: no tool name has ':' (allowed: A-Z a-z 0-9 _ - . /)`,
		},
		"tool glob escaping a star": {
			src:  "rules:\n  - tool: 'fs_\\*'\n    decision: deny\n",
			want: `config.yaml:2:11: policy.rules[0].tool: bad glob "fs_\\*": can never match: no tool name has '*' (allowed: A-Z a-z 0-9 _ - . /)`,
		},
		"tool glob with a character no tool name has": {
			src:  "rules:\n  - tool: \"café_*\"\n    decision: deny\n",
			want: `config.yaml:2:11: policy.rules[0].tool: bad glob "café_*": can never match: no tool name has 'é' (allowed: A-Z a-z 0-9 _ - . /)`,
		},
		"scope glob with a character no scope has": {
			src:  "rules:\n  - scope: \"support/bót*\"\n    decision: deny\n",
			want: `config.yaml:2:12: policy.rules[0].scope: bad glob "support/bót*": can never match: no scope has 'ó' (allowed: A-Z a-z 0-9 _ - .)`,
		},
		"tool name too long": {
			src:  "rules:\n  - tool: " + strings.Repeat("a", 65) + "\n    decision: deny\n",
			want: `config.yaml:2:11: policy.rules[0].tool: bad glob "` + strings.Repeat("a", 65) + `": no tool can have this name: longer than 64 bytes`,
		},
		"tool glob with a class of characters no tool name has": {
			src:  "rules:\n  - tool: \"fs[: ]*\"\n    decision: deny\n",
			want: `config.yaml:2:11: policy.rules[0].tool: bad glob "fs[: ]*": can never match: no tool name has a character of [: ] (allowed: A-Z a-z 0-9 _ - . /)`,
		},
		"tool glob longer than any name": {
			src:  "rules:\n  - tool: " + strings.Repeat("a", 60) + "_?[ab]*??\n    decision: deny\n",
			want: `config.yaml:2:11: policy.rules[0].tool: bad glob "` + strings.Repeat("a", 60) + `_?[ab]*??": can never match: no tool name is longer than 64 bytes`,
		},
		"scope segment glob with a class no scope has": {
			src:  "rules:\n  - scope: \"support/bot[:~]*\"\n    decision: deny\n",
			want: `config.yaml:2:12: policy.rules[0].scope: bad glob "support/bot[:~]*": can never match: no scope has a character of [:~] (allowed: A-Z a-z 0-9 _ - .)`,
		},
		"scope segment glob longer than any": {
			src:  "rules:\n  - scope: \"support/" + strings.Repeat("b", 64) + "?*\"\n    decision: deny\n",
			want: `config.yaml:2:12: policy.rules[0].scope: bad glob "support/` + strings.Repeat("b", 64) + `?*": can never match: no scope has a segment longer than 64 bytes`,
		},
		"scope with a leading slash": {
			src:  "rules:\n  - scope: \"/support/**\"\n    decision: deny\n",
			want: `config.yaml:2:12: policy.rules[0].scope: bad glob "/support/**": can never match: no scope has an empty segment (a leading, trailing or doubled "/"; the global scope is "")`,
		},
		"scope segment no scope has": {
			src:  "rules:\n  - scope: \"support/my bot\"\n    decision: deny\n",
			want: `config.yaml:2:12: policy.rules[0].scope: bad glob "support/my bot": can never match: registry: invalid scope "my bot": invalid character ' '`,
		},
		"scope glob that never matches": {
			src:  "rules:\n  - scope: \"support/bot:*\"\n    decision: deny\n",
			want: `config.yaml:2:12: policy.rules[0].scope: bad glob "support/bot:*": can never match: no scope has ':' (allowed: A-Z a-z 0-9 _ - .)`,
		},
		"scope deeper than any": {
			src:  "rules:\n  - scope: \"a/**/b/c/d/e/f/g/h/*\"\n    decision: deny\n",
			want: `config.yaml:2:12: policy.rules[0].scope: bad glob "a/**/b/c/d/e/f/g/h/*": can never match: no scope is deeper than 8 segments`,
		},
		"tool settings under a glob": {
			src:  "tools:\n  \"fs_*\": {timeout: 2s}\n",
			want: `config.yaml:2:3: policy.tools.fs_*: no tool can have this name (keys are exact names, not globs): invalid character '*' (allowed: A-Z a-z 0-9 _ - . /)`,
		},
		"empty tool glob": {
			src:  "rules:\n  - tool: \"\"\n    decision: deny\n",
			want: `config.yaml:2:11: policy.rules[0].tool: must not be empty ("*" matches every tool)`,
		},
		"bad scope glob": {
			src:  "rules:\n  - scope: \"agents/[\"\n    decision: deny\n",
			want: `config.yaml:2:12: policy.rules[0].scope: bad glob "agents/[": syntax error in pattern`,
		},
		"CEL syntax": {
			src:  "rules:\n  - decision: deny\n  - when: 'args.text +'\n    decision: deny\n",
			want: "config.yaml:3:11: policy.rules[1].when: ERROR: <input>:1:12: Syntax error…",
		},
		"CEL type": {
			src:  "rules:\n  - when: 'args.text + \"x\"'\n    decision: deny\n",
			want: "config.yaml:2:11: policy.rules[0].when: expression has type string, want bool",
		},
		"CEL undeclared": {
			src:  "rules:\n  - when: 'user == \"bob\"'\n    decision: deny\n",
			want: "config.yaml:2:11: policy.rules[0].when: ERROR: <input>:1:1: undeclared reference to 'user'…",
		},
		"CEL pattern from the arguments": {
			src:  "rules:\n  - when: 'args.text.matches(args.re)'\n    decision: deny\n",
			want: "config.yaml:2:11: policy.rules[0].when: ERROR: <input>:1:23: the pattern of matches must be a string literal…",
		},
		"unknown decision": {
			src:  "rules:\n  - decision: perhaps\n",
			want: `config.yaml:2:15: policy.rules[0].decision: unknown decision "perhaps" (want allow, deny or ask)`,
		},
		"missing decision": {
			src:  "rules:\n  - tool: echo\n",
			want: "config.yaml:2:5: policy.rules[0].decision: missing (want allow, deny or ask)",
		},
		"unknown rule field": {
			src:  "rules:\n  - tool: echo\n    verdict: deny\n    decision: deny\n",
			want: "config.yaml:3:5: policy.rules[0].verdict: unknown field",
		},
		"duplicate field": {
			src:  "rules:\n  - decision: deny\n    decision: allow\n",
			want: "config.yaml:3:5: policy.rules[0].decision: duplicate field",
		},
		"unknown top-level field": {
			src:  "default: allow\nrule: []\n",
			want: "config.yaml:2:1: policy.rule: unknown field",
		},
		"bad default": {
			src:  "default: maybe\n",
			want: `config.yaml:1:10: policy.default: unknown decision "maybe" (want allow, deny or ask)`,
		},
		"private not bool": {
			src:  "rules:\n  - decision: deny\n    private: yes please\n",
			want: "config.yaml:3:14: policy.rules[0].private: must be true or false",
		},
		"rules not a list": {
			src:  "rules: {tool: echo}\n",
			want: "config.yaml:1:8: policy.rules: must be a list of rules",
		},
		"unknown mode": {
			src:  "tools:\n  shell: {mode: serial}\n",
			want: `config.yaml:2:17: policy.tools.shell.mode: unknown mode "serial" (want parallel or exclusive)`,
		},
		"bad timeout": {
			src:  "tools:\n  sleep: {timeout: forever}\n",
			want: "config.yaml:2:20: policy.tools.sleep.timeout: must be a positive duration like 2s or 500ms",
		},
		"bad max_result_bytes": {
			src:  "tools:\n  cat: {max_result_bytes: -1}\n",
			want: "config.yaml:2:27: policy.tools.cat.max_result_bytes: must be a positive byte count like 65536 or 64KiB",
		},
		"max_result_bytes not a size": {
			src:  "tools:\n  cat: {max_result_bytes: 64KB}\n",
			want: "config.yaml:2:27: policy.tools.cat.max_result_bytes: must be a positive byte count like 65536 or 64KiB",
		},
		"max_result_bytes over 8MiB as a size": {
			src:  "tools:\n  cat: {max_result_bytes: 9MiB}\n",
			want: "config.yaml:2:27: policy.tools.cat.max_result_bytes: 9437184 bytes, over the most, 8388608 (8MiB, as limits.max_result_bytes)",
		},
		"max_result_bytes over 8MiB": {
			src:  "tools:\n  cat: {max_result_bytes: 8388609}\n",
			want: "config.yaml:2:27: policy.tools.cat.max_result_bytes: 8388609 bytes, over the most, 8388608 (8MiB, as limits.max_result_bytes)",
		},
		"too deeply nested to parse": {
			src:  "rules:\n  - when: '" + strings.Repeat("(", 300) + "true" + strings.Repeat(")", 300) + "'\n    decision: deny\n",
			want: "config.yaml:2:11: policy.rules[0].when: ERROR: <input>:1:1: expression recursion limit exceeded: 250",
		},
		"macros nested too deep": {
			src:  "rules:\n  - when: '" + strings.Repeat("[1].all(x, ", 9) + "true" + strings.Repeat(")", 9) + "'\n    decision: deny\n",
			want: "config.yaml:2:11: policy.rules[0].when: ERROR: <input>:1:96: macros (all, exists, map, ...) nest more than 8 deep",
		},
		"literals nested too deep": {
			src:  "rules:\n  - when: 'size(" + strings.Repeat("[", 17) + strings.Repeat("]", 17) + ") > 0'\n    decision: deny\n",
			want: "config.yaml:2:11: policy.rules[0].when: ERROR: <input>:1:22: list and map literals nest more than 16 deep",
		},
		"mode and mode_when": {
			src:  "tools:\n  shell:\n    mode: parallel\n    mode_when: '\"exclusive\"'\n",
			want: "config.yaml:2:3: policy.tools.shell: mode and mode_when are mutually exclusive",
		},
		"mode_when not a string": {
			src:  "tools:\n  shell: {mode_when: 'args.n > 1'}\n",
			want: "config.yaml:2:22: policy.tools.shell.mode_when: expression has type bool, want string",
		},
		"unknown tool field": {
			src:  "tools:\n  shell: {retries: 3}\n",
			want: "config.yaml:2:11: policy.tools.shell.retries: unknown field",
		},
		"section not a mapping": {
			src:  "policy: [allow]\n",
			want: "config.yaml:1:9: policy: must be a mapping",
		},
	}
	checkParseErrors(t, tests)
}

func TestParseReportsEveryError(t *testing.T) {
	_, err := policy.Parse([]byte("default: no\nrules:\n  - decision: x\n  - tool: '['\n    decision: deny\n"), "p.yaml")
	var perr *policy.Error
	if !errors.As(err, &perr) {
		t.Fatalf("Parse() error = %v, want *policy.Error", err)
	}
	if n := strings.Count(err.Error(), "p.yaml:"); n != 3 {
		t.Errorf("Parse() reported %d problems, want 3:\n%v", n, err)
	}
}

func TestParseYAMLSyntax(t *testing.T) {
	_, err := policy.Parse([]byte("rules: [\n"), "config.yaml")
	if !errors.Is(err, policy.ErrInvalid) || !strings.HasPrefix(err.Error(), "config.yaml: ") {
		t.Errorf("Parse(broken yaml) error = %v, want ErrInvalid prefixed with the source", err)
	}
}

// TestParseAcceptsPatternsThatCanMatch: the check refusing patterns no tool or scope
// can match leaves the ones some can alone, escapes and classes included.
func TestParseAcceptsPatternsThatCanMatch(t *testing.T) {
	for _, r := range [][2]string{
		{"**", "fs_[a-z]*"}, {"*", `fs\.read`}, {"team-?/**/x.y", "a/b/c"}, {"", "[^ ]"},
		{"a/b/c/d/e/f/g/h", "*"}, {"a/**/b/c/d/e/f/g/h", `\a`},
	} {
		src := fmt.Sprintf("rules:\n  - scope: %q\n    tool: %q\n    decision: deny\n", r[0], r[1])
		if _, err := policy.Parse([]byte(src), "config.yaml"); err != nil {
			t.Errorf("Parse(scope %q, tool %q) error = %v, want none", r[0], r[1], err)
		}
	}
}
