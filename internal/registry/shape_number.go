package registry

import (
	"strconv"
	"strings"
)

// number is a JSON number literal read exactly, without allocating: its value is
// ±0.d₁…dₙ × 10^exp, where d₁…dₙ are the literal's digits from its first nonzero one
// (first) to its last (last), read in place across the decimal point. Zero has none.
// The library compares numbers as big rationals; two numbers are equal exactly when
// their signs, digits and exponents are, whatever their literals.
type number struct {
	neg              bool
	intPart, frac    string
	first, last, exp int
}

// readNumber reads a JSON number literal (jsonx bounds its exponent to ±400).
func readNumber(lit string) number {
	var n number
	s := lit
	if s != "" && s[0] == '-' {
		n.neg, s = true, s[1:]
	}
	e := 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, _ = strconv.Atoi(strings.TrimPrefix(s[i+1:], "+"))
		s = s[:i]
	}
	n.intPart, n.frac, _ = strings.Cut(s, ".")
	total := len(n.intPart) + len(n.frac)
	n.first, n.last = 0, total-1
	for n.first < total && n.digit(n.first) == '0' {
		n.first++
	}
	for n.last >= n.first && n.digit(n.last) == '0' {
		n.last--
	}
	n.exp = len(n.intPart) - n.first + e
	return n
}

// digit is the literal's i-th digit, counting across the decimal point.
func (n number) digit(i int) byte {
	if i < len(n.intPart) {
		return n.intPart[i]
	}
	return n.frac[i-len(n.intPart)]
}

func (n number) zero() bool { return n.first > n.last }

// integer reports whether n has no fraction, however it is written (1.0, 1e2).
func (n number) integer() bool { return n.zero() || n.last-n.first+1 <= n.exp }

// sign is -1, 0 or +1.
func (n number) sign() int {
	switch {
	case n.zero():
		return 0
	case n.neg:
		return -1
	}
	return 1
}

// compareNumbers compares a with b exactly: -1, 0 or +1.
func compareNumbers(a, b number) int {
	sa, sb := a.sign(), b.sign()
	if sa != sb || sa == 0 {
		return cmpInt(sa, sb)
	}
	mag := cmpInt(a.exp, b.exp)
	for i := 0; mag == 0; i++ {
		ia, ib := a.first+i, b.first+i
		switch {
		case ia > a.last && ib > b.last:
			return 0
		case ia > a.last:
			mag = -1
		case ib > b.last:
			mag = 1
		default:
			mag = cmpInt(int(a.digit(ia)), int(b.digit(ib)))
		}
	}
	return sa * mag
}

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
