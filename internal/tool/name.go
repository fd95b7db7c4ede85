package tool

import (
	"strconv"
	"unicode/utf8"
)

// MaxNameBytes is the longest tool name.
const MaxNameBytes = 64

// ReservedRunCode is the code-mode transport tool's name, which only the operator may
// register.
const ReservedRunCode = "run_code"

// NameProblem says what is wrong with a tool name under MCP's rule
// ^[A-Za-z0-9_\-./]{1,64}$, or returns "" for a valid name. The registry refuses a
// name with a problem; the provider SDK refuses to define a tool with one.
func NameProblem(name string) string {
	if name == "" {
		return "empty name"
	}
	if len(name) > MaxNameBytes {
		return "longer than " + strconv.Itoa(MaxNameBytes) + " bytes"
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !NameByte(c) {
			return "invalid character " + QuoteCharAt(name, i) + " (allowed: A-Z a-z 0-9 _ - . /)"
		}
	}
	return ""
}

// QuoteCharAt quotes, for an error, the character that starts at s[i]: its whole UTF-8
// sequence as one character ('é', not the 'Ã' its first byte would read as), or the
// byte alone, escaped ("\xff"), when no valid sequence starts there.
func QuoteCharAt(s string, i int) string {
	if r, n := utf8.DecodeRuneInString(s[i:]); r != utf8.RuneError || n > 1 {
		return strconv.QuoteRune(r)
	}
	return strconv.Quote(s[i : i+1])
}

// NameByte reports whether c may appear in a tool name: a scope segment's bytes and '/'.
func NameByte(c byte) bool { return ScopeByte(c) || c == '/' }

// ScopeByte reports whether c may appear in a segment of a scope (A-Z a-z 0-9 _ - .).
func ScopeByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.'
}
