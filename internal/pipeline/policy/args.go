package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// decodeArgs decodes a call's arguments for CEL with exact integers: a number that is
// integral (5, 5.0, 1e3), at least 2^53 in magnitude and fits int64 is an int64, one beyond that that
// fits uint64 a uint64, and any other number a float64 (see [number]). As doubles,
// integers above 2^53 (snowflake IDs, account numbers) would compare equal to their
// neighbours.
func decodeArgs(data string) (map[string]any, error) {
	args := map[string]any{}
	dec := json.NewDecoder(strings.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&args); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the arguments")
	}
	if err := exactNumbers(args); err != nil {
		return nil, err
	}
	return args, nil
}

// exactNumbers replaces every [json.Number] in v, at any depth, with its [number].
func exactNumbers(v any) error {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			n, err := exact(e)
			if err != nil {
				return err
			}
			v[k] = n
		}
	case []any:
		for i, e := range v {
			n, err := exact(e)
			if err != nil {
				return err
			}
			v[i] = n
		}
	}
	return nil
}

// exact is v with its numbers replaced: the [number] of a json.Number, or v itself
// with those nested in it.
func exact(v any) (any, error) {
	if n, ok := v.(json.Number); ok {
		return number(string(n))
	}
	return v, exactNumbers(v)
}

// maxExactDouble is 2^53 - 1: every integer up to it in magnitude is exact as a
// float64, and so is its comparison with any CEL int (which cel-go compares as a double:
// 2^53 + 1 would round to 2^53, equal to a double 2^53).
const maxExactDouble = 1<<53 - 1

// number is the value of the JSON number s: a float64, except for an integer of ±2^53
// or beyond (where a float64 rounds to a neighbour, or compares equal to one) in
// int64's or uint64's range, which is an int64 or a uint64. Numbers a float64 holds
// exactly stay doubles, so rules keep the arithmetic they had (args.amount / 100.0
// divides as doubles); only integers that doubles got wrong become CEL ints. A number
// beyond a float64's range (1e399) is an error.
func number(s string) (any, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nil, fmt.Errorf("number %s: %w", s, err)
	}
	// Rounding is monotone: an integer of 2^53 or more never parses below it, so a
	// smaller double is the number's own value, as exact as it ever was.
	if math.Abs(f) <= maxExactDouble {
		return f, nil
	}
	if digits, ok := integerDigits(s); ok {
		if i, err := strconv.ParseInt(digits, 10, 64); err == nil {
			return i, nil
		}
		if u, err := strconv.ParseUint(digits, 10, 64); err == nil {
			return u, nil
		}
	}
	return f, nil
}

// maxIntegerDigits is the most digits of an integer that can fit uint64.
const maxIntegerDigits = 20

// maxExponent bounds the exponents integerDigits works with: far beyond any integer
// that fits uint64, and small enough that adding digit counts to it cannot overflow.
// A number with a larger one is left to strconv.ParseFloat (0, or out of range).
const maxExponent = 1 << 16

// integerDigits is the JSON number s written as a decimal integer ("-9.5e1" is "-95"),
// if it is one of at most maxIntegerDigits digits: its fraction, once the exponent is
// applied, is all zeros. It is exact, whatever a float64 would round s to.
func integerDigits(s string) (string, bool) {
	sign := ""
	if rest, ok := strings.CutPrefix(s, "-"); ok {
		sign, s = "-", rest
	}
	exp := 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.Atoi(s[i+1:])
		if err != nil || e > maxExponent || e < -maxExponent {
			return "", false
		}
		s, exp = s[:i], e
	}
	whole, frac, _ := strings.Cut(s, ".")
	digits := strings.TrimLeft(whole+frac, "0")
	exp -= len(frac)
	trimmed := strings.TrimRight(digits, "0")
	exp += len(digits) - len(trimmed)
	switch {
	case trimmed == "":
		return "0", true
	case exp < 0 || len(trimmed)+exp > maxIntegerDigits:
		return "", false
	}
	return sign + trimmed + strings.Repeat("0", exp), true
}
