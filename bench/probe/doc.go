// Package probe measures costs that only toolsd has, through its public gRPC contract:
// Schemas latency with many registered tools, resident memory per idle provider stream
// and per in-flight call. Each probe takes the address of a running toolsd (and, for
// memory, its process id) and leaves nothing behind: every stream it opens is closed
// before it returns.
//
// Probes speak only the generated toolsd.v1 messages, so any server of that contract can
// be probed; they must never reach into a server's process beyond reading /proc.
package probe
