package scheduler

// stackReserve is the stack a call's goroutine takes before the call starts: a frame
// this large makes the runtime grow the stack to 16 KiB, which holds a whole call (about
// 9.5 KiB down to the provider send, the pipeline's part of it 7.5 KiB, and the gRPC
// send below; pipeline.TestCallStackDepth keeps the pipeline within its budget).
//
// A call runs deep: the pipeline's stages, argument validation and the provider send.
// A new goroutine starts with a small stack, and the runtime grows a stack by copying
// it, walking every frame on it; growing it while the call is deep costs more than the
// rest of the call's own work. Growing it first, while only a few frames are on it, is
// a short copy instead. 16 KiB is the largest size the runtime serves from its per-P
// stack cache; a 32 KiB stack (what the pipeline needed when each stage was a closure
// around the next) comes from the heap under a lock, and with the copy it cost ~7 % of
// the daemon's CPU under load.
const stackReserve = 8 << 10

// reserveStack makes the calling goroutine's stack large enough for a call. Its frame
// is the reservation; the result keeps the compiler from eliding it.
//
//go:noinline
func reserveStack(i int) byte {
	var pad [stackReserve]byte
	pad[i%stackReserve] = 1
	return pad[(i+1)%stackReserve]
}
