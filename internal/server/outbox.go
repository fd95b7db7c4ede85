package server

import (
	"errors"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
)

type batchStream = grpc.BidiStreamingServer[toolsdv1.ExecuteBatchRequest, toolsdv1.ExecuteBatchResponse]

var errClientGone = errors.New("server: client stream closed")

// directBudget is how many bytes of a stream's messages producers send themselves,
// before any goes through the queue.
//
// A Send blocks only when the stream's write quota is used up: grpc-go (v1.85) gives
// each stream 64 KiB of data that may wait for the connection, refilled as it is
// written, and a Send waits only if none is left when it starts. A stream that has been
// sent less than that in total therefore cannot block its producer, however slowly the
// client reads; half of it is the margin. Most batches fit whole (accepted, results,
// settled), and sending them directly saves waking the sender goroutine for every
// message, which is most of a small call's latency.
const directBudget = 32 << 10

// grpcPrefix is the length prefix gRPC puts before each message.
const grpcPrefix = 5

// outbox decouples the scheduler from a client's reading speed. Producers (the commit
// path, approvers, progress) send the stream's first messages themselves while they fit
// [directBudget]; after that, messages go into a bounded queue that one sender
// goroutine, owned by the ExecuteBatch handler, writes to the stream. A client that
// stops reading fills the queue; a put that cannot enqueue within the write timeout
// cuts the client off (onCut cancels the batch) while the scheduler keeps committing to
// the log.
type outbox struct {
	stream  batchStream
	size    int
	timeout time.Duration
	onCut   func(error)

	// sendMu orders producers: it is held around a direct send and the decision to
	// queue, so messages leave in the order producers got it. It is taken before mu.
	sendMu sync.Mutex
	sent   int  // bytes sent directly
	queued bool // the queue is in use: every later message goes through it
	// Made when the queue is first used.
	ch   chan *toolsdv1.ExecuteBatchResponse
	done chan struct{} // closed when the sender exits

	mu     sync.Mutex
	err    error // first failure; after it every put fails fast
	closed bool
}

func newOutbox(stream batchStream, size int, timeout time.Duration, onCut func(error)) *outbox {
	return &outbox{stream: stream, size: size, timeout: timeout, onCut: onCut}
}

// direct sends m itself when the stream's budget allows; it reports false, and starts
// the queue, when m must be queued instead. The caller holds sendMu.
func (o *outbox) direct(m *toolsdv1.ExecuteBatchResponse) (sent bool, err error) {
	if !o.queued {
		if n := proto.Size(m) + grpcPrefix; o.sent+n <= directBudget {
			o.sent += n
			if err := o.stream.Send(m); err != nil {
				err = errors.Join(errClientGone, err)
				o.fail(err)
				return true, err
			}
			return true, nil
		}
		o.queued = true
		o.ch = make(chan *toolsdv1.ExecuteBatchResponse, o.size)
		o.done = make(chan struct{})
		go o.run()
	}
	return false, nil
}

func (o *outbox) run() {
	defer close(o.done)
	for m := range o.ch {
		if err := o.stream.Send(m); err != nil {
			o.fail(errors.Join(errClientGone, err))
			return
		}
	}
}

func (o *outbox) fail(err error) {
	o.mu.Lock()
	first := o.err == nil
	if first {
		o.err = err
	}
	o.mu.Unlock()
	if first && o.onCut != nil {
		o.onCut(err)
	}
}

func (o *outbox) failure() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

// put sends or enqueues m, waiting at most the write timeout for room in the queue.
func (o *outbox) put(m *toolsdv1.ExecuteBatchResponse) error {
	if err := o.failure(); err != nil {
		return err
	}
	o.sendMu.Lock()
	sent, err := o.direct(m)
	o.sendMu.Unlock()
	if sent {
		return err
	}
	select {
	case o.ch <- m:
		return nil
	default:
	}
	t := time.NewTimer(o.timeout)
	defer t.Stop()
	select {
	case o.ch <- m:
		return nil
	case <-o.done:
		return o.failure()
	case <-t.C:
		o.fail(errSlowClient)
		return errSlowClient
	}
}

// tryPut sends or enqueues m only if that cannot wait: progress is best-effort. It may
// race with close (a provider's progress can trail its result), so it holds sendMu and
// mu, which close takes too.
func (o *outbox) tryPut(m *toolsdv1.ExecuteBatchResponse) {
	o.sendMu.Lock()
	defer o.sendMu.Unlock()
	o.mu.Lock()
	gone := o.err != nil || o.closed
	o.mu.Unlock()
	if gone {
		return
	}
	if sent, _ := o.direct(m); sent {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	select {
	case o.ch <- m:
	default:
	}
}

// close stops accepting messages and waits (bounded by the write timeout) for the
// sender to flush. Producers must have stopped before close is called.
func (o *outbox) close() error {
	o.sendMu.Lock() // a direct send in progress finishes first
	o.mu.Lock()
	queued := o.queued
	if !o.closed {
		o.closed = true
		if queued {
			close(o.ch)
		}
	}
	o.mu.Unlock()
	o.sendMu.Unlock()
	if !queued {
		return o.failure()
	}
	t := time.NewTimer(o.timeout)
	defer t.Stop()
	select {
	case <-o.done:
		return o.failure()
	case <-t.C:
		o.fail(errSlowClient)
		return errSlowClient
	}
}
