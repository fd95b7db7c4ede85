package server

import (
	"errors"
	"sync"
	"time"

	"google.golang.org/grpc"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
)

type batchStream = grpc.BidiStreamingServer[toolsdv1.ExecuteBatchRequest, toolsdv1.ExecuteBatchResponse]

var errClientGone = errors.New("server: client stream closed")

// outbox decouples the scheduler from a client's reading speed. Producers (the commit
// path, approvers, progress) put messages into a bounded queue; one sender goroutine,
// owned by the ExecuteBatch handler, writes them to the stream. A client that stops
// reading fills the queue; a put that cannot enqueue within the write timeout cuts the
// client off (onCut cancels the batch) while the scheduler keeps committing to the log.
type outbox struct {
	stream  batchStream
	ch      chan *toolsdv1.ExecuteBatchResponse
	done    chan struct{} // closed when the sender exits
	timeout time.Duration
	onCut   func(error)

	mu     sync.Mutex
	err    error // first failure; after it every put fails fast
	closed bool
}

func newOutbox(stream batchStream, size int, timeout time.Duration, onCut func(error)) *outbox {
	o := &outbox{
		stream:  stream,
		ch:      make(chan *toolsdv1.ExecuteBatchResponse, size),
		done:    make(chan struct{}),
		timeout: timeout,
		onCut:   onCut,
	}
	go o.run()
	return o
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

// put enqueues m, waiting at most the write timeout for room.
func (o *outbox) put(m *toolsdv1.ExecuteBatchResponse) error {
	if err := o.failure(); err != nil {
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

// tryPut enqueues m only if there is room: progress is best-effort.
// It may race with close (a provider's progress can trail its result), so it holds mu.
func (o *outbox) tryPut(m *toolsdv1.ExecuteBatchResponse) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err != nil || o.closed {
		return
	}
	select {
	case o.ch <- m:
	default:
	}
}

// close stops accepting messages and waits (bounded by the write timeout) for the
// sender to flush. Producers must have stopped before close is called.
func (o *outbox) close() error {
	o.mu.Lock()
	if !o.closed {
		o.closed = true
		close(o.ch)
	}
	o.mu.Unlock()
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
