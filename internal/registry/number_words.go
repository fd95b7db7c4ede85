package registry

import (
	"math/big"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// describeNumber words a failed numeric bound with both numbers exact, and says what an
// exclusive bound or multipleOf wants; counts (lengths, items, properties) are written
// as JSON writes them. The library's words print the numbers as
// float64 (9007199254740993 reads as 9.007199254740992×10¹⁵, 1e400 as ∞) and an
// exclusive bound as the value wanted ("exclusiveMinimum: got 0, want 0"), which tells
// the model to send what it sent. ok is false for any other kind.
func describeNumber(k jsonschema.ErrorKind) (string, bool) {
	switch k := k.(type) {
	case *kind.Minimum:
		return "minimum: got " + exactNumber(k.Got) + ", want " + exactNumber(k.Want), true
	case *kind.Maximum:
		return "maximum: got " + exactNumber(k.Got) + ", want " + exactNumber(k.Want), true
	case *kind.ExclusiveMinimum:
		return "exclusiveMinimum: got " + exactNumber(k.Got) + ", want more than " + exactNumber(k.Want), true
	case *kind.ExclusiveMaximum:
		return "exclusiveMaximum: got " + exactNumber(k.Got) + ", want less than " + exactNumber(k.Want), true
	case *kind.MultipleOf:
		return "multipleOf: got " + exactNumber(k.Got) + ", want a multiple of " + exactNumber(k.Want), true
	// Counts: the library's English printer groups thousands ("got 1,234"), which in a
	// message about JSON reads as two values.
	case *kind.MinLength:
		return count("minLength", k.Got, k.Want), true
	case *kind.MaxLength:
		return count("maxLength", k.Got, k.Want), true
	case *kind.MinItems:
		return count("minItems", k.Got, k.Want), true
	case *kind.MaxItems:
		return count("maxItems", k.Got, k.Want), true
	case *kind.MinProperties:
		return count("minProperties", k.Got, k.Want), true
	case *kind.MaxProperties:
		return count("maxProperties", k.Got, k.Want), true
	}
	return "", false
}

func count(keyword string, got, want int) string {
	return keyword + ": got " + strconv.Itoa(got) + ", want " + strconv.Itoa(want)
}

// maxPlainNumber is the longest number written in plain decimal; a longer one is
// written as <digits>e<exponent>, so that 1e300 does not take 301 characters.
const maxPlainNumber = 32

// exactNumber writes r, a JSON number literal's value (a finite decimal), exactly.
// jsonx bounds a literal (128 bytes, exponent within ±400), so its digits are few.
func exactNumber(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	places, ok := decimalPlaces(r.Denom())
	if !ok {
		return r.RatString() // not a decimal: no JSON literal gives one
	}
	s := new(big.Rat).Abs(r).FloatString(places)
	sign := ""
	if r.Sign() < 0 {
		sign = "-"
	}
	if len(s) <= maxPlainNumber {
		return sign + s
	}
	point := strings.IndexByte(s, '.')
	if point < 0 {
		point = len(s)
	}
	digits := strings.Replace(s, ".", "", 1)
	lead := len(digits) - len(strings.TrimLeft(digits, "0"))
	digits = strings.TrimRight(digits[lead:], "0")
	exp := point - lead - 1
	mantissa := digits[:1]
	if len(digits) > 1 {
		mantissa += "." + digits[1:]
	}
	return sign + mantissa + "e" + strconv.Itoa(exp)
}

// decimalPlaces returns the number of decimal places a fraction with denominator d
// needs, and false when d has a prime factor other than 2 and 5.
func decimalPlaces(d *big.Int) (int, bool) {
	twos := int(d.TrailingZeroBits())
	rest := new(big.Int).Rsh(d, uint(twos))
	fives, five, q, m := 0, big.NewInt(5), new(big.Int), new(big.Int)
	for rest.BitLen() > 1 {
		if q.DivMod(rest, five, m); m.Sign() != 0 {
			return 0, false
		}
		rest.Set(q)
		fives++
	}
	return max(twos, fives), true
}
