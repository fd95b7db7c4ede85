package scheduler_test

import (
	"context"
	"errors"
	"testing"

	"github.com/toolsd/toolsd/internal/scheduler"
	"github.com/toolsd/toolsd/internal/tool"
)

// acceptingSink records the Accepted notification and what followed it.
type acceptingSink struct {
	batchID  string
	seqs     []uint64
	results  int
	fail     bool
	accepted bool
}

func (s *acceptingSink) Accepted(batchID string, callSeqs []uint64) error {
	s.accepted, s.batchID, s.seqs = true, batchID, append([]uint64(nil), callSeqs...)
	if s.fail {
		return errors.New("client gone")
	}
	return nil
}

func (s *acceptingSink) Result(int, uint64, uint64, tool.Result) error {
	if !s.accepted {
		panic("Result before Accepted")
	}
	s.results++
	return nil
}

func (s *acceptingSink) Progress(tool.Progress) {}

type seqLog struct{ next uint64 }

func (l *seqLog) seqs(n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		l.next++
		out[i] = l.next
	}
	return out
}
func (l *seqLog) AppendCalls(_ context.Context, b *scheduler.Batch) ([]uint64, error) {
	return l.seqs(len(b.Calls)), nil
}
func (l *seqLog) AppendResults(_ context.Context, _ *scheduler.Batch, rs []scheduler.Committed) ([]uint64, error) {
	return l.seqs(len(rs)), nil
}
func (l *seqLog) AppendContexts(context.Context, *scheduler.Batch, uint64, []string) error {
	return nil
}

func TestAccepterToldBeforeResults(t *testing.T) {
	for name, tc := range map[string]struct {
		fail        bool
		wantResults int
	}{
		"client reads":   {fail: false, wantResults: 3},
		"client is gone": {fail: true, wantResults: 0},
	} {
		t.Run(name, func(t *testing.T) {
			ran := 0
			run := scheduler.RunnerFunc(func(context.Context, *tool.Exec) tool.Result { ran++; return tool.Result{Content: "ok"} })
			s := scheduler.New(run, nil, &seqLog{}, scheduler.WithMaxParallel(1))
			sink := &acceptingSink{fail: tc.fail}
			b := &scheduler.Batch{SessionID: "s", BatchID: "b-1", Calls: []tool.Call{{CallID: "a"}, {CallID: "b"}, {CallID: "c"}}}
			settled, err := s.Execute(t.Context(), b, sink, nil)
			if err != nil {
				t.Fatalf("Execute() error = %v", err)
			}
			if sink.batchID != "b-1" || len(sink.seqs) != 3 || sink.seqs[0] != 1 || sink.seqs[2] != 3 {
				t.Errorf("Accepted(%q, %v), want (\"b-1\", [1 2 3])", sink.batchID, sink.seqs)
			}
			if sink.results != tc.wantResults {
				t.Errorf("sink got %d results, want %d", sink.results, tc.wantResults)
			}
			if ran != 3 || settled.Results != 3 {
				t.Errorf("ran %d calls, settled %d results; want 3 and 3 (a gone client never stops the batch)", ran, settled.Results)
			}
		})
	}
}
