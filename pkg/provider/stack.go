package provider

// stackReserve is the stack a handler goroutine takes before the handler runs: a frame
// this large makes the runtime grow the stack to 16 KiB, enough for decoding the
// arguments, a typical handler and sending the result.
//
// A new goroutine starts with a small stack, and the runtime grows a stack by copying
// it, walking every frame on it. Growing it mid-call (deep in JSON decoding or in the
// gRPC send) costs more than the rest of a small handler's call; growing it first,
// while only this frame is on it, is a short copy instead. (toolsd's own goroutines use
// internal/stack; the SDK keeps this copy so that it depends on nothing internal.)
const stackReserve = 8 << 10

// reserveStack makes the calling goroutine's stack large enough for a call. Its frame
// is the reservation; the result keeps the compiler from eliding it.
//
//go:noinline
func reserveStack(i uint64) byte {
	var pad [stackReserve]byte
	pad[i%stackReserve] = 1
	return pad[(i+1)%stackReserve]
}
