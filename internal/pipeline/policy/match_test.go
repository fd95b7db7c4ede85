package policy

import (
	"path"
	"strings"
	"testing"
)

// splitMatch is the obvious, allocating definition matchSegs must agree with.
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

func TestMatchSegsAgreesWithSplit(t *testing.T) {
	patterns := []string{"global", "global/*", "global/**", "**/agent", "global/**/sandbox", "*/*", "a/**/b/**/c", "**", "a/", "a/**/", "g?obal/*/x"}
	scopes := []string{"", "global", "global/", "global/a", "global/a/b", "x/agent", "agent", "global/a/b/sandbox",
		"global/sandbox", "a/b/c", "a/x/b/y/c", "a/b/b/c/c", "a", "a/", "glbal/q/x", "gzobal/q/x", "/global"}
	for _, p := range patterns {
		segs := strings.Split(p, "/")
		for _, s := range scopes {
			want := splitMatch(segs, strings.Split(s, "/"))
			if got := matchSegs(segs, s); got != want {
				t.Errorf("matchSegs(%q, %q) = %v, want %v", p, s, got, want)
			}
		}
	}
}
