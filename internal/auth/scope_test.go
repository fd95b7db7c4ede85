package auth

import "testing"

func TestScopeGlob(t *testing.T) {
	tests := map[string]struct {
		glob  string
		match []string
		miss  []string
	}{
		"global only":    {glob: "", match: []string{""}, miss: []string{"a", "a/b"}},
		"everything":     {glob: "**", match: []string{"", "a", "a/b/c"}},
		"subtree":        {glob: "tenant-a/**", match: []string{"tenant-a", "tenant-a/x", "tenant-a/x/y"}, miss: []string{"", "tenant-ab", "tenant-b/x", "x/tenant-a"}},
		"exact":          {glob: "tenant-a/bot", match: []string{"tenant-a/bot"}, miss: []string{"tenant-a", "tenant-a/bot/x", "tenant-a/bots"}},
		"one level star": {glob: "tenant-*/bot", match: []string{"tenant-a/bot", "tenant-/bot"}, miss: []string{"tenant-a/x/bot", "tenant-a"}},
		"star":           {glob: "*", match: []string{"a", "tenant-b"}, miss: []string{"", "a/b"}},
		"star subtree":   {glob: "sandbox/*/**", match: []string{"sandbox/a", "sandbox/a/b"}, miss: []string{"sandbox", "sandboxes/a"}},
		"class":          {glob: "team-[ab]", match: []string{"team-a", "team-b"}, miss: []string{"team-c"}},
		"no climbing":    {glob: "tenant-a/**", miss: []string{"tenant-a/../tenant-b", "tenant-a/./x", "tenant-a//x", "tenant-a/", "/tenant-a"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g, err := parseScopeGlob(tc.glob)
			if err != nil {
				t.Fatalf("parseScopeGlob(%q) = %v", tc.glob, err)
			}
			for _, s := range tc.match {
				if !g.match(s) {
					t.Errorf("glob %q match(%q) = false, want true", tc.glob, s)
				}
			}
			for _, s := range tc.miss {
				if g.match(s) {
					t.Errorf("glob %q match(%q) = true, want false", tc.glob, s)
				}
			}
		})
	}
	for _, bad := range []string{"a//b", "/a", "a/", "a/**/b", "a**", "[", "a/[b"} {
		if _, err := parseScopeGlob(bad); err == nil {
			t.Errorf("parseScopeGlob(%q) = nil error, want an error", bad)
		}
	}
}
