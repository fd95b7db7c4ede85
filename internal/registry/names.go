package registry

import (
	"fmt"
	"strings"

	"github.com/toolsd/toolsd/internal/tool"
)

// ReservedRunCode is the code-mode transport tool. Only the operator (owner "") may
// register it, and restriction masks can neither name nor filter it: restrict the tools
// it reaches instead.
const ReservedRunCode = tool.ReservedRunCode

// Scope shape limits.
const (
	MaxScopeDepth   = 8
	MaxSegmentBytes = 64
	MaxNameBytes    = tool.MaxNameBytes
)

// ValidateScope checks a scope path: "" (global) or 1..8 segments of
// [A-Za-z0-9_.-]{1,64} joined by "/". The segments "." and ".." are refused too: a
// scope is a name, never a path to resolve.
func ValidateScope(scope string) error {
	if scope == "" {
		return nil
	}
	depth, start := 1, 0
	for i := 0; i <= len(scope); i++ {
		if i < len(scope) && scope[i] != '/' {
			c := scope[i]
			if !tool.ScopeByte(c) {
				return scopeError(scope, "invalid character "+tool.QuoteCharAt(scope, i))
			}
			continue
		}
		switch seg := scope[start:i]; {
		case seg == "":
			return scopeError(scope, "empty segment")
		case len(seg) > MaxSegmentBytes:
			return scopeError(scope, fmt.Sprintf("segment longer than %d bytes", MaxSegmentBytes))
		case seg == "." || seg == "..":
			return scopeError(scope, "segment "+seg+" is not allowed")
		}
		if i < len(scope) {
			depth++
			if depth > MaxScopeDepth {
				return scopeError(scope, fmt.Sprintf("deeper than %d segments", MaxScopeDepth))
			}
		}
		start = i + 1
	}
	return nil
}

func scopeError(scope, why string) error {
	return fmt.Errorf("%w %s: %s", ErrInvalidScope, quoteName(scope), why)
}

// ValidateName checks a tool name against MCP's rule ^[A-Za-z0-9_\-./]{1,64}$.
func ValidateName(name string) error {
	if p := nameProblem(name); p != "" {
		return fmt.Errorf("%w%s", ErrInvalidName, p)
	}
	return nil
}

// nameProblem is what [ValidateName] says after "invalid tool name" (`: empty name`,
// ` "x y": invalid character ...`), or "" for a valid name.
func nameProblem(name string) string {
	if name == "" {
		return ": empty name"
	}
	if why := tool.NameProblem(name); why != "" {
		return " " + quoteName(name) + ": " + why
	}
	return ""
}

// parentScope returns the parent of a non-global scope.
func parentScope(scope string) string {
	if i := strings.LastIndexByte(scope, '/'); i >= 0 {
		return scope[:i]
	}
	return ""
}

// Within reports whether scope is anc or lies below it, so that a change in anc
// (a registration, a restriction) may change what scope sees. Both must be valid scopes.
func Within(scope, anc string) bool { return within(scope, anc) }

// within reports whether scope is anc or one of its descendants.
func within(scope, anc string) bool {
	return anc == "" || scope == anc || len(scope) > len(anc) && scope[len(anc)] == '/' && scope[:len(anc)] == anc
}
