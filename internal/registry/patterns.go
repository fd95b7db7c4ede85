package registry

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/toolsd/toolsd/internal/glob"
	"github.com/toolsd/toolsd/internal/tool"
)

// ToolPatternProblem explains why no tool name can match the glob p (nil when one
// can): a policy rule or a required hook with such a pattern would apply to no call. p
// must be well-formed (one glob.Tool accepted).
func ToolPatternProblem(p string) error {
	if !strings.ContainsAny(p, `*?[\`) {
		if why := tool.NameProblem(p); why != "" {
			return errors.New("no tool can have this name: " + why)
		}
		return nil
	}
	if i, ok := literalsAll(p, tool.NameByte); !ok {
		return fmt.Errorf("can never match: no tool name has %s (allowed: A-Z a-z 0-9 _ - . /)", tool.QuoteCharAt(p, i))
	}
	switch n, class := needs(p, tool.NameByte); {
	case class != "":
		return fmt.Errorf("can never match: no tool name has a character of %s (allowed: A-Z a-z 0-9 _ - . /)", class)
	case n > tool.MaxNameBytes:
		return fmt.Errorf("can never match: no tool name is longer than %d bytes", tool.MaxNameBytes)
	}
	return nil
}

// ScopePatternProblem explains why no scope can match the glob p (nil when one can;
// "", a lone "*" and "**" match every scope). p must be well-formed (one glob.Scope
// accepted).
func ScopePatternProblem(p string) error {
	if p == "" || p == "*" || p == "**" {
		return nil
	}
	depth := 0
	for _, seg := range strings.Split(p, "/") {
		switch {
		case seg == "":
			return errors.New("can never match: no scope has an empty segment (a leading, trailing or doubled \"/\"; the global scope is \"\")")
		case seg == "**":
			continue
		case !strings.ContainsAny(seg, `*?[\`):
			if err := ValidateScope(seg); err != nil {
				return fmt.Errorf("can never match: %w", err)
			}
		default:
			if i, ok := literalsAll(seg, tool.ScopeByte); !ok {
				return fmt.Errorf("can never match: no scope has %s (allowed: A-Z a-z 0-9 _ - .)", tool.QuoteCharAt(seg, i))
			}
			switch n, class := needs(seg, tool.ScopeByte); {
			case class != "":
				return fmt.Errorf("can never match: no scope has a character of %s (allowed: A-Z a-z 0-9 _ - .)", class)
			case n > MaxSegmentBytes:
				return fmt.Errorf("can never match: no scope has a segment longer than %d bytes", MaxSegmentBytes)
			}
		}
		depth++
	}
	if depth > MaxScopeDepth {
		return fmt.Errorf("can never match: no scope is deeper than %d segments", MaxScopeDepth)
	}
	return nil
}

// literalsAll reports whether every character a well-formed path.Match pattern matches
// literally (outside character classes, escaped or not) is accepted by ok, and the index
// of the first that is not.
func literalsAll(p string, ok func(byte) bool) (int, bool) {
	for i := 0; i < len(p); i++ {
		switch c := p[i]; c {
		case '*', '?':
		case '[': // a class ends at its first unescaped ']' (a ']' first in it is malformed)
			for i++; i < len(p) && p[i] != ']'; i++ {
				if p[i] == '\\' {
					i++
				}
			}
		case '\\':
			if i++; i < len(p) && !ok(p[i]) {
				return i, false
			}
		default:
			if !ok(c) {
				return i, false
			}
		}
	}
	return 0, true
}

// needs reports how many bytes a name that a well-formed path.Match pattern p matches
// holds at least (one per literal, '?' and class: names are ASCII), and the first
// character class of p that matches no character ok accepts ("" when there is none).
func needs(p string, ok func(byte) bool) (n int, never string) {
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '*':
			continue
		case '\\':
			i++
		case '[':
			end := i + 1
			for ; p[end] != ']'; end++ { // well-formed: the class is closed
				if p[end] == '\\' {
					end++
				}
			}
			if never == "" && !classAdmits(p[i:end+1], ok) {
				never = p[i : end+1]
			}
			i = end
		}
		n++
	}
	return n, never
}

// classAdmits reports whether a well-formed character class (brackets included) matches
// some byte ok accepts. A negated class is taken to: it would have to list every such
// byte not to.
func classAdmits(class string, ok func(byte) bool) bool {
	if strings.HasPrefix(class, "[^") {
		return true
	}
	g, _ := glob.Tool(class) // well-formed: the pattern holding it compiled
	for c := range byte(utf8.RuneSelf) {
		if ok(c) && g.Match(string(rune(c))) {
			return true
		}
	}
	return false
}
