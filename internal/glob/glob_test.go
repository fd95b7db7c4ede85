package glob

import (
	"path"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// splitMatch is the obvious, allocating definition matchRest must agree with.
func splitMatch(pat, segs []string) bool {
	if len(pat) == 0 {
		return len(segs) == 0
	}
	if pat[0] == "**" {
		for i := 0; i <= len(segs); i++ {
			if splitMatch(pat[1:], segs[i:]) {
				return true
			}
		}
		return false
	}
	if len(segs) == 0 {
		return false
	}
	ok, _ := path.Match(pat[0], segs[0])
	return ok && splitMatch(pat[1:], segs[1:])
}

func TestScopeAgreesWithSplitting(t *testing.T) {
	patterns := []string{"global", "global/*", "global/**", "**/agent", "global/**/sandbox", "*/*", "a/**/b/**/c", "a/", "a/**/", "g?obal/*/x"}
	scopes := []string{"", "global", "global/", "global/a", "global/a/b", "x/agent", "agent", "global/a/b/sandbox",
		"global/sandbox", "a/b/c", "a/x/b/y/c", "a/b/b/c/c", "a", "a/", "glbal/q/x", "gzobal/q/x", "/global"}
	for _, p := range patterns {
		g, err := Scope(p, 0)
		if err != nil {
			t.Fatalf("Scope(%q) = %v", p, err)
		}
		for _, s := range scopes {
			if got, want := g.Match(s), splitMatch(strings.Split(p, "/"), strings.Split(s, "/")); got != want {
				t.Errorf("Scope(%q).Match(%q) = %v, want %v", p, s, got, want)
			}
		}
	}
}

func TestPatterns(t *testing.T) {
	for name, tc := range map[string]struct {
		tool    bool
		pattern string
		match   []string
		miss    []string
	}{
		"tool star":               {tool: true, pattern: "*", match: []string{"echo", "fs.read", ""}},
		"tool literal":            {tool: true, pattern: "echo", match: []string{"echo"}, miss: []string{"echo2", "ech"}},
		"tool prefix":             {tool: true, pattern: "fs.*", match: []string{"fs.read", "fs."}, miss: []string{"fsread", "x.fs.read"}},
		"tool star crosses slash": {tool: true, pattern: "fs_*", match: []string{"fs_admin/delete", "fs_/", "fs_a/b/c"}, miss: []string{"x/fs_a"}},
		"tool slash literal":      {tool: true, pattern: "fs/*/rm", match: []string{"fs/a/rm", "fs/a/b/rm"}, miss: []string{"fs/rm", "fs/a/rmx"}},
		"tool question slash":     {tool: true, pattern: "a?b", match: []string{"a/b", "a.b"}, miss: []string{"ab", "a//b"}},
		"tool class slash":        {tool: true, pattern: "a[!-~]b", match: []string{"a/b", "a.b"}, miss: []string{"ab"}},
		"tool negated class":      {tool: true, pattern: "a[^x]*", match: []string{"a/x", "ab"}, miss: []string{"ax", "a"}},
		"tool escape":             {tool: true, pattern: `a\*`, match: []string{"a*"}, miss: []string{"ab", "a/"}},
		"scope any depth":         {pattern: "**", match: []string{"", "a", "a/b/c"}},
		"scope subtree":           {pattern: "team/**", match: []string{"team", "team/a", "team/a/b"}, miss: []string{"teams", "other/team"}},
		"scope children":          {pattern: "team/*", match: []string{"team/a"}, miss: []string{"team", "team/a/b"}},
		"scope literal":           {pattern: "team/bot", match: []string{"team/bot"}, miss: []string{"team", "team/bot/x"}},
	} {
		t.Run(name, func(t *testing.T) {
			g, err := Scope(tc.pattern, 0)
			if tc.tool {
				g, err = Tool(tc.pattern)
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range tc.match {
				if !g.Match(s) {
					t.Errorf("%q.Match(%q) = false, want true", tc.pattern, s)
				}
			}
			for _, s := range tc.miss {
				if g.Match(s) {
					t.Errorf("%q.Match(%q) = true, want false", tc.pattern, s)
				}
			}
		})
	}
}

func TestBadPatterns(t *testing.T) {
	if _, err := Tool("[a-"); err == nil {
		t.Error(`Tool("[a-") = nil error, want a syntax error`)
	}
	if _, err := Scope("a/[b-", 0); err == nil {
		t.Error(`Scope("a/[b-") = nil error, want a syntax error`)
	}
	if _, err := Scope("**/a/**/b/**/c/**", 3); err == nil {
		t.Error("Scope with 4 ** segments and a limit of 3 = nil error")
	}
	if _, err := Scope("**/**/a", 1); err != nil {
		t.Errorf(`Scope("**/**/a", 1) = %v, want "**/**" to count once`, err)
	}
}

// FuzzToolPattern checks matchName against path.Match: the same for names without '/',
// and, for patterns without a class (whose ranges could span '/'), the same as path.Match
// with '/' spelled as a byte no tool name has.
func FuzzToolPattern(f *testing.F) {
	for _, s := range [][2]string{{"fs_*", "fs_a/b"}, {"*a*b*c", "xaybzc"}, {"a[b-d]?", "ac/"}, {`\*?*`, "*//"}, {"[^a-c]*x", "d/x"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, name string) {
		g, err := Tool(pattern)
		if err != nil || strings.Contains(pattern, "\x00") || strings.Contains(name, "\x00") {
			return
		}
		got := g.Match(name)
		if !strings.Contains(name, "/") {
			if want, _ := path.Match(pattern, name); got != want {
				t.Fatalf("Tool(%q).Match(%q) = %v, path.Match = %v", pattern, name, got, want)
			}
			return
		}
		if !strings.Contains(pattern, "[") {
			sub := func(s string) string { return strings.ReplaceAll(s, "/", "\x00") }
			if want, _ := path.Match(sub(pattern), sub(name)); got != want {
				t.Fatalf("Tool(%q).Match(%q) = %v, path.Match with '/' as NUL = %v", pattern, name, got, want)
			}
		}
	})
}

func BenchmarkScopeMatch(b *testing.B) {
	g, _ := Scope("tenant/**/agent-*", 0)
	for b.Loop() {
		g.Match("tenant/team/x/agent-7")
	}
}
