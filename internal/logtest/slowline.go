// Package logtest helps tests that depend on when a log line is written: a line that
// is slow to write shows whether what follows it waits for it, and whether it can come
// after the code that wrote it has ended.
package logtest

import (
	"time"

	"go.uber.org/zap/zapcore"
)

// SlowLineCore wraps a core so that lines with message Msg are written late: after
// Delay, or once Until is closed when it is set. Writing, if set, is sent to (without
// waiting) when such a line begins to be written.
type SlowLineCore struct {
	zapcore.Core
	Msg     string
	Delay   time.Duration
	Until   <-chan struct{}
	Writing chan<- struct{}
}

// With implements zapcore.Core.
func (c SlowLineCore) With(fields []zapcore.Field) zapcore.Core {
	c.Core = c.Core.With(fields)
	return c
}

// Check implements zapcore.Core.
func (c SlowLineCore) Check(ent zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(ent.Level) {
		return ce.AddCore(ent, c)
	}
	return ce
}

// Write implements zapcore.Core.
func (c SlowLineCore) Write(ent zapcore.Entry, fields []zapcore.Field) error {
	if ent.Message == c.Msg {
		select {
		case c.Writing <- struct{}{}:
		default:
		}
		if c.Until != nil {
			<-c.Until
		} else {
			time.Sleep(c.Delay)
		}
	}
	return c.Core.Write(ent, fields)
}
