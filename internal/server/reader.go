package server

import (
	"context"
	"sync/atomic"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// batchReader is a batch stream's reader goroutine (see [Server.receive]) as its
// handler sees it: whether it started, and how it ended.
//
// gRPC refuses a client message over its own receive limit itself: it ends the stream
// with ResourceExhausted before the reader's Recv returns. The stream's context, and
// with it the batch's, has then ended already (cause Canceled), so the reader's cancel
// cannot record why; the handler asks the reader instead, to report the status the
// client got rather than Canceled (see [Server.endedForMessage]).
type batchReader struct {
	ctx     context.Context // the stream's
	started atomic.Bool
	done    chan struct{} // closed when the reader has returned; made by start
	err     error         // the reader's Recv error; read once done is closed
}

func newBatchReader(ctx context.Context) *batchReader { return &batchReader{ctx: ctx} }

// start runs receive on a goroutine of its own. A quick single call's batch never
// starts its reader, and makes no channel for it.
func (r *batchReader) start(receive func() error) {
	r.done = make(chan struct{})
	r.started.Store(true) // after done: refusal reads done once it sees started
	go func() {
		defer close(r.done)
		r.err = receive()
	}()
}

// refusal is the status gRPC ended the stream with for a client message it refused as
// too large, nil if it did not. It waits for the reader only once the stream has
// ended, when the reader's Recv returns at once; a reader that never started read
// nothing. A quietly started batch must have ended its hold (so that no reader can
// start later) before it asks.
func (r *batchReader) refusal() error {
	if r.ctx.Err() == nil || !r.started.Load() {
		return nil
	}
	<-r.done
	if status.Code(r.err) == codes.ResourceExhausted {
		return r.err
	}
	return nil
}
