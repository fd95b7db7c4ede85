package load

import "time"

type options struct {
	onStart, onEnd func()
	batchTimeout   time.Duration
	maxBatches     int
}

var defaultOptions = options{
	onStart:      func() {},
	onEnd:        func() {},
	batchTimeout: 10 * time.Second,
	maxBatches:   1 << 22,
}

// Option configures [Run].
type Option func(*options)

// WithWindowHooks runs onStart just before the measured window opens and onEnd just after
// it closes (e.g. to sample the server's CPU time). The window's bounds are taken after
// onStart returns and before onEnd is called, so slow hooks never widen it.
func WithWindowHooks(onStart, onEnd func()) Option {
	return func(o *options) {
		if onStart != nil {
			o.onStart = onStart
		}
		if onEnd != nil {
			o.onEnd = onEnd
		}
	}
}

// WithBatchTimeout bounds one batch (default 10 s); a batch over it fails the run.
func WithBatchTimeout(d time.Duration) Option {
	return func(o *options) { o.batchTimeout = d }
}

// WithMaxBatches caps the batches one agent sends in a run (default 4 Mi), which bounds
// the latencies a run keeps. An agent that reaches it before the run ends fails the run
// ([ErrOutOfBatches]): it stopped loading the target inside the run.
func WithMaxBatches(n int) Option {
	return func(o *options) { o.maxBatches = n }
}
