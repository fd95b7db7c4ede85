package policy

import (
	"path"
	"strings"
)

// glob is a precompiled scope or tool pattern.
type glob struct {
	pattern string
	any     bool     // matches everything
	literal bool     // no metacharacters: plain comparison
	segs    []string // scope patterns: '/'-separated segments
}

const globMeta = `*?[\`

func newToolGlob(p string) (glob, error) {
	if _, err := path.Match(p, ""); err != nil {
		return glob{}, err
	}
	return glob{pattern: p, any: p == "*", literal: !strings.ContainsAny(p, globMeta)}, nil
}

func newScopeGlob(p string) (glob, error) {
	g := glob{pattern: p, any: p == "*" || p == "**", literal: !strings.ContainsAny(p, globMeta)}
	g.segs = strings.Split(p, "/")
	for _, s := range g.segs {
		if _, err := path.Match(s, ""); err != nil {
			return glob{}, err
		}
	}
	return g, nil
}

func (g *glob) matchTool(name string) bool {
	switch {
	case g.any:
		return true
	case g.literal:
		return g.pattern == name
	}
	ok, _ := path.Match(g.pattern, name)
	return ok
}

func (g *glob) matchScope(scope string) bool {
	switch {
	case g.any:
		return true
	case g.literal:
		return g.pattern == scope
	}
	return matchSegs(g.segs, scope)
}

// matchSegs reports whether the '/'-separated segments of scope match the pattern
// segments, "**" standing for any number of them. It walks scope in place, so matching
// allocates nothing.
func matchSegs(pat []string, scope string) bool { return matchRest(pat, scope, true) }

// matchRest matches pat against the segments left in scope; has is false when none are.
func matchRest(pat []string, scope string, has bool) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for {
				if matchRest(pat[1:], scope, has) {
					return true
				}
				if !has {
					return false
				}
				_, scope, has = strings.Cut(scope, "/")
			}
		}
		if !has {
			return false
		}
		seg, rest, more := strings.Cut(scope, "/")
		if ok, _ := path.Match(pat[0], seg); !ok {
			return false
		}
		pat, scope, has = pat[1:], rest, more
	}
	return !has
}
