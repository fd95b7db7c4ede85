package stack

import (
	"runtime/debug"
	"testing"
	"unsafe"
)

var sink byte

// deep uses n frames of about 1 KiB each and returns where p points at the bottom: the
// address changes if the stack p's target lives on was moved (grown) meanwhile.
//
//go:noinline
func deep(p *byte, n int) uintptr {
	var pad [1 << 10]byte
	pad[n%len(pad)] = byte(n)
	sink += pad[(n*7)%len(pad)]
	if n == 0 {
		return uintptr(unsafe.Pointer(p))
	}
	return deep(p, n-1)
}

// moved reports whether 11 KiB of frames moved a fresh goroutine's stack.
func moved(reserve bool) bool {
	out := make(chan bool)
	go func() {
		if reserve {
			Reserve(1)
		}
		var x byte
		before := uintptr(unsafe.Pointer(&x))
		out <- deep(&x, 10) != before
	}()
	return <-out
}

func TestReserve(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1)) // a GC may shrink, and so move, a stack
	if !moved(false) {
		t.Fatal("11 KiB of frames did not move a fresh goroutine's stack: the test cannot tell a reservation from none")
	}
	if moved(true) {
		t.Error("after Reserve, 11 KiB of frames moved the stack: the reservation is not 16 KiB")
	}
}
