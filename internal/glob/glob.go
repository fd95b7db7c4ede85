// Package glob matches tool names and scope paths against operator-written patterns.
// Tool patterns are path.Match globs. Scope patterns are matched per '/' segment with
// path.Match, and a "**" segment stands for any number of segments (zero included), so
// "team/**" matches "team", "team/a" and "team/a/b". Patterns are compiled once and
// matching allocates nothing. The policy rules and the hook subscriptions share it.
package glob

import (
	"fmt"
	"path"
	"strings"
)

const meta = `*?[\`

// Pattern is a compiled tool or scope pattern.
type Pattern struct {
	raw     string
	any     bool     // matches everything
	literal bool     // no metacharacters: plain comparison
	scope   bool     // segment-wise matching with "**"
	segs    []string // scope patterns: '/'-separated segments
}

// Tool compiles a tool-name pattern ("*" matches every name).
func Tool(p string) (Pattern, error) {
	if _, err := path.Match(p, ""); err != nil {
		return Pattern{}, err
	}
	return Pattern{raw: p, any: p == "*", literal: !strings.ContainsAny(p, meta)}, nil
}

// Scope compiles a scope pattern ("*" and "**" match every scope). maxStars bounds the
// "**" segments (each multiplies a match's work by the scope's depth); 0 means no bound.
func Scope(p string, maxStars int) (Pattern, error) {
	g := Pattern{raw: p, any: p == "*" || p == "**", literal: !strings.ContainsAny(p, meta), scope: true}
	stars := 0
	for _, s := range strings.Split(p, "/") {
		if s == "**" {
			if len(g.segs) > 0 && g.segs[len(g.segs)-1] == "**" {
				continue // "**/**" means "**"
			}
			stars++
		}
		if _, err := path.Match(s, ""); err != nil {
			return Pattern{}, err
		}
		g.segs = append(g.segs, s)
	}
	if maxStars > 0 && stars > maxStars {
		return Pattern{}, fmt.Errorf("at most %d \"**\" segments", maxStars)
	}
	return g, nil
}

// String returns the pattern as written.
func (g *Pattern) String() string { return g.raw }

// Match reports whether s (a tool name or a scope path) matches.
func (g *Pattern) Match(s string) bool {
	switch {
	case g.any:
		return true
	case g.literal:
		return g.raw == s
	case g.scope:
		return matchRest(g.segs, s, true)
	}
	ok, _ := path.Match(g.raw, s)
	return ok
}

// matchRest matches pat against the segments left in scope (has is false when none are
// left), walking scope in place.
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
