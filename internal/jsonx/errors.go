package jsonx

import (
	"errors"
	"strconv"
)

// Sentinel errors; every [*Error] wraps exactly one of them.
var (
	// ErrSyntax: the input is not JSON (including empty input and trailing data).
	ErrSyntax = errors.New("jsonx: syntax error")
	// ErrDuplicateKey: an object repeats a key (compared after unescaping).
	ErrDuplicateKey = errors.New("jsonx: duplicate key")
	// ErrTooDeep: objects and arrays nest deeper than [Limits.MaxDepth].
	ErrTooDeep = errors.New("jsonx: nesting too deep")
	// ErrInvalidUTF8: the input holds invalid UTF-8 or a lone surrogate escape.
	ErrInvalidUTF8 = errors.New("jsonx: invalid UTF-8")
	// ErrTooLarge: the input is longer than [Limits.MaxBytes].
	ErrTooLarge = errors.New("jsonx: input too large")
	// ErrNumberRange: a number is longer than [MaxNumberLen] bytes or its exponent is
	// beyond ±[MaxExponent] (no float64 needs either).
	ErrNumberRange = errors.New("jsonx: number out of range")
)

// Error is a rejected input: where and why. Its message reads like
// `jsonx: duplicate key "a" at offset 12`.
type Error struct {
	// Offset is the byte offset in the input where the problem starts.
	Offset int64
	// Reason is the human-readable cause, without the package prefix or the offset.
	Reason string
	// Err is the sentinel this error wraps.
	Err error
}

// Error implements error.
func (e *Error) Error() string {
	return "jsonx: " + e.Reason + " at offset " + strconv.FormatInt(e.Offset, 10)
}

// Unwrap returns the sentinel, so errors.Is(err, ErrDuplicateKey) works.
func (e *Error) Unwrap() error { return e.Err }

// Describe words err for whoever sent the input: an [*Error]'s reason and offset
// without the package prefix (`duplicate key "a" at offset 12`), which names toolsd's
// parser rather than anything the sender wrote; any other error as it reads.
func Describe(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason + " at offset " + strconv.FormatInt(e.Offset, 10)
	}
	return err.Error()
}

func newError(sentinel error, off int, reason string) *Error {
	return &Error{Offset: int64(off), Reason: reason, Err: sentinel}
}

// maxQuotedKey caps how much of a key an error message repeats.
const maxQuotedKey = 64

func quoteKey(k string) string {
	if len(k) > maxQuotedKey {
		return strconv.Quote(k[:maxQuotedKey]) + "…"
	}
	return strconv.Quote(k)
}

func describeByte(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return strconv.QuoteRune(rune(c))
	}
	return "byte 0x" + strconv.FormatUint(uint64(c), 16)
}
