package observe_test

import (
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/toolsd/toolsd/internal/observe"
	"github.com/toolsd/toolsd/internal/pipeline"
)

// BenchmarkCallObserver measures what observing costs one call: compare "off" with
// the others.
func BenchmarkCallObserver(b *testing.B) {
	discard := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(discardWriter{}), zapcore.InfoLevel))
	cases := map[string]func(m *observe.Metrics) []pipeline.Option{
		"off": func(*observe.Metrics) []pipeline.Option { return nil },
		"metrics": func(m *observe.Metrics) []pipeline.Option {
			return []pipeline.Option{pipeline.WithStageTracer(observe.NewCallObserver(m))}
		},
		"metrics+calllog": func(m *observe.Metrics) []pipeline.Option {
			return []pipeline.Option{pipeline.WithStageTracer(observe.NewCallObserver(m, observe.WithCallLog(discard)))}
		},
	}
	for name, opts := range cases {
		b.Run(name, func(b *testing.B) {
			m, _ := newMetrics(b)
			p := pipeline.New(tools(newTool("read", "p1")), succeed("ok"), opts(m)...)
			e := newExec("read", `{"path":"/etc/hosts"}`)
			b.ReportAllocs()
			for b.Loop() {
				p.Run(b.Context(), e)
			}
		})
	}
}

type discardWriter struct{}

func (discardWriter) Write(p []byte) (int, error) { return len(p), nil }
