// Package tool is toolsd's shared vocabulary: tool definitions, calls, results and the
// stable error codes every layer speaks. It is pure data: it owns no state, starts no
// goroutines and never imports gRPC or generated protobuf code, so the registry, the
// pipeline, the scheduler, the session log and the provider broker can all depend on it
// without depending on each other.
package tool
