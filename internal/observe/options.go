package observe

// Option configures [New].
type Option func(*options)

type options struct {
	callBuckets    []float64
	stageBuckets   []float64
	sessionBuckets []float64
}

// Default histogram buckets, in seconds.
var (
	// DefaultCallBuckets span a tool call end to end: milliseconds to minutes.
	DefaultCallBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}
	// DefaultStageBuckets start lower: prepare and complete take microseconds.
	DefaultStageBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}
	// DefaultSessionBuckets cover a session-log append or fsync; 50ms is an alert threshold.
	DefaultSessionBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}
)

func defaultOptions() options {
	return options{callBuckets: DefaultCallBuckets, stageBuckets: DefaultStageBuckets, sessionBuckets: DefaultSessionBuckets}
}

// WithCallBuckets sets the buckets of the call-duration histogram.
func WithCallBuckets(b []float64) Option { return func(o *options) { o.callBuckets = b } }

// WithStageBuckets sets the buckets of the stage-duration histogram.
func WithStageBuckets(b []float64) Option { return func(o *options) { o.stageBuckets = b } }

// WithSessionBuckets sets the buckets of the session append and sync histograms.
func WithSessionBuckets(b []float64) Option { return func(o *options) { o.sessionBuckets = b } }
