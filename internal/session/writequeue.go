package session

import (
	"context"
	"fmt"
)

// The durable stores hand every change to one writer goroutine through a bounded
// queue; these are the queue's two ends.

// submit queues q for the writer and waits for its answer on done. ctx ends only the
// wait for queue room: once queued, a change completes, or fails with ErrClosed when
// Close overtakes it, so a cancelled caller cannot leave a change in doubt. fail turns
// an error into an answer.
func submit[Q, A any](ctx context.Context, queue chan<- Q, quit, writerDone <-chan struct{}, q Q, done <-chan A, fail func(error) A) A {
	select {
	case queue <- q:
	default:
		select {
		case queue <- q:
		case <-ctx.Done():
			return fail(fmt.Errorf("session: waiting for the writer: %w", ctx.Err()))
		case <-quit:
			return fail(ErrClosed)
		}
	}
	select {
	case a := <-done:
		return a
	case <-writerDone:
		// Queued after the writer drained its queue, or answered just before it exited.
		select {
		case a := <-done:
			return a
		default:
			return fail(ErrClosed)
		}
	}
}

// collect appends to batch every request already waiting, up to the queue's capacity
// and maxBatchBytes (size is what batch holds; sizeOf measures a request).
func collect[Q any](queue <-chan Q, batch []Q, size int, sizeOf func(Q) int) []Q {
	for len(batch) < cap(queue) && size < maxBatchBytes {
		select {
		case q := <-queue:
			batch = append(batch, q)
			size += sizeOf(q)
		default:
			return batch
		}
	}
	return batch
}

// drain answers every request still waiting, once the writer stops.
func drain[Q any](queue <-chan Q, answer func(Q)) {
	for {
		select {
		case q := <-queue:
			answer(q)
		default:
			return
		}
	}
}
