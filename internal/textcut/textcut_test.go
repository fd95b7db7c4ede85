package textcut

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestPrefixAndEllipsis(t *testing.T) {
	for _, tc := range []struct {
		s             string
		n             int
		prefix, ellip string
	}{
		{"hello", 5, "hello", "hello"},
		{"hello", 3, "hel", "hel…"},
		{"héllo", 2, "h", "h…"}, // é is two bytes: never split
		{"héllo", 3, "hé", "hé…"},
		{"ééé", 0, "", "…"},
		{"", 0, "", ""},
	} {
		if got := Prefix(tc.s, tc.n); got != tc.prefix {
			t.Errorf("Prefix(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.prefix)
		}
		if got := Ellipsis(tc.s, tc.n); got != tc.ellip {
			t.Errorf("Ellipsis(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.ellip)
		}
	}
}
