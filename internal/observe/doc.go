// Package observe owns toolsd's telemetry: the Prometheus metrics of every domain
// package, the one-line-per-call log and the OpenTelemetry call and stage spans.
//
// The domain packages stay free of metrics and tracing libraries: each declares a small
// Observer interface (or, in the pipeline, a [pipeline.StageTracer]) and this package
// adapts them. Every metric lives on the private registry handed to [New]; nothing is
// registered globally, and tracing stays off unless [SetupTracing] is asked for it.
//
// Observe never changes what it watches: adapters only count, time and log, never
// block, and never log a tool's arguments or results in full unless the operator turned
// payload logging on and the logger is at debug level.
package observe
