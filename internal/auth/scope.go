package auth

import (
	"fmt"
	"path"
	"strings"
)

// scopeGlob matches scope paths. Scopes are "/"-separated paths and "" is the global
// scope. A glob is matched segment by segment with [path.Match] ("*" never crosses a
// "/"); a trailing "/**" matches the scope before it and all its descendants:
//
//	"tenant-a/**"  matches "tenant-a", "tenant-a/x" and "tenant-a/x/y", not "tenant-ab"
//	"tenant-*/bot" matches "tenant-a/bot", not "tenant-a/x/bot"
//	"**"           matches every scope, the global scope "" included
//	""             matches only the global scope
type scopeGlob struct {
	raw         string
	segs        []string
	descendants bool
}

func parseScopeGlob(raw string) (scopeGlob, error) {
	g := scopeGlob{raw: raw}
	if raw == "" {
		return g, nil
	}
	segs := strings.Split(raw, "/")
	if segs[len(segs)-1] == "**" {
		g.descendants = true
		segs = segs[:len(segs)-1]
	}
	for _, s := range segs {
		switch {
		case s == "":
			return scopeGlob{}, fmt.Errorf("scope glob %q has an empty segment", raw)
		case strings.Contains(s, "**"):
			return scopeGlob{}, fmt.Errorf("scope glob %q: \"**\" is only allowed as the whole last segment", raw)
		}
		if _, err := path.Match(s, ""); err != nil {
			return scopeGlob{}, fmt.Errorf("scope glob %q: %w", raw, err)
		}
	}
	g.segs = segs
	return g, nil
}

// match reports whether scope is covered by the glob. A malformed scope (an empty, "."
// or ".." segment) matches nothing, so no spelling can climb out of a granted subtree
// whatever the registry makes of it.
func (g scopeGlob) match(scope string) bool {
	var segs []string
	if scope != "" {
		segs = strings.Split(scope, "/")
	}
	for _, s := range segs {
		if s == "" || s == "." || s == ".." {
			return false
		}
	}
	if len(segs) < len(g.segs) || (!g.descendants && len(segs) != len(g.segs)) {
		return false
	}
	for i, p := range g.segs {
		if ok, _ := path.Match(p, segs[i]); !ok {
			return false
		}
	}
	return true
}

// namesGlobal reports whether the glob grants the global scope by name: the only way a
// provider or hook may act there (see [Authorizer]).
func (g scopeGlob) namesGlobal() bool { return g.raw == "" }
