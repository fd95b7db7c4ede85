package main

import (
	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel"
	"go.uber.org/zap"
)

// logOTel sends what OpenTelemetry reports, a failed trace export or a bad OTEL_*
// variable, to log as "tracing failed" warnings. By default it writes them to stderr
// itself, as plain text ("2026/01/02 15:04:05 traces export: ...") beside the JSON
// lines of the log, where a pipeline reading the log as JSON cannot parse them, and
// past its buffer. Both of its outlets are process-wide, as the process's log is.
func logOTel(log *zap.Logger) {
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("tracing failed", zap.Error(err))
	}))
	otel.SetLogger(logr.New(otelSink{log: log}))
}

// otelSink is OpenTelemetry's internal logger over zap: its errors are warnings of
// toolsd's (OpenTelemetry's default logger shows those alone), its other levels
// (warnings at V(1), info, debug) are not shown.
type otelSink struct {
	log *zap.Logger
}

var _ logr.LogSink = otelSink{}

func (otelSink) Init(logr.RuntimeInfo) {}

func (otelSink) Enabled(int) bool { return false }

func (otelSink) Info(int, string, ...any) {}

func (s otelSink) Error(err error, msg string, keysAndValues ...any) {
	s.log.Warn("tracing failed", append(fields(keysAndValues), zap.String("what", msg), zap.Error(err))...)
}

func (s otelSink) WithValues(keysAndValues ...any) logr.LogSink {
	return otelSink{log: s.log.With(fields(keysAndValues)...)}
}

func (s otelSink) WithName(string) logr.LogSink { return s }

// fields turns logr's alternating keys and values into zap fields; a key that is not a
// string is written as "arg".
func fields(keysAndValues []any) []zap.Field {
	out := make([]zap.Field, 0, len(keysAndValues)/2)
	for i := 0; i+1 < len(keysAndValues); i += 2 {
		key, ok := keysAndValues[i].(string)
		if !ok {
			key = "arg"
		}
		out = append(out, zap.Any(key, keysAndValues[i+1]))
	}
	return out
}
