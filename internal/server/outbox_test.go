package server

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
)

// TestOutboxCloseReportsACutMadeAsItFlushed: a send check that found the sender's last
// Send stalled just as it returned cut the client off (SLOW_CLIENT, written at the cut)
// while close stopped it, but close had read the outbox's failure before it stopped the
// check, and reported none: the ExecuteBatch handler then logged and counted its RPC as
// OK while its client got SLOW_CLIENT. close now stops the check before it reads the
// failure, as ReadSession and WatchSession do.
func TestOutboxCloseReportsACutMadeAsItFlushed(t *testing.T) {
	inCheck, release := make(chan struct{}), make(chan struct{})
	checking := make(chan struct{}) // the check is under way: the client may read
	closed := make(chan error, 1)
	var block atomic.Bool
	// The Sends read 1; the check, once block is set, reads a time long past any
	// allowance, once the test lets it.
	clock := func() int64 {
		if block.CompareAndSwap(true, false) {
			close(inCheck)
			<-release
			return int64(1000 * time.Hour)
		}
		return 1
	}
	stream := openBatch(t, func(stream batchStream) error {
		if _, err := stream.Recv(); err != nil {
			return err
		}
		out := newOutbox(stream, 8, time.Hour, nil, func(error) {}, false)
		out.sends.SetClock(clock)
		// The first message uses up the stream's write quota; the sender's Send of the
		// second waits for a client that reads nothing.
		big := &toolsdv1.ExecuteBatchResponse{Msg: &toolsdv1.ExecuteBatchResponse_Result{Result: &toolsdv1.ToolResult{CallId: "c0", Content: strings.Repeat("x", 256<<10)}}}
		last := &toolsdv1.ExecuteBatchResponse{Msg: &toolsdv1.ExecuteBatchResponse_Settled{Settled: &toolsdv1.BatchSettled{Results: 1}}}
		if err := out.put(big); err != nil {
			return err
		}
		if err := out.put(last); err != nil {
			return err
		}
		if err := waitFor("the last Send under way", func() bool {
			return out.written.Load() == 1 && sendInProgress(&out.sends)
		}); err != nil {
			return err
		}
		// The check (its timer is what runs it) finds that Send under way, and reads the clock.
		block.Store(true)
		go out.watch.check()
		<-inCheck
		close(checking)
		closed <- out.close()
		return nil
	})
	<-checking
	for range 2 {
		if _, err := stream.Recv(); err != nil {
			t.Fatalf("Recv() = %v, want the two messages put", err)
		}
	}
	// The last Send has returned: close finds the sender done, and stops the check.
	if err := waitFor("close stopping the check", func() bool {
		return strings.Contains(goroutines(), "(*sendCheck).stop(")
	}); err != nil {
		t.Fatal(err)
	}
	close(release) // the check finds the Send it read stalled, and cuts the client off
	if err := <-closed; !errors.Is(err, errSlowClient) {
		t.Errorf("close() as a check cut the client off = %v, want %v", err, errSlowClient)
	}
}

// goroutines is the stack of every goroutine.
func goroutines() string {
	buf := make([]byte, 1<<20)
	return string(buf[:runtime.Stack(buf, true)])
}

// TestSteadyReaderOfABatchIsNotCutOff: a client that keeps reading, but takes longer
// than the write timeout of real time over each message (a slow link, or a loaded
// machine), gets every message: the outbox's waits on the client are timed by the
// sends' clock, which here moves a tenth of the write timeout per message the client
// takes, so the test does not depend on how fast either side runs.
func TestSteadyReaderOfABatchIsNotCutOff(t *testing.T) {
	const n, timeout = 40, time.Millisecond
	var now atomic.Int64
	now.Store(1)
	clock := func() int64 { return now.Load() }
	closed := make(chan error, 1)
	stream := openBatch(t, func(stream batchStream) error {
		if _, err := stream.Recv(); err != nil {
			return err
		}
		// 40 KB messages through the client's 64 KiB window: the queue of 8 fills, and
		// puts wait on the client as the Sends do.
		out := newOutbox(stream, 8, timeout, clock, func(error) {}, false)
		for i := range n {
			m := &toolsdv1.ExecuteBatchResponse{Msg: &toolsdv1.ExecuteBatchResponse_Result{Result: &toolsdv1.ToolResult{CallId: fmt.Sprint("c", i), Content: strings.Repeat("x", 40000)}}}
			if err := out.put(m); err != nil {
				closed <- err
				return err
			}
		}
		if err := out.put(&toolsdv1.ExecuteBatchResponse{Msg: &toolsdv1.ExecuteBatchResponse_Settled{Settled: &toolsdv1.BatchSettled{Results: n}}}); err != nil {
			closed <- err
			return err
		}
		closed <- out.close()
		return nil
	})
	results := 0
	for {
		m, err := stream.Recv()
		if err != nil {
			t.Fatalf("after %d results: Recv() = %v, want every result and settled", results, err)
		}
		if m.GetSettled() != nil {
			break
		}
		results++
		now.Add(int64(timeout) / 10)
		time.Sleep(5 * timeout) // real time well past the write timeout: only the clock decides
	}
	if results != n {
		t.Errorf("got %d results before settled, want %d", results, n)
	}
	if err := <-closed; err != nil {
		t.Errorf("the outbox ended with %v, want nil", err)
	}
}
