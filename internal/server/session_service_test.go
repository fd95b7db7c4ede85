package server

import "testing"

func TestNextReadPage(t *testing.T) {
	for _, tc := range []struct{ n, size, want int }{
		{n: 4, size: 4 * 200, want: readPage},                    // small events: full pages
		{n: 4, size: 4 * (1 << 20), want: 8},                     // 1 MiB events: 8 MiB pages
		{n: 2, size: 2 * (16 << 20), want: 1},                    // over the budget each: one at a time
		{n: 512, size: 512 * (64 << 10), want: 128},              // 64 KiB events
		{n: 0, size: 0, want: readPage},                          // nothing learned
		{n: 3, size: 3 * (readPageBytes / 2), want: 2},           // half the budget each
		{n: 1, size: readPageBytes/readPage - 1, want: readPage}, // just under the per-event share
	} {
		if got := nextReadPage(tc.n, tc.size); got != tc.want {
			t.Errorf("nextReadPage(%d, %d) = %d, want %d", tc.n, tc.size, got, tc.want)
		}
	}
}
