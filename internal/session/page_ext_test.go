package session_test

import (
	"testing"

	"github.com/toolsd/toolsd/internal/session"
)

func TestNextPage(t *testing.T) {
	const most = 512
	for _, tc := range []struct{ n, size, want, most int }{
		{n: 4, size: 4 * 200, want: most},                              // small events: full pages
		{n: 4, size: 4 * (1 << 20), want: 8},                           // 1 MiB events: 8 MiB pages
		{n: 2, size: 2 * (16 << 20), want: 1},                          // over the budget each: one at a time
		{n: 512, size: 512 * (64 << 10), want: 128},                    // 64 KiB events
		{n: 0, size: 0, want: most},                                    // nothing learned
		{n: 3, size: 3 * (session.PageBytes / 2), want: 2},             // half the budget each
		{n: 1, size: session.PageBytes/most - 1, want: most},           // just under the per-event share
		{n: 4, size: 4 * 200, want: session.DefaultPageSize, most: -1}, // another ceiling
	} {
		m := most
		if tc.most == -1 {
			m = session.DefaultPageSize
		}
		if got := session.NextPage(tc.n, tc.size, m); got != tc.want {
			t.Errorf("NextPage(%d, %d, %d) = %d, want %d", tc.n, tc.size, m, got, tc.want)
		}
	}
}
