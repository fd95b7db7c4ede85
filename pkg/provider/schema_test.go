package provider

import (
	"regexp"
	"strconv"
	"testing"
)

// decimalsUpTo(n) matches exactly the numbers 0 to n written without leading zeros.
func TestDecimalsUpTo(t *testing.T) {
	for _, n := range []uint64{0, 5, 9, 10, 19, 20, 99, 100, 101, 127, 128, 200, 255, 1000, 9999, 10000, 32767, 32768, 65535} {
		re := regexp.MustCompile("^(" + decimalsUpTo(n) + ")$")
		for i := range 2*n + 20 {
			if got, want := re.MatchString(strconv.FormatUint(i, 10)), i <= n; got != want {
				t.Fatalf("decimalsUpTo(%d) = %s matches %d: %v, want %v", n, decimalsUpTo(n), i, got, want)
			}
		}
	}
	for _, n := range []uint64{1<<31 - 1, 1 << 31, 1<<32 - 1} {
		re := regexp.MustCompile("^(" + decimalsUpTo(n) + ")$")
		for _, d := range []int64{-1000, -11, -10, -1, 0} {
			if i := int64(n) + d; !re.MatchString(strconv.FormatInt(i, 10)) {
				t.Errorf("decimalsUpTo(%d) = %s does not match %d", n, decimalsUpTo(n), i)
			}
		}
		for _, d := range []int64{1, 9, 10, 1000, int64(n)} {
			if i := int64(n) + d; re.MatchString(strconv.FormatInt(i, 10)) {
				t.Errorf("decimalsUpTo(%d) = %s matches %d", n, decimalsUpTo(n), i)
			}
		}
	}
}
