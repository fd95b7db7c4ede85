package session

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// firstWholeNaive is firstWhole as the definition reads: each offset checked alone.
func firstWholeNaive(tail []byte, seed uint32, after uint64) (int, uint64, bool) {
	for q := 1; q < len(tail); q++ {
		if seq, ok := groupAt(tail, q, seed); ok && seq > after {
			return q, seq, true
		}
	}
	return 0, 0, false
}

// appendFrame appends a group frame of seq with payload, checksummed from seed.
func appendFrame(dst []byte, seed uint32, seq uint64, payload []byte) []byte {
	body := binary.BigEndian.AppendUint64([]byte{groupMarker}, seq)
	body = append(body, payload...)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(body)))
	dst = binary.BigEndian.AppendUint32(dst, groupCRC(seed, body))
	return append(dst, body...)
}

// craftedTail is n bytes of 16-byte blocks each starting a group header that claims
// half of n, with the marker and a high seq but a wrong checksum: every block in the
// first half is a candidate whose body must be checksummed.
func craftedTail(n int) []byte {
	tail := make([]byte, n)
	for q := 0; q+16 <= n; q += 16 {
		binary.BigEndian.PutUint32(tail[q:], uint32(n/2))
		tail[q+8], tail[q+9] = groupMarker, 1
	}
	return tail
}

// TestTailScanIsLinear: however a torn tail is crafted, finding whether a whole group
// follows the damage checksums each byte of it at most twice.
func TestTailScanIsLinear(t *testing.T) {
	tail := craftedTail(1 << 16)
	s := tailScan{tail: tail, seed: 7}
	if q, seq, ok := s.firstWhole(); ok {
		t.Fatalf("firstWhole() = %d, %d, true, want no whole group", q, seq)
	}
	if s.hashed > 2*len(tail) {
		t.Errorf("firstWhole() checksummed %d bytes of a %d-byte tail, want at most %d", s.hashed, len(tail), 2*len(tail))
	}
}

// TestTailScanFindsWhatEachOffsetWould: firstWhole finds the first whole group a check
// of each offset alone finds, among crafted candidates, groups inside groups, groups
// of an earlier seq and groups of another file.
func TestTailScanFindsWhatEachOffsetWould(t *testing.T) {
	const seed, after = 0x5eed, 10
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		var tail []byte
		for len(tail) < 300 {
			switch r.IntN(6) {
			case 0: // junk
				for range r.IntN(20) {
					tail = append(tail, byte(r.IntN(256)))
				}
			case 1: // a whole group of this file, maybe with an earlier seq
				tail = appendFrame(tail, seed, uint64(r.IntN(2*after)), make([]byte, r.IntN(30)))
			case 2: // a group of another file
				tail = appendFrame(tail, seed+1, after+1, make([]byte, r.IntN(30)))
			case 3: // a whole group holding a whole group
				inner := appendFrame(nil, seed, after+uint64(r.IntN(3)), make([]byte, r.IntN(10)))
				tail = appendFrame(tail, seed, after+uint64(r.IntN(3)), inner)
			case 4: // a candidate with a wrong checksum
				tail = appendFrame(tail, seed, after+1, make([]byte, r.IntN(30)))
				tail[len(tail)-1] ^= 1
			case 5: // a header claiming more than follows it
				tail = append(tail, craftedTail(16*(1+r.IntN(4)))...)
			}
		}
		s := tailScan{tail: tail, seed: seed, after: after}
		gotQ, gotSeq, gotOK := s.firstWhole()
		wantQ, wantSeq, wantOK := firstWholeNaive(tail, seed, after)
		if gotQ != wantQ || gotSeq != wantSeq || gotOK != wantOK {
			t.Fatalf("case %d: firstWhole() = %d, %d, %v, want %d, %d, %v", i, gotQ, gotSeq, gotOK, wantQ, wantSeq, wantOK)
		}
	}
}
