package server

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/streamgate"
)

type batchStream = grpc.BidiStreamingServer[toolsdv1.ExecuteBatchRequest, toolsdv1.ExecuteBatchResponse]

var errClientGone = errors.New("server: client stream closed")

// directLimit is how many bytes a direct outbox writes from the handler's goroutine.
// grpc-go's Send blocks only once a stream's queued, unwritten bytes have used up its
// write quota (64 KiB); a stream that has been sent fewer bytes than that in all cannot
// have, so a Send below the limit returns without waiting for the client. What a
// message costs the quota is its encoded size plus the 5-byte message header, and
// compressed (gRPC answers a gzip client in gzip) at most directOverhead more.
const (
	directLimit    = 32 << 10
	directOverhead = 5 + 64 // message header; gzip's header, trailer and stored-block framing
)

// outbox decouples the scheduler from a client's reading speed. Producers (the commit
// path, approvers, progress) put messages into a bounded queue; one sender goroutine,
// owned by the ExecuteBatch handler, writes them to the stream. A client that stops
// reading fills the queue; a put that cannot enqueue within the write timeout cuts the
// client off (onCut cancels the batch and ends the stream with its status, which ends a
// Send waiting on the client) while the scheduler keeps committing to the log.
// With nothing to put (the calls left still run), a timer that runs while the sender
// writes cuts it off once one Send has waited too long (see sendCheck).
//
// A direct outbox (single-call batches) starts without the goroutine: while less than
// [directLimit] has been sent, a put writes to the stream itself, which cannot block, and
// saves the hand-offs to the sender and back that a lone call's latency would otherwise
// carry. The first put past the limit starts the sender, and from then on it is queued.
// Progress (tryPut, from a provider's receive loop, which must never wait on a client)
// starts the sender too rather than writing itself.
type outbox struct {
	stream  batchStream
	size    int
	timeout time.Duration
	onCut   func(error)

	mu     sync.Mutex
	err    error // first failure; after it every put fails fast
	closed bool
	final  bool // the stream's last message was put: progress is dropped from then on
	direct bool // puts write to the stream under mu; ch and done are nil
	sent   int  // bytes written while direct
	// ch and done are set (under mu) when the sender starts, and never change after.
	ch   chan outItem
	done chan struct{} // closed when the sender exits
	// written counts the sender's writes: a client is cut off only when write timeouts
	// pass without one (see stallWatch).
	written atomic.Uint64
	// lastBytes is the size of the message (or pair) last handed to the stream, which
	// the client may still be taking in while the next Send waits.
	lastBytes atomic.Int64
	// sends times the sender's Sends, for a caller that waits on the client without
	// putting anything (see cutIfStalled), and for watch.
	sends streamgate.SendWatch
	// watch checks the sender's Sends every write timeout while it writes: it is how a
	// client that stopped reading is cut off when nothing waits to be put (the calls
	// left run on; the batch's calls then end as for any cut-off client, and their
	// results are logged). Set with ch and done (see sendCheck).
	watch *sendCheck
}

// newOutbox makes a batch's outbox. clock, if not nil, is what its waits on the client
// are timed by instead of the monotonic clock (tests; see [Deps.SendClock]).
func newOutbox(stream batchStream, size int, timeout time.Duration, clock streamgate.Clock, onCut func(error), direct bool) *outbox {
	o := &outbox{stream: stream, size: size, timeout: timeout, onCut: onCut, direct: direct}
	o.sends.SetClock(clock)
	if !direct {
		o.mu.Lock() // startLocked sets ch, done and watch under mu
		o.startLocked()
		o.mu.Unlock()
	}
	return o
}

// startLocked starts the sender; from then on every put is queued.
func (o *outbox) startLocked() {
	o.direct = false
	o.ch = make(chan outItem, o.size)
	o.done = make(chan struct{})
	o.watch = startSendCheck(&o.sends, o.timeout, func() { o.fail(errSlowClient) })
	go o.run()
}

// outItem is one message, or two to be written back to back: the sender hands both to
// the transport before it writes, so they leave in one write.
type outItem struct {
	m, then *toolsdv1.ExecuteBatchResponse
	// onSend, if set, runs just before m is handed to the stream: from then on the
	// client may have it, and answer it.
	onSend func()
}

func (o *outbox) run() {
	defer close(o.done)
	for it := range o.ch {
		if err := o.send(it); err != nil {
			o.fail(err)
			return
		}
		n := streamgate.SentSize(it.m)
		if it.then != nil {
			n += streamgate.SentSize(it.then)
		}
		o.lastBytes.Store(int64(n))
		o.written.Add(1)
	}
}

// stallWatch times a wait on the client (for room in the queue, or for the sender to
// flush): its timer fires every write timeout, and the time is read from the sends'
// clock (see [streamgate.SendWatch.SetClock]).
type stallWatch struct {
	o     *outbox
	t     *time.Timer
	last  uint64 // the sender's writes when the watch last saw one
	since int64  // the sends' clock then
}

func (o *outbox) watchStall() stallWatch {
	return stallWatch{o: o, t: time.NewTimer(o.timeout), last: o.written.Load(), since: o.sends.Now()}
}

// stuck is called when the timer fires. It cuts the client off (and reports true) when
// it has taken no message for longer than it may: one write timeout, plus one for every
// [streamgate.DrainRate] bytes of the message last handed to the stream (a large
// message may keep the next Send waiting while a slow link carries it); else it rearms
// the timer.
func (w *stallWatch) stuck() bool {
	now := w.o.sends.Now()
	if n := w.o.written.Load(); n != w.last {
		w.last, w.since = n, now
	} else if now-w.since >= streamgate.Allowance(w.o.timeout, w.o.lastBytes.Load()) {
		w.o.fail(errSlowClient)
		return true
	}
	w.t.Reset(w.o.timeout)
	return false
}

func (o *outbox) send(it outItem) error {
	if it.onSend != nil {
		it.onSend()
	}
	err := streamgate.Send(&o.sends, o.stream.Send, it.m)
	if err == nil && it.then != nil {
		err = streamgate.Send(&o.sends, o.stream.Send, it.then)
	}
	if err != nil {
		return errors.Join(errClientGone, err)
	}
	return nil
}

// sendDirectLocked writes what it can of it from the caller's goroutine, if the outbox
// is direct, checking the limit before each message: a pair whose first message crosses
// the limit has its second queued (starting the sender). It returns what is left to
// queue (left false if nothing) and the error of a write that failed, for the caller
// to record with fail once mu is released.
func (o *outbox) sendDirectLocked(it outItem) (rest outItem, left bool, err error) {
	for it.m != nil {
		if !o.direct {
			return it, true, nil
		}
		if o.sent >= directLimit {
			o.startLocked()
			return it, true, nil
		}
		if it.onSend != nil {
			it.onSend() // before the size: it may still fill in m (an approval's id)
		}
		n := proto.Size(it.m)
		o.sent += n + directOverhead
		// Timed by sends too: it records the message's size, the allowance a Send of the
		// sender waiting behind it gets (see sendCheck).
		if err := streamgate.Send(&o.sends, o.stream.Send, it.m); err != nil {
			return outItem{}, false, errors.Join(errClientGone, err)
		}
		o.lastBytes.Store(int64(n))
		it = outItem{m: it.then}
	}
	return outItem{}, false, nil
}

// cutIfStalled cuts the client off, as a put waiting for room would, when the sender
// has waited in one Send for longer than the write timeout allows (one more per
// [streamgate.DrainRate] bytes of the message before it), and reports whether the
// client is cut off. A put watches the client only while it waits for room, so a
// caller that waits on the client with nothing to put (an approval: the request may
// sit behind results the client never takes) calls this every write timeout.
func (o *outbox) cutIfStalled() bool {
	if o.sends.Stalled(o.timeout) {
		o.fail(errSlowClient)
	}
	return o.failure() != nil
}

// fail records the first failure and cuts the client off with it.
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
func (o *outbox) put(m *toolsdv1.ExecuteBatchResponse) error { return o.putItem(outItem{m: m}) }

// putAsk enqueues m, calling onSend just before it is handed to the stream.
func (o *outbox) putAsk(m *toolsdv1.ExecuteBatchResponse, onSend func()) error {
	return o.putItem(outItem{m: m, onSend: onSend})
}

// putPair enqueues m and then, to be written together.
func (o *outbox) putPair(m, then *toolsdv1.ExecuteBatchResponse) error {
	return o.putItem(outItem{m: m, then: then})
}

// putLast enqueues the stream's last message (then, after m if m is not nil). Progress
// that arrives later is dropped: nothing follows the last message.
func (o *outbox) putLast(m, then *toolsdv1.ExecuteBatchResponse) error {
	o.mu.Lock()
	o.final = true
	o.mu.Unlock()
	if m == nil {
		return o.put(then)
	}
	return o.putPair(m, then)
}

func (o *outbox) putItem(it outItem) error {
	o.mu.Lock()
	if err := o.err; err != nil {
		o.mu.Unlock()
		return err
	}
	it, left, err := o.sendDirectLocked(it)
	o.mu.Unlock()
	if err != nil {
		o.fail(err)
		return o.failure()
	}
	if !left {
		return nil
	}
	select {
	case o.ch <- it:
		return nil
	default:
	}
	w := o.watchStall()
	defer w.t.Stop()
	for {
		select {
		case o.ch <- it:
			return nil
		case <-o.done:
			return o.failure()
		case <-w.t.C:
			if w.stuck() {
				return errSlowClient
			}
		}
	}
}

// tryPut enqueues m only if there is room: progress is best-effort.
// It may race with close (a provider's progress can trail its result), so it holds mu.
func (o *outbox) tryPut(m *toolsdv1.ExecuteBatchResponse) {
	o.mu.Lock()
	if o.err != nil || o.closed || o.final {
		o.mu.Unlock()
		return
	}
	if o.direct {
		o.startLocked()
	}
	select {
	case o.ch <- outItem{m: m}:
	default:
	}
	o.mu.Unlock()
}

// close stops accepting messages and waits for the sender to flush, for as long as it
// makes progress: the client is cut off when write timeouts pass without a message
// written, one more than the last message's size allows (see stallWatch.stuck; a
// backlog that takes longer than that to reach a client that keeps reading is not a slow
// client). Producers must have stopped before close is called.
func (o *outbox) close() error {
	o.mu.Lock()
	queued := o.ch != nil
	if !o.closed {
		o.closed = true
		if queued {
			close(o.ch)
		}
	}
	watch := o.watch
	o.mu.Unlock()
	if !queued {
		return o.failure()
	}
	// Stopped once the handler is done with the stream, or the timer would keep the
	// outbox (and its stream) for up to a write timeout after the batch.
	defer watch.stop()
	w := o.watchStall()
	defer w.t.Stop()
	for {
		select {
		case <-o.done:
			// Stopped before the failure is read: a check under way may cut the client
			// off as the last Send returns, and the handler must report that cut, which
			// the client is told, rather than success.
			watch.stop()
			return o.failure()
		case <-w.t.C:
			if w.stuck() {
				return errSlowClient
			}
		}
	}
}
