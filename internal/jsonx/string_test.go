package jsonx

import (
	"math/rand/v2"
	"testing"
)

// TestSpecial8MatchesPlain checks the 8-byte test against the byte table: every byte
// value in every lane among plain bytes, then random words mixing both kinds.
func TestSpecial8MatchesPlain(t *testing.T) {
	word := func(b [8]byte) uint64 { return load8(b[:], 0) }
	for lane := range 8 {
		for c := range 256 {
			b := [8]byte{'a', 'a', 'a', 'a', 'a', 'a', 'a', 'a'}
			b[lane] = byte(c)
			if got := special8(word(b)); got != !plain[c] {
				t.Fatalf("special8(byte 0x%02x in lane %d) = %v, want %v", c, lane, got, !plain[c])
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		var b [8]byte
		want := false
		for i := range b {
			if rng.IntN(4) == 0 {
				b[i] = byte(rng.IntN(256))
			} else {
				b[i] = byte(0x20 + rng.IntN(0x60))
			}
			want = want || !plain[b[i]]
		}
		if got := special8(word(b)); got != want {
			t.Fatalf("special8(%q) = %v, want %v", b, got, want)
		}
	}
}

// TestLoad8 pins the byte order special8's lanes assume.
func TestLoad8(t *testing.T) {
	if got, want := load8("\x01\x02\x03\x04\x05\x06\x07\x08", 0), uint64(0x0807060504030201); got != want {
		t.Errorf("load8 = %#x, want %#x", got, want)
	}
}
