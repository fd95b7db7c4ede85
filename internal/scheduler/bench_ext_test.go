package scheduler_test

import (
	"context"
	"testing"

	"github.com/toolsd/toolsd/internal/scheduler"
	"github.com/toolsd/toolsd/internal/tool"
)

// nopLog is a [scheduler.Log] that costs nothing: it reuses its seq buffers, so the
// benchmarks count only the scheduler's own allocations.
type nopLog struct{ calls, results []uint64 }

func (l *nopLog) AppendCalls(_ context.Context, b *scheduler.Batch) ([]uint64, error) {
	return l.calls[:len(b.Calls)], nil
}

func (l *nopLog) AppendResults(_ context.Context, _ *scheduler.Batch, rs []scheduler.Committed) ([]uint64, error) {
	return l.results[:len(rs)], nil
}

func (*nopLog) AppendContexts(context.Context, *scheduler.Batch, uint64, []string) error { return nil }

type nopSink struct{}

func (nopSink) Result(int, uint64, uint64, tool.Result) error { return nil }
func (nopSink) Progress(tool.Progress)                        {}

func BenchmarkExecute(b *testing.B) {
	result := tool.Result{Content: "ok"}
	nop := scheduler.RunnerFunc(func(context.Context, *tool.Exec) tool.Result { return result })
	parallel := scheduler.ModerFunc(func(context.Context, *tool.Exec) tool.Mode { return tool.ModeParallel })
	exclusive := scheduler.ModerFunc(func(context.Context, *tool.Exec) tool.Mode { return tool.ModeExclusive })
	bench := map[string]struct {
		calls int
		mode  scheduler.Moder
	}{
		"calls=1":           {1, parallel},
		"calls=8/parallel":  {8, parallel},
		"calls=8/exclusive": {8, exclusive},
		"calls=64/parallel": {64, parallel},
	}
	for _, name := range []string{"calls=1", "calls=8/parallel", "calls=8/exclusive", "calls=64/parallel"} {
		bc := bench[name]
		b.Run(name, func(b *testing.B) {
			seqs := make([]uint64, bc.calls)
			for i := range seqs {
				seqs[i] = uint64(i + 1)
			}
			s := scheduler.New(nop, bc.mode, &nopLog{calls: seqs, results: seqs})
			batch := newBatch(bc.calls)
			ctx, cancel := context.WithCancel(b.Context()) // cancellable, as a stream's context is
			defer cancel()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.Execute(ctx, batch, nopSink{}, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*bc.calls), "ns/call")
		})
	}
}
