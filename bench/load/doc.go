// Package load is the agent side of the benchmark: a fixed workload (agents, calls per
// batch, argument size, warm-up and measured window), the runner that drives any
// [Agent] through it and turns completion times into latency percentiles and call
// throughput, and the toolsd-contract agent ([DialBatch]) shared by every target that
// speaks ExecuteBatch.
//
// The runner owns the clock and every agent goroutine; it stops by itself at the end of
// the window and never retries a failed batch: a benchmark that silently absorbs errors
// measures the wrong thing.
package load
