package session

import (
	"context"
	"runtime"
	"strings"
	"testing"
)

// heapInUse is the heap in use after a full collection.
func heapInUse() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// TestJournalWriterLetsGoOfALargeGroup: the journal's writer reuses its group buffer,
// but not one a burst of large appends grew: it kept the largest group it ever wrote
// (up to tens of MiB) for the life of the process, after the events themselves had
// left memory.
func TestJournalWriterLetsGoOfALargeGroup(t *testing.T) {
	const size = 8 << 20
	ctx := context.Background()
	j, err := OpenJournal(t.TempDir(), WithDurability(SyncNone), WithHotFor(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore(t, j)
	if _, err := j.Append(ctx, "small", msg("warm up")); err != nil {
		t.Fatal(err)
	}
	before := heapInUse()
	func() {
		if _, err := j.Append(ctx, "large", msg(strings.Repeat("x", size))); err != nil {
			t.Fatal(err)
		}
	}()
	if _, err := j.Append(ctx, "small", msg("after")); err != nil {
		t.Fatal(err)
	}
	if after := heapInUse(); after > before+size/2 {
		t.Errorf("heap in use grew by %d KiB over an evicted %d KiB append, want under %d KiB", (after-before)>>10, size>>10, size>>11)
	}
}
