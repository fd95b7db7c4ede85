// Package procstat reads a Linux process's CPU time and resident memory from /proc, the
// way the benchmark charges work to a server process it did not build. It only reads
// /proc and must never signal, trace or otherwise touch the process it observes.
package procstat
