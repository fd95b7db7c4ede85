package scheduler

// stackReserve is the stack a call's goroutine takes before the call starts: a frame
// this large makes the runtime grow the stack to 32 KiB, which holds a whole call (the
// pipeline's interceptor chain alone takes about 20 KiB).
//
// A call runs deep: the pipeline's stages, argument validation (a recursive JSON
// Schema walk) and the provider send. A new goroutine starts with a small stack, and
// the runtime grows a stack by copying it, walking every frame on it; growing it
// while the call is deep in validation costs more than the rest of the call's own
// work. Growing it first, while only a few frames are on it, is a short copy instead.
const stackReserve = 16 << 10

// reserveStack makes the calling goroutine's stack large enough for a call. Its frame
// is the reservation; the result keeps the compiler from eliding it.
//
//go:noinline
func reserveStack(i int) byte {
	var pad [stackReserve]byte
	pad[i%stackReserve] = 1
	return pad[(i+1)%stackReserve]
}
