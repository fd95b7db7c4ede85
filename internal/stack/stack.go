// Package stack grows a goroutine's stack before deep work starts.
//
// A new goroutine starts with a small stack, and the runtime grows a stack by copying
// it, walking every frame on it. A goroutine that outgrows its stack deep in a call (in
// the pipeline, the protobuf decoder or the gRPC send) pays for copying every frame
// then, sometimes several times over; growing it first, while only a few frames are on
// it, is one short copy. 16 KiB is the largest stack the runtime serves from its per-P
// cache; larger ones come from the heap under a lock. The provider SDK's handler
// goroutines use it too.
package stack

// reserve is the frame [Reserve] takes: with it, the stack grows to 16 KiB.
const reserve = 8 << 10

// Reserve grows the calling goroutine's stack to 16 KiB, enough for a tool call from
// the scheduler to the provider send (pipeline.TestCallStackDepth keeps the pipeline's
// part within budget). Its frame is the reservation; i only keeps the compiler from
// eliding it.
//
//go:noinline
func Reserve(i int) byte {
	var pad [reserve]byte
	pad[i%reserve] = 1
	return pad[(i+1)%reserve]
}
