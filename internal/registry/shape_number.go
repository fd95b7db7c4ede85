package registry

import (
	"encoding/json"
	"math/big"
	"math/bits"
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

// appendKey appends n's canonical form, the same for every literal of one value: a
// map of such keys finds an enum's numbers in one lookup.
func (n number) appendKey(b []byte) []byte {
	if n.zero() {
		return append(b, '0')
	}
	if n.neg {
		b = append(b, '-')
	}
	for i := n.first; i <= n.last; i++ {
		b = append(b, n.digit(i))
	}
	b = append(b, 'e')
	return strconv.AppendInt(b, int64(n.exp), 10)
}

// scalars is the members of an enum or a const, all of them strings, numbers,
// booleans or null, as sets: a document of many values against a large enum costs a
// lookup per value, not a comparison with every member.
type scalars struct {
	strs          map[string]struct{}
	nums          map[string]struct{} // by appendKey
	null, yes, no bool
}

// newScalars reads members; false when one is an array or an object.
func newScalars(members []any) (*scalars, bool) {
	m := &scalars{strs: map[string]struct{}{}, nums: map[string]struct{}{}}
	for _, v := range members {
		switch v := v.(type) {
		case string:
			m.strs[v] = struct{}{}
		case json.Number:
			m.nums[string(readNumber(string(v)).appendKey(nil))] = struct{}{}
		case bool:
			m.yes, m.no = m.yes || v, m.no || !v
		case nil:
			m.null = true
		default:
			return nil, false
		}
	}
	return m, true
}

// hasString reports whether the string v is a member.
func (m *scalars) hasString(v string) bool {
	_, ok := m.strs[v]
	return ok
}

// has reports whether v, a document decoded by [jsonx.Decode], equals a member.
func (m *scalars) has(v any) bool {
	switch v := v.(type) {
	case string:
		_, ok := m.strs[v]
		return ok
	case json.Number:
		if len(m.nums) == 0 {
			return false
		}
		var buf [192]byte // jsonx bounds a number to 128 bytes: its digits, sign and exponent fit
		_, ok := m.nums[string(readNumber(string(v)).appendKey(buf[:0]))]
		return ok
	case bool:
		return v && m.yes || !v && m.no
	case nil:
		return m.null
	}
	return false
}

// multipleOf reports whether n is a multiple of m (above zero), exactly; decided is
// false when either has over 19 significant digits, beyond this arithmetic.
//
// With N and M their digits as integers, n = N × 10^a and m = M × 10^b, so n / m is
// N × 10^(a-b) / M: when a ≥ b, an integer exactly when M divides N × 10^(a-b); when
// a < b, never, since N, its trailing zeros dropped, is not a multiple of 10.
func multipleOf(n, m number) (multiple, decided bool) {
	if n.zero() {
		return true, true
	}
	ln, lm := n.last-n.first+1, m.last-m.first+1
	if ln > 19 || lm > 19 {
		return false, false
	}
	d := (n.exp - ln) - (m.exp - lm)
	if d < 0 {
		return false, true
	}
	N, M := n.digits(), m.digits()
	r := N % M
	// r × 10^k is a multiple of M once M / gcd(M, r), which is below 2^64, divides
	// 10^k: within 64 steps or never, so a huge exponent costs no more.
	for d = min(d, 64); d > 0 && r != 0; d-- {
		hi, lo := bits.Mul64(r, 10)
		r = bits.Rem64(hi, lo, M)
	}
	return r == 0, true
}

// digits is n's significant digits as an integer (at most 19 of them).
func (n number) digits() uint64 {
	var v uint64
	for i := n.first; i <= n.last; i++ {
		v = v*10 + uint64(n.digit(i)-'0')
	}
	return v
}

// isMultipleOf decides exactly whether the number literal lit is a multiple of m,
// parsing both as big rationals when their digits are too many for multipleOf.
func isMultipleOf(lit string, m number, mLit string) bool {
	if ok, decided := multipleOf(readNumber(lit), m); decided {
		return ok
	}
	n, _ := new(big.Rat).SetString(lit)
	d, _ := new(big.Rat).SetString(mLit)
	return n.Quo(n, d).IsInt()
}
