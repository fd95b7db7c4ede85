// Package glob matches tool names and scope paths against operator-written patterns.
// Tool patterns have path.Match's syntax but match the whole name with '/' as an ordinary
// character: a tool name is flat (the scope is the hierarchy), so "fs_*" matches
// "fs_admin/delete" and "?" matches a '/'. Scope patterns are matched per '/' segment
// with path.Match, and a "**" segment stands for any number of segments (zero included),
// so "team/**" matches "team", "team/a" and "team/a/b". Patterns are compiled once and
// matching allocates nothing. The policy rules and the hook subscriptions share it.
package glob

import (
	"fmt"
	"path"
	"strings"
	"unicode/utf8"
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

// Tool compiles a tool-name pattern ("*" matches every name, '/' included).
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
	return matchName(g.raw, s)
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

// matchName matches a well-formed path.Match pattern (Tool checked it) against the whole
// of name, with '/' an ordinary character. A star is retried one character further on a
// mismatch after it (only the last star needs retrying), so the work is at most
// len(pattern)×len(name).
func matchName(pattern, name string) bool {
	px, nx := 0, 0
	starPx, starNx := -1, 0 // the last star and where its next retry starts in name
	for px < len(pattern) || nx < len(name) {
		if px < len(pattern) {
			switch c := pattern[px]; c {
			case '*':
				starPx, starNx = px, nx
				px++
				continue
			case '?':
				if nx < len(name) {
					_, w := utf8.DecodeRuneInString(name[nx:])
					px, nx = px+1, nx+w
					continue
				}
			case '[':
				if nx < len(name) {
					r, w := utf8.DecodeRuneInString(name[nx:])
					if ok, n := matchClass(pattern[px+1:], r); ok {
						px, nx = px+1+n, nx+w
						continue
					}
				}
			default:
				if c == '\\' {
					px++ // well-formed: an escaped character follows
				}
				if nx < len(name) && name[nx] == pattern[px] {
					px, nx = px+1, nx+1
					continue
				}
			}
		}
		if starPx < 0 || starNx >= len(name) {
			return false
		}
		starNx++ // by byte, as path.Match retries its stars
		px, nx = starPx+1, starNx
	}
	return true
}

// matchClass matches r against the character class that starts class (just after its
// '['), returning whether it matched and the class's length up to and including ']'.
func matchClass(class string, r rune) (bool, int) {
	i, negated, matched := 0, false, false
	if i < len(class) && class[i] == '^' {
		negated, i = true, i+1
	}
	for first := true; i < len(class); first = false {
		if class[i] == ']' && !first {
			return matched != negated, i + 1
		}
		var lo, hi rune
		lo, i = classChar(class, i)
		hi = lo
		if i < len(class) && class[i] == '-' {
			hi, i = classChar(class, i+1)
		}
		if lo <= r && r <= hi {
			matched = true
		}
	}
	return false, len(class) // unreachable for a well-formed pattern
}

// classChar reads one possibly escaped character of a class at i.
func classChar(class string, i int) (rune, int) {
	if class[i] == '\\' {
		i++
	}
	r, w := utf8.DecodeRuneInString(class[i:])
	return r, i + w
}
