package registry_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/toolsd/toolsd/internal/registry"
)

func TestValidateScope(t *testing.T) {
	seg64 := strings.Repeat("s", 64)
	tests := map[string]struct {
		scope string
		ok    bool
	}{
		"global":             {scope: "", ok: true},
		"one segment":        {scope: "preset", ok: true},
		"nested":             {scope: "preset/agent-1/sub_2.v3", ok: true},
		"eight deep":         {scope: "a/b/c/d/e/f/g/h", ok: true},
		"64-byte segment":    {scope: seg64, ok: true},
		"nine deep":          {scope: "a/b/c/d/e/f/g/h/i"},
		"65-byte segment":    {scope: seg64 + "s"},
		"leading slash":      {scope: "/a"},
		"trailing slash":     {scope: "a/"},
		"empty segment":      {scope: "a//b"},
		"space":              {scope: "a b"},
		"unicode":            {scope: "agént"},
		"dot segment":        {scope: "a/./b"},
		"dot-dot segment":    {scope: "a/../b"},
		"dots inside ok":     {scope: "a/..b/c.", ok: true},
		"colon":              {scope: "a:b"},
		"only slash":         {scope: "/"},
		"backslash":          {scope: `a\b`},
		"NUL":                {scope: "a\x00"},
		"segment of hyphens": {scope: "-/_", ok: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := registry.ValidateScope(tc.scope)
			if tc.ok && err != nil {
				t.Fatalf("ValidateScope(%q) = %v, want nil", tc.scope, err)
			}
			if !tc.ok && !errors.Is(err, registry.ErrInvalidScope) {
				t.Fatalf("ValidateScope(%q) = %v, want ErrInvalidScope", tc.scope, err)
			}
		})
	}
}

func TestValidateName(t *testing.T) {
	tests := map[string]struct {
		name string
		ok   bool
	}{
		"simple":       {name: "read_file", ok: true},
		"mcp style":    {name: "github/create-issue.v2", ok: true},
		"64 bytes":     {name: strings.Repeat("n", 64), ok: true},
		"empty":        {name: ""},
		"65 bytes":     {name: strings.Repeat("n", 65)},
		"space":        {name: "read file"},
		"colon":        {name: "mcp:tool"},
		"unicode":      {name: "lire_fichiér"},
		"newline":      {name: "a\nb"},
		"at sign":      {name: "a@b"},
		"run_code ok":  {name: registry.ReservedRunCode, ok: true},
		"punctuation":  {name: "._-/", ok: true},
		"parenthesis":  {name: "f()"},
		"quote":        {name: `a"b`},
		"digits first": {name: "1tool", ok: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := registry.ValidateName(tc.name)
			if tc.ok && err != nil {
				t.Fatalf("ValidateName(%q) = %v, want nil", tc.name, err)
			}
			if !tc.ok && !errors.Is(err, registry.ErrInvalidName) {
				t.Fatalf("ValidateName(%q) = %v, want ErrInvalidName", tc.name, err)
			}
		})
	}
}

// TestInvalidCharacterIsNamed: a refused name or scope names the character it holds, not
// the first byte of that character's UTF-8 read as a character of its own ('Ã' for
// "é"), and a byte that is not UTF-8 as a byte.
func TestInvalidCharacterIsNamed(t *testing.T) {
	tests := map[string]struct {
		err  error
		want string
	}{
		"name with é":      {err: registry.ValidateName("café"), want: `invalid character 'é'`},
		"name with U+FFFD": {err: registry.ValidateName("a\uFFFDb"), want: `invalid character '�'`},
		"name with 0xff":   {err: registry.ValidateName("a\xffb"), want: `invalid character "\xff"`},
		"scope with é":     {err: registry.ValidateScope("team/café"), want: `invalid character 'é'`},
		"scope with 0xff":  {err: registry.ValidateScope("team/a\xff"), want: `invalid character "\xff"`},
		"scope with space": {err: registry.ValidateScope("a b"), want: `invalid character ' '`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
				t.Errorf("error = %v, want it to contain %s", tc.err, tc.want)
			}
		})
	}
}
