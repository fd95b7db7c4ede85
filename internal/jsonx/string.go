package jsonx

import (
	"strconv"
	"unicode/utf8"
)

// plain marks the bytes a string may hold verbatim: printable ASCII except '"' and '\\'.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// scanString scans the string literal at p.pos (a '"'). Without escapes its content is
// p.data[start:end]; with escapes (escaped true) the unescaped content is p.scratch,
// which the next call reuses.
func (p *parser[T]) scanString() (start, end int, escaped bool, err error) {
	d := p.data
	start = p.pos + 1
	i := start
	for i < len(d) {
		// Keys and most values end within a few bytes: they are read a byte at a time.
		// Past wideAfter plain bytes in a row, the rest of the run is skipped eight
		// bytes at a time.
		run := i + wideAfter
		for i < len(d) && i < run && plain[d[i]] {
			i++
		}
		if i == run {
			for i+8 <= len(d) && !special8(load8(d, i)) {
				i += 8
			}
			for i < len(d) && plain[d[i]] {
				i++
			}
		}
		if i >= len(d) {
			break
		}
		c := d[i]
		switch {
		case c == '"':
			p.pos = i + 1
			return start, i, false, nil
		case c == '\\':
			return start, i, true, p.scanEscaped(start, i)
		case c < 0x20:
			return 0, 0, false, controlError(i, c)
		default:
			r, size := decodeRune(d, i)
			if r == utf8.RuneError && size == 1 {
				return 0, 0, false, utf8Error(i, c)
			}
			i += size
		}
	}
	return 0, 0, false, newError(ErrSyntax, len(d), "unexpected end of input in string literal")
}

// scanEscaped finishes a string whose first escape is at i.
func (p *parser[T]) scanEscaped(start, i int) error {
	d := p.data
	buf := append(p.scratch[:0], d[start:i]...) //nolint:gocritic // reuses the parser's scratch buffer on purpose
	for i < len(d) {
		c := d[i]
		switch {
		case plain[c]:
			buf = append(buf, c)
			i++
		case c == '"':
			p.pos = i + 1
			p.scratch = buf
			return nil
		case c == '\\':
			if i+1 >= len(d) {
				return newError(ErrSyntax, len(d), "unexpected end of input in string escape")
			}
			switch e := d[i+1]; e {
			case '"', '\\', '/':
				buf = append(buf, e)
			case 'b':
				buf = append(buf, '\b')
			case 'f':
				buf = append(buf, '\f')
			case 'n':
				buf = append(buf, '\n')
			case 'r':
				buf = append(buf, '\r')
			case 't':
				buf = append(buf, '\t')
			case 'u':
				r, n, err := unicodeEscape(d, i)
				if err != nil {
					return err
				}
				buf = utf8.AppendRune(buf, r)
				i += n
				continue
			default:
				return newError(ErrSyntax, i+1, "invalid escape "+describeByte(e)+" in string literal")
			}
			i += 2
		case c < 0x20:
			return controlError(i, c)
		default:
			r, size := decodeRune(d, i)
			if r == utf8.RuneError && size == 1 {
				return utf8Error(i, c)
			}
			buf = append(buf, d[i:i+size]...)
			i += size
		}
	}
	return newError(ErrSyntax, len(d), "unexpected end of input in string literal")
}

// unicodeEscape decodes the \uXXXX escape at i (and its low surrogate, if it starts a
// pair), returning the rune and the bytes consumed. A lone surrogate has no UTF-8 form,
// so it is rejected as ErrInvalidUTF8 rather than silently replaced.
func unicodeEscape[T input](d T, i int) (rune, int, error) {
	hi, err := hex4(d, i+2)
	if err != nil {
		return 0, 0, err
	}
	switch {
	case hi >= 0xDC00 && hi <= 0xDFFF:
		return 0, 0, surrogateError(i, hi)
	case hi < 0xD800 || hi > 0xDBFF:
		return hi, 6, nil
	}
	if i+7 >= len(d) || d[i+6] != '\\' || d[i+7] != 'u' {
		return 0, 0, surrogateError(i, hi)
	}
	lo, err := hex4(d, i+8)
	if err != nil {
		return 0, 0, err
	}
	if lo < 0xDC00 || lo > 0xDFFF {
		return 0, 0, surrogateError(i, hi)
	}
	return 0x10000 + (hi-0xD800)<<10 + (lo - 0xDC00), 12, nil
}

func hex4[T input](d T, i int) (rune, error) {
	var r rune
	for j := i; j < i+4; j++ {
		if j >= len(d) {
			return 0, newError(ErrSyntax, len(d), "unexpected end of input in \\u escape")
		}
		c := d[j]
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			if r, size := decodeRune(d, j); c >= utf8.RuneSelf && r == utf8.RuneError && size == 1 {
				return 0, utf8Error(j, c)
			}
			return 0, newError(ErrSyntax, j, "invalid character "+describeByte(c)+" in \\u escape")
		}
	}
	return r, nil
}

func surrogateError(off int, r rune) *Error {
	return newError(ErrInvalidUTF8, off, "lone surrogate \\u"+strconv.FormatInt(int64(r), 16)+" in string literal")
}

func controlError(off int, c byte) *Error {
	return newError(ErrSyntax, off, "invalid control character 0x"+strconv.FormatUint(uint64(c), 16)+" in string literal")
}

func utf8Error(off int, c byte) *Error {
	return newError(ErrInvalidUTF8, off, "invalid UTF-8 byte 0x"+strconv.FormatUint(uint64(c), 16))
}

// unexpected reports the byte at p.pos (or the end of input) as out of place.
func (p *parser[T]) unexpected(where string) *Error {
	if p.pos >= len(p.data) {
		return newError(ErrSyntax, len(p.data), "unexpected end of input "+where)
	}
	c := p.data[p.pos]
	if c >= utf8.RuneSelf {
		r, size := decodeRune(p.data, p.pos)
		if r == utf8.RuneError && size == 1 {
			return utf8Error(p.pos, c)
		}
		return newError(ErrSyntax, p.pos, "invalid character "+strconv.QuoteRune(r)+" "+where)
	}
	return newError(ErrSyntax, p.pos, "invalid character "+describeByte(c)+" "+where)
}

// wideAfter is the run of plain bytes after which scanString reads eight at a time.
const wideAfter = 16

// Bytes repeated in each lane of a uint64, for [special8].
const (
	lanes    = 0x0101010101010101
	laneHigh = 0x8080808080808080
)

// special8 reports whether any of the 8 bytes in x is not [plain]: a control byte, '"',
// '\\' or a byte of a multi-byte UTF-8 sequence. Each test sets a lane's high bit; a
// borrow between lanes only follows a lane that is itself special, so the answer is
// exact though the lane may not be.
func special8(x uint64) bool {
	quote, backslash := x^(lanes*'"'), x^(lanes*'\\')
	control := x - lanes*0x20
	return (control|x|(quote-lanes)&^quote|(backslash-lanes)&^backslash)&laneHigh != 0
}

// load8 reads d[i:i+8] as a little-endian uint64 (one load once compiled).
func load8[T input](d T, i int) uint64 {
	_ = d[i+7]
	return uint64(d[i]) | uint64(d[i+1])<<8 | uint64(d[i+2])<<16 | uint64(d[i+3])<<24 |
		uint64(d[i+4])<<32 | uint64(d[i+5])<<40 | uint64(d[i+6])<<48 | uint64(d[i+7])<<56
}

// decodeRune is [utf8.DecodeRune] of d[i:], for a string or bytes. The conversion of at
// most [utf8.UTFMax] bytes does not allocate.
func decodeRune[T input](d T, i int) (rune, int) {
	return utf8.DecodeRuneInString(string(d[i:min(i+utf8.UTFMax, len(d))]))
}
