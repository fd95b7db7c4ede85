package session

import "testing"

func TestEventLogLocate(t *testing.T) {
	var l eventLog
	const n = 70000
	for i := range n {
		l.append(Event{Seq: uint64(i + 1)})
	}
	v := l.view()
	for i := range n {
		if got := v.at(i).Seq; got != uint64(i+1) {
			t.Fatalf("at(%d).Seq = %d, want %d", i, got, i+1)
		}
	}
	total := 0
	for k, c := range l.chunks {
		if want := min(firstChunk<<min(k, 6), lastChunk); len(c) != want {
			t.Errorf("chunk %d holds %d events, want %d", k, len(c), want)
		}
		total += len(c)
	}
	if total-n >= lastChunk {
		t.Errorf("chunks hold %d slots for %d events, want less than one spare chunk", total, n)
	}
}
