package server

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/toolsd/toolsd/internal/streamgate"
)

// TestSendCheckStoppedStaysStopped: a check that runs as stop does (its timer fired just
// before stop stopped it) found a Send in progress and armed the timer again, which then
// kept the stream for one more write timeout after its handler was done.
func TestSendCheckStoppedStaysStopped(t *testing.T) {
	var sends streamgate.SendWatch
	release, sent := make(chan struct{}), make(chan struct{})
	c := startSendCheck(&sends, time.Hour, func() { t.Error("a Send that began just now counted as stalled") })
	go func() {
		defer close(sent)
		_ = streamgate.Send(&sends, func(*emptypb.Empty) error { <-release; return nil }, &emptypb.Empty{})
	}()
	for !sendInProgress(&sends) {
		time.Sleep(time.Millisecond) // until the Send has begun: no timing is asserted
	}
	c.stop()
	c.check() // the timer's function, running as stop did
	if c.t.Stop() {
		t.Error("the timer was armed again after stop")
	}
	close(release)
	<-sent
}

// sendInProgress reports whether a Send on w has begun and not returned: only such a
// Send is stalled past a negative timeout.
func sendInProgress(w *streamgate.SendWatch) bool { return w.Stalled(-time.Hour) }

// TestSendCheckStopWaitsForACut: a cut that a check made as stop ran was not seen by the
// handler, which then logged and counted its RPC as OK while the client got SLOW_CLIENT.
// A check cuts under the lock that stop takes, so once stop has returned the cut, if
// any, is visible.
func TestSendCheckStopWaitsForACut(t *testing.T) {
	var sends streamgate.SendWatch
	release, sent := make(chan struct{}), make(chan struct{})
	cutting, cut := make(chan struct{}), make(chan struct{})
	c := startSendCheck(&sends, time.Hour, func() {
		close(cutting)
		<-cut
	})
	go func() {
		defer close(sent)
		_ = streamgate.Send(&sends, func(*emptypb.Empty) error { <-release; return nil }, &emptypb.Empty{})
	}()
	for !sendInProgress(&sends) {
		time.Sleep(time.Millisecond) // until the Send has begun: no timing is asserted
	}
	c.timeout = -time.Hour // every Send in progress now counts as stalled
	go c.check()           // the timer's function
	<-cutting
	if c.mu.TryLock() {
		c.mu.Unlock()
		t.Error("a check cuts without the lock stop takes: stop could return before the cut is made")
	}
	close(cut)
	c.stop()
	close(release)
	<-sent
}
