package session_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/toolsd/toolsd/internal/session"
)

// A crash can cut the journal's last group, here the one holding two calls' results,
// at any byte: the calls were acknowledged before it (their group is whole), so at the
// next start each of them has exactly one result, its own or the recovered ABORTED
// one, citing it; hot or cold, read or watched.
func TestJournalTornResultsLeaveNoCallWithoutResult(t *testing.T) {
	for name, opts := range map[string][]session.Option{"hot": nil, "cold": {session.WithHotFor(-1)}} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			j, err := session.OpenJournal(dir, opts...)
			if err != nil {
				t.Fatal(err)
			}
			calls := mustAppend(t, j, "s", callEvent("c1", "a", `{}`), callEvent("c2", "b", `{}`), callEvent("c3", "c", `{}`))
			mustAppend(t, j, "s", resultEvent("c1", calls[0].Seq, false))
			path := filepath.Join(dir, session.JournalFileName)
			st, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			last := st.Size()
			mustAppend(t, j, "s", resultEvent("c2", calls[1].Seq, false), resultEvent("c3", calls[2].Seq, true))
			file, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			closeStore(t, j) // what a crash leaves is file, cut below
			for cut := last; cut < int64(len(file)); cut++ {
				crashed := t.TempDir()
				if err := os.WriteFile(filepath.Join(crashed, session.JournalFileName), file[:cut], 0o600); err != nil {
					t.Fatal(err)
				}
				r, err := session.OpenJournal(crashed, opts...)
				if err != nil {
					t.Fatalf("cut at %d of %d: OpenJournal() = %v", cut, len(file), err)
				}
				evs := readAll(t, r, "s")
				if got := r.Recovered(); got != 2 || len(evs) != 6 {
					t.Errorf("cut at %d: Recovered() = %d with %d events, want 2 recovered of 6", cut, got, len(evs))
				}
				results := map[uint64]int{}
				for i, ev := range evs {
					if ev.Seq != uint64(i+1) {
						t.Fatalf("cut at %d: event %d has seq %d", cut, i, ev.Seq)
					}
					if ev.Result != nil {
						results[ev.SourceSeqs[0]]++
						if ev.Result.Recovered != (ev.Seq > 4) {
							t.Errorf("cut at %d: result %d (of %s) recovered = %v", cut, ev.Seq, ev.Result.CallID, ev.Result.Recovered)
						}
					}
				}
				for _, c := range calls {
					if results[c.Seq] != 1 {
						t.Errorf("cut at %d: call %d has %d results, want 1", cut, c.Seq, results[c.Seq])
					}
				}
				ctx, cancel := context.WithCancel(t.Context())
				var watched []session.Event
				err = r.Watch(ctx, "s", 1, func(ev session.Event) error {
					if watched = append(watched, ev); len(watched) == len(evs) {
						cancel()
					}
					return nil
				})
				cancel()
				if len(watched) != len(evs) {
					t.Errorf("cut at %d: Watch() sent %d events (%v), Read() %d", cut, len(watched), err, len(evs))
				}
				closeStore(t, r)
			}
		})
	}
}
