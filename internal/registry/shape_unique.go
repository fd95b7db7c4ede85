package registry

import (
	"encoding/json"
	"slices"
)

// duplicatePair finds the pair of equal items the library reports for uniqueItems:
// the first item i equal to an earlier one, and the first such earlier item j. ok is
// false when all are distinct. Up to 20 items are compared pairwise, as the library
// does; more are hashed first.
func duplicatePair(arr []any) (j, i int, ok bool) {
	if len(arr) <= 20 {
		for i := 1; i < len(arr); i++ {
			for j := range i {
				if sameValue(arr[i], arr[j]) {
					return j, i, true
				}
			}
		}
		return -1, -1, false
	}
	seen := make(map[uint64][]int, len(arr))
	for i, item := range arr {
		h := hashValue(item)
		for _, j := range seen[h] {
			if sameValue(item, arr[j]) {
				return j, i, true
			}
		}
		seen[h] = append(seen[h], i)
	}
	return -1, -1, false
}

// sameValue reports whether a and b are equal as the library compares JSON values:
// numbers by value (1.0 equals 1), objects whatever their order.
func sameValue(a, b any) bool {
	switch a := a.(type) {
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for k, av := range a {
			bv, ok := b[k]
			if !ok || !sameValue(av, bv) {
				return false
			}
		}
		return true
	case []any:
		b, ok := b.([]any)
		return ok && slices.EqualFunc(a, b, sameValue)
	case string:
		b, ok := b.(string)
		return ok && a == b
	case json.Number:
		b, ok := b.(json.Number)
		return ok && compareNumbers(readNumber(string(a)), readNumber(string(b))) == 0
	case bool:
		b, ok := b.(bool)
		return ok && a == b
	case nil:
		return b == nil
	}
	return false
}

// hashValue hashes v (FNV-1a) so that equal values, as sameValue compares them, hash
// alike: numbers by their canonical form, object members whatever their order.
func hashValue(v any) uint64 {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	add := func(b ...byte) {
		for _, c := range b {
			h = (h ^ uint64(c)) * prime
		}
	}
	addString := func(s string) {
		for i := 0; i < len(s); i++ {
			h = (h ^ uint64(s[i])) * prime
		}
	}
	switch v := v.(type) {
	case map[string]any:
		add(0)
		var sum uint64
		for k, c := range v {
			sum += hashValue(k)*31 + hashValue(c)
		}
		for i := range 8 {
			add(byte(sum >> (8 * i)))
		}
	case []any:
		add(1)
		for _, c := range v {
			x := hashValue(c)
			for i := range 8 {
				add(byte(x >> (8 * i)))
			}
		}
	case nil:
		add(2)
	case bool:
		add(3)
		if v {
			add(1)
		}
	case string:
		add(4)
		addString(v)
	case json.Number:
		add(5)
		var buf [192]byte // see scalars.has
		add(readNumber(string(v)).appendKey(buf[:0])...)
	}
	return h
}
