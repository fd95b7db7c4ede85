package streamgate

import (
	"math"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"
)

// DrainRate is the least a reading peer takes in per send timeout. A large message
// handed to a stream keeps the next Send waiting while the peer takes it in: on a slow
// link, for longer than the send timeout. Behind a message of N bytes, a Send may wait
// the send timeout once more per DrainRate bytes before the peer counts as stopped. A
// peer that is gone is found by keepalive within seconds.
const DrainRate = 64 << 10

// SendWatch times the Sends on one stream, for a supervisor that ends the stream of a
// peer that stopped reading (see [SendWatch.Stalled]). Sends must not overlap, as gRPC
// requires; Stalled may be called from any goroutine.
type SendWatch struct {
	since atomic.Int64 // when the Send in progress began (monoNow), 0 when none is, parked after Park
	last  atomic.Int64 // the encoded size of the message the last Send handed over
	// wake (see [SendWatch.OnWake]) is called by the first Send after a Park.
	wake func()
	// clock (see [SendWatch.SetClock]) is what Sends are timed by; nil is monoNow.
	clock Clock
}

// Clock reads a monotonic clock in nanoseconds, never 0 or less: what a [SendWatch]
// times its Sends by. Tests that decide for themselves when a Send has waited too long
// set one that they advance.
type Clock func() int64

// parked is since after a Park, until the next Send.
const parked = -1

// Send calls send(m) and times it.
func Send[M proto.Message](w *SendWatch, send func(M) error, m M) error {
	// w.now(), spelled out: it is too large to inline, and every message passes here.
	var now int64
	if w.clock == nil {
		now = monoNow()
	} else {
		now = w.clock()
	}
	// A swap costs what the store it replaces would (on amd64 both are one XCHG).
	if w.since.Swap(now) == parked {
		w.wake()
	}
	err := send(m)
	w.since.Store(0)
	w.last.Store(int64(SentSize(m)))
	return err
}

// SentSize is the encoded size of m, which a Send has just handed to gRPC: its encoding
// cached the size, so this costs no walk of the message (it is computed if no size is
// cached).
func SentSize(m proto.Message) int { return sentSize.Size(m) }

var sentSize = proto.MarshalOptions{UseCachedSize: true}

// Stalled reports whether the Send in progress has been waiting for longer than d, and
// d more for every [DrainRate] bytes of the message before it.
func (w *SendWatch) Stalled(d time.Duration) bool {
	// last before since: Send stores last after it clears since, so a last read first
	// is never newer than the Send whose start is read. Read the other way round, a
	// Send ending and the next one starting between the two loads would pair the old
	// start with the smaller allowance of the message just sent.
	last := w.last.Load()
	since := w.since.Load()
	if since == 0 || since == parked {
		return false
	}
	return w.now()-since > Allowance(d, last)
}

// Allowance is d once, and once more per [DrainRate] bytes of a last message of size
// last, saturated at the longest Duration. Unsaturated, a send timeout of a million
// hours wraps around behind a message of 128 KiB to an allowance below zero (longer
// timeouts behind smaller messages), and every Send behind it counts as stalled at once.
func Allowance(d time.Duration, last int64) int64 {
	n := 1 + last/DrainRate
	if d > 0 && int64(d) > math.MaxInt64/n {
		return math.MaxInt64
	}
	return int64(d) * n
}

// monoEpoch anchors monoNow, a monotonic clock in nanoseconds that is never 0.
var monoEpoch = time.Now()

func monoNow() int64 { return int64(time.Since(monoEpoch)) + 1 }

// SetClock has w time its Sends by clock instead of the monotonic clock (nil restores
// it). It must be set before any Send, and before anything calls Stalled.
func (w *SendWatch) SetClock(clock Clock) { w.clock = clock }

// Now reads w's clock (see [SendWatch.SetClock]).
func (w *SendWatch) Now() int64 { return w.now() }

// now reads w's clock.
func (w *SendWatch) now() int64 {
	if w.clock != nil {
		return w.clock()
	}
	return monoNow()
}

// OnWake sets what [SendWatch.Park] arranges to run: wake is called by the first Send
// after a successful Park. It must be set before any Park, and not while a Send runs.
func (w *SendWatch) OnWake(wake func()) { w.wake = wake }

// Park reports whether no Send is in progress, and if so has the next Send call the
// function set with [SendWatch.OnWake] as it begins: a supervisor whose timer finds the
// stream idle stops the timer, and the next Send arms it again, so that an idle stream
// costs no timer and a busy one no more than the Sends' own timing. Parking an already
// parked watch reports true.
func (w *SendWatch) Park() bool {
	return w.since.CompareAndSwap(0, parked) || w.since.Load() == parked
}
