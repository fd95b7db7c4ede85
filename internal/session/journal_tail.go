package session

import (
	"cmp"
	"encoding/binary"
	"hash/crc32"
	"slices"
)

// tailScan looks in a damaged tail of the journal for a whole group past its first
// byte, which would make the damage corruption rather than a torn write.
type tailScan struct {
	tail   []byte
	seed   uint32 // the file's groups' checksum seed
	after  uint64 // a whole group counts only with a seq above it
	hashed int    // bytes checksummed so far
}

// tailCandidate is a group header in a tail whose checksum is still to be checked.
type tailCandidate struct {
	q, end int    // where its frame starts, where its body ends
	want   uint32 // the tail's checksum up to end if its body's checksum matches
}

// firstWhole returns the offset in the tail of the first whole group past its first
// byte whose seq is above after, and that seq. Checksumming each candidate's body
// alone would be quadratic in a tail crafted (by a tool's output in the torn group)
// with many long overlapping candidates. Instead the tail's checksum is taken from its
// start up to each body's start, then up to each body's end, and a body's checksum is
// derived from the two: each byte is checksummed twice.
func (s *tailScan) firstWhole() (int, uint64, bool) {
	var (
		cands []tailCandidate
		pre   uint32
		at    int
	)
	for q := 1; q+groupHeadLen <= len(s.tail); q++ {
		n, ok := s.candidateAt(q)
		if !ok {
			continue
		}
		pre, at = s.extend(pre, at, q+recHeaderLen)
		want := crcShift(s.seed^pre, n) ^ binary.BigEndian.Uint32(s.tail[q+4:])
		cands = append(cands, tailCandidate{q: q, end: at + n, want: want})
	}
	slices.SortFunc(cands, func(a, b tailCandidate) int { return cmp.Compare(a.end, b.end) })
	first := -1
	pre, at = 0, 0
	for _, c := range cands {
		pre, at = s.extend(pre, at, c.end)
		if pre == c.want && (first < 0 || c.q < first) {
			first = c.q
		}
	}
	if first < 0 {
		return 0, 0, false
	}
	return first, binary.BigEndian.Uint64(s.tail[first+recHeaderLen+1:]), true
}

// candidateAt reports whether a group header at q claims a body that fits in the tail,
// starts with the marker and has a seq above after, and returns the body's length.
func (s *tailScan) candidateAt(q int) (int, bool) {
	n := int(binary.BigEndian.Uint32(s.tail[q:]))
	if n < groupHeadLen-recHeaderLen || n > len(s.tail)-q-recHeaderLen {
		return 0, false
	}
	body := s.tail[q+recHeaderLen:]
	return n, body[0] == groupMarker && binary.BigEndian.Uint64(body[1:]) > s.after
}

// extend continues pre, the checksum of the tail up to at, up to to.
func (s *tailScan) extend(pre uint32, at, to int) (uint32, int) {
	s.hashed += to - at
	return crc32.Update(pre, castagnoli, s.tail[at:to]), to
}

// crcShift returns c·x^(8n) modulo CRC-32C's polynomial: what checksumming n more
// bytes does to a checksum c, less what it does to 0, as crc32.Update(c, t, b) is
// crcShift(c, len(b)) ^ crc32.Update(0, t, b) (zlib's crc32_combine).
func crcShift(c uint32, n int) uint32 {
	p, pow := uint32(1)<<31, uint32(1)<<30 // x^0 and x^1, the first bit the lowest degree
	for m := uint64(n) * 8; m != 0; m >>= 1 {
		if m&1 != 0 {
			p = gfMul(p, pow)
		}
		pow = gfMul(pow, pow)
	}
	return gfMul(p, c)
}

// gfMul multiplies a and b, polynomials over GF(2) in hash/crc32's reversed bit order,
// modulo CRC-32C's polynomial.
func gfMul(a, b uint32) uint32 {
	var p uint32
	for m := uint32(1) << 31; m != 0; m >>= 1 {
		if a&m != 0 {
			p ^= b
		}
		if b&1 != 0 {
			b = b>>1 ^ crc32.Castagnoli
		} else {
			b >>= 1
		}
	}
	return p
}
