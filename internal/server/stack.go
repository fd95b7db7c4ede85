package server

// recvStackReserve is the stack the goroutine reading a batch's first message takes
// before it reads: decoding a batch runs the protobuf decoder a dozen frames deep, and
// a goroutine that grows its stack there copies it several times (2 → 4 → 8 → 16 KiB),
// walking every frame each time. Growing it first is one short copy.
const recvStackReserve = 8 << 10

// reserveStack grows the calling goroutine's stack to hold recvStackReserve more
// bytes. Its frame is the reservation; the result keeps the compiler from eliding it.
//
//go:noinline
func reserveStack(i int) byte {
	var pad [recvStackReserve]byte
	pad[i%recvStackReserve] = 1
	return pad[(i+1)%recvStackReserve]
}
