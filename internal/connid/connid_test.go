package connid

import (
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
)

var idPattern = regexp.MustCompile(`^x-[0-9a-f]{8}-[0-9a-f]{16}$`)

func TestNextUniqueAndShaped(t *testing.T) {
	s := New("x")
	seen := make(map[string]bool)
	for range 1 << 16 {
		id := s.Next()
		if !idPattern.MatchString(id) {
			t.Fatalf("Next() = %q, want x-<8 hex>-<16 hex>", id)
		}
		if seen[id] {
			t.Fatalf("Next() = %q twice", id)
		}
		seen[id] = true
	}
}

// TestNextNotSequential checks that consecutive ids are far apart: numbered ids differ
// by one, random ones by less than 2^32 with probability 2^-31 for a pair.
func TestNextNotSequential(t *testing.T) {
	s := New("x")
	prev := connPart(t, s.Next())
	for range 64 {
		cur := connPart(t, s.Next())
		if d := max(cur, prev) - min(cur, prev); d < 1<<32 {
			t.Fatalf("consecutive ids' connection parts %#x and %#x differ by %d, want them unrelated", prev, cur, d)
		}
		prev = cur
	}
}

// TestPermuteIsPerSource checks that two Sources number differently: the key, not the
// counter, decides the ids.
func TestPermuteIsPerSource(t *testing.T) {
	a, b := New("x"), New("x")
	for n := uint64(1); n <= 16; n++ {
		if a.permute(n) == b.permute(n) {
			t.Fatalf("permute(%d) = %#x for two Sources, want different keys to give different ids", n, a.permute(n))
		}
	}
}

func connPart(tb testing.TB, id string) uint64 {
	tb.Helper()
	hex := id[strings.LastIndexByte(id, '-')+1:]
	v, err := strconv.ParseUint(hex, 16, 64)
	if err != nil {
		tb.Fatalf("id %q: connection part: %v", id, err)
	}
	return v
}

// TestNextConcurrent: connections are accepted concurrently; their ids stay distinct.
func TestNextConcurrent(t *testing.T) {
	s := New("x")
	const workers, each = 8, 1000
	ids := make([][]string, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for range each {
				ids[w] = append(ids[w], s.Next())
			}
		})
	}
	wg.Wait()
	seen := make(map[string]bool, workers*each)
	for _, ws := range ids {
		for _, id := range ws {
			if seen[id] {
				t.Fatalf("Next() = %q twice", id)
			}
			seen[id] = true
		}
	}
}
