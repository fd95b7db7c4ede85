package streamgate

import (
	"errors"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/wrapperspb"
)

// TestSendWatch checks what counts as stalled: only a Send in progress, past the send
// timeout plus one timeout per DrainRate bytes of the message sent before it.
func TestSendWatch(t *testing.T) {
	var w SendWatch
	if w.Stalled(0) {
		t.Error("Stalled with no Send in progress")
	}
	failed := errors.New("stream closed")
	big := wrapperspb.Bytes(make([]byte, 3*DrainRate))
	if err := Send(&w, func(*wrapperspb.BytesValue) error { return failed }, big); !errors.Is(err, failed) {
		t.Fatalf("Send() = %v, want the send's own error", err)
	}
	if got, want := w.last.Load(), int64(3*DrainRate+4); got != want { // tag and length prefix
		t.Fatalf("last message size = %d, want %d", got, want)
	}
	// A Send that began 2.5s ago, behind 3 DrainRates' bytes: 4 timeouts of 1s allowed.
	w.since.Store(monoNow() - int64(2500*time.Millisecond))
	if w.Stalled(time.Second) {
		t.Error("Stalled after 2.5s behind a large message, want 4s allowed")
	}
	if !w.Stalled(500 * time.Millisecond) {
		t.Error("not Stalled after 2.5s with 4 × 500ms allowed")
	}
	small := wrapperspb.Bytes([]byte("x"))
	if err := Send(&w, func(*wrapperspb.BytesValue) error { return nil }, small); err != nil {
		t.Fatal(err)
	}
	w.since.Store(monoNow() - int64(2500*time.Millisecond))
	if !w.Stalled(time.Second) {
		t.Error("not Stalled after 2.5s behind a small message, want 1s allowed")
	}
}

// TestSendWatchPark: a watch parks only with no Send in progress, and the first Send
// after a park (only that one) calls the wake function; a parked watch is not stalled.
func TestSendWatchPark(t *testing.T) {
	var w SendWatch
	wakes := 0
	w.OnWake(func() { wakes++ })
	for i := range 2 { // parking a parked watch is fine too
		if !w.Park() {
			t.Fatalf("Park() #%d with no Send in progress = false", i+1)
		}
	}
	if w.Stalled(0) {
		t.Error("Stalled on a parked watch")
	}
	m := wrapperspb.Bytes([]byte("x"))
	parkedDuring := true
	send := func(*wrapperspb.BytesValue) error {
		parkedDuring = w.Park()
		return nil
	}
	if err := Send(&w, send, m); err != nil {
		t.Fatal(err)
	}
	if parkedDuring {
		t.Error("Park() during a Send = true")
	}
	if err := Send(&w, func(*wrapperspb.BytesValue) error { return nil }, m); err != nil {
		t.Fatal(err)
	}
	if wakes != 1 {
		t.Errorf("wake called %d times, want once: by the first Send after the park", wakes)
	}
}

// TestSendWatchHugeTimeout: a send timeout so long that its allowance behind a large
// message is past what a Duration holds allows that much, not a wrapped-around
// negative allowance that counts every Send behind the message as stalled at once.
func TestSendWatchHugeTimeout(t *testing.T) {
	tests := map[string]struct {
		timeout time.Duration
		size    int
	}{
		"1000000h behind 3 DrainRates":  {timeout: 1000000 * time.Hour, size: 3 * DrainRate},
		"longest behind 1 DrainRate":    {timeout: time.Duration(math.MaxInt64), size: DrainRate},
		"2562047h behind 64 DrainRates": {timeout: 2562047 * time.Hour, size: 64 * DrainRate},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var w SendWatch
			m := wrapperspb.Bytes(make([]byte, tc.size))
			if err := Send(&w, func(*wrapperspb.BytesValue) error { return nil }, m); err != nil {
				t.Fatal(err)
			}
			w.since.Store(monoNow() - int64(time.Second))
			if w.Stalled(tc.timeout) {
				t.Errorf("Stalled(%v) after 1s behind %d bytes = true, want false", tc.timeout, tc.size)
			}
		})
	}
}

// TestSendWatchClock: a watch given a clock times its Sends by that clock: a Send is
// stalled once the clock has moved past the timeout (an hour) since the Send began,
// however little real time has passed, and not before.
func TestSendWatchClock(t *testing.T) {
	var now atomic.Int64
	now.Store(1)
	var w SendWatch
	w.SetClock(now.Load)
	const timeout = time.Hour
	m := wrapperspb.Bytes([]byte("x"))
	began, release, sent := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sent)
		_ = Send(&w, func(*wrapperspb.BytesValue) error {
			close(began)
			<-release
			return nil
		}, m)
	}()
	<-began
	now.Add(int64(timeout))
	if w.Stalled(timeout) {
		t.Error("Stalled after the clock moved the timeout exactly, want more allowed")
	}
	now.Add(1)
	if !w.Stalled(timeout) {
		t.Error("not Stalled after the clock moved past the timeout")
	}
	close(release)
	<-sent
	if w.Stalled(0) {
		t.Error("Stalled with no Send in progress")
	}
}
