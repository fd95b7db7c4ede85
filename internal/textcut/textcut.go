// Package textcut cuts UTF-8 text to a byte budget without splitting a character: the
// one rule behind every bounded message, reason and log field in toolsd.
package textcut

import "unicode/utf8"

// MaxLoggedID bounds a client-chosen id (a call id, a tool name as the model wrote it)
// quoted in a log line, a span or an error: only the request's size bounds what a
// client sends, and a line per call must not grow with it.
const MaxLoggedID = 128

// Prefix returns the longest prefix of s of at most n bytes (n >= 0) that does not end
// inside a UTF-8 character; s itself when it is no longer than n.
func Prefix(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Ellipsis returns s when it is at most n bytes, else its Prefix of n bytes and "…".
func Ellipsis(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return Prefix(s, n) + "…"
}
