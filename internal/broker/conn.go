package broker

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/streamgate"
	"github.com/toolsd/toolsd/internal/tool"
)

var (
	errSendClosed  = errors.New("broker: provider stream is closed")
	errSendAborted = errors.New("broker: gave up waiting to send")
)

// sender is the half of the stream the broker writes to.
type sender interface {
	Send(*toolsdv1.ProviderServiceConnectResponse) error
}

// conn is one provider stream.
type conn struct {
	b   *Broker
	id  string
	ctx context.Context // the stream's: the receive loop's sends give up when it ends
	out sender
	log *zap.Logger

	quit     chan struct{} // closed when teardown begins
	quitOnce sync.Once
	welcomed chan struct{} // closed once the welcome went out

	// Set by hello before the conn is published; read-only afterwards.
	name, version string
	maxInFlight   int
	connectedAt   time.Time

	// sem is the one-slot send lock: gRPC allows one concurrent Send per stream. A
	// channel rather than a mutex lets a waiter give up when its context ends.
	sem        chan struct{}
	sendClosed atomic.Bool   // set by teardown; checked while holding sem
	hasQueued  atomic.Bool   // queued is non-empty
	posting    atomic.Bool   // a post goroutine is waiting for the slot (at most one)
	overflow   chan struct{} // closed when the queue overflows: the provider is not reading
	overflowed sync.Once
	maxQueued  int // the messages the queue holds (see queueLimit)
	// sends times the Send in progress: a provider that stops reading leaves one
	// waiting, and the supervisor ends the stream.
	sends streamgate.SendWatch

	mu sync.Mutex
	// nextReq is the last request id issued on this stream. Ids are numbered per stream,
	// so a provider sees 1, 2, 3, … for its own calls only: numbered across streams, the
	// gaps between them would tell it how many calls the other providers (tenants) get.
	nextReq uint64
	pending map[uint64]*pendingCall
	queued  []*toolsdv1.ProviderServiceConnectResponse // cancels and registration answers
	closed  bool

	queuedBytes int // the encoded size of queued

	// live guards the receive loop's processing of a message. The teardown retires it,
	// so nothing the loop does (a log line, a delivery) follows the end of the handler.
	// It is skipped only when the loop may be stuck in the hello's send.
	live   streamgate.Retire
	strays int // stray messages warned about; the receive loop's alone
	// rejections counts the refused registrations logged (see logRejected); the
	// receive loop's alone.
	rejections int
	// quiet guards the log lines of sends the teardown gave up waiting for: such a
	// send fails after the handler returned, and says nothing then.
	quiet streamgate.Retire

	// regMu is held around registrar calls, never around a send, so the teardown can
	// always take it: no registration can follow the RemoveOwner that ends the stream.
	regMu     sync.Mutex
	regClosed bool
}

func (b *Broker) newConn(ctx context.Context, out sender) *conn {
	id := b.newConnID()
	c := &conn{
		b:         b,
		id:        id,
		ctx:       ctx,
		out:       out,
		log:       b.log.With(zap.String("provider_id", id)),
		quit:      make(chan struct{}),
		welcomed:  make(chan struct{}),
		overflow:  make(chan struct{}),
		maxQueued: queueLimit(b.limits.MaxInFlightPerProvider),
		sem:       make(chan struct{}, 1),
		pending:   make(map[uint64]*pendingCall),
	}
	c.sends.SetClock(b.clock)
	return c
}

// stop closes quit: send waiters give up, no new sends are queued.
func (c *conn) stop() { c.quitOnce.Do(func() { close(c.quit) }) }

// lockSend takes the send slot; it gives up when ctx ends or the stream is being torn
// down.
func (c *conn) lockSend(ctx context.Context) bool {
	select {
	case c.sem <- struct{}{}:
		return true
	default:
	}
	select {
	case c.sem <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	case <-c.quit:
		return false
	}
}

// unlockSend releases the send slot, first sending any messages queued meanwhile.
// Messages are queued by callers that must not wait for the slot (cancels, and the
// receive loop's answers to registrations: a loop that waited for the slot could wait on
// a provider that is itself waiting for the loop to read); whoever holds the slot sends
// them. After releasing, it re-checks the queue, so a message queued during the release
// is sent either by this holder or by the next one.
func (c *conn) unlockSend() {
	for {
		if c.hasQueued.Load() {
			c.flushQueued()
		}
		<-c.sem
		if !c.hasQueued.Load() {
			return
		}
		select {
		case c.sem <- struct{}{}:
		default:
			return // another holder will flush on its release
		}
	}
}

// send sends the execute m while holding the send slot, stamped with ctx's deadline and
// the time left until it ([execute.stamp]); sent is set just before m is written. A ctx
// that ended, or passed its deadline, while it waited for the slot sends nothing (see
// [tool.Ended]), nor does a stream whose teardown began: lockSend may still take a free
// slot then, and the provider would get m only to be told goodbye.
func (c *conn) send(ctx context.Context, m *execute, sent *atomic.Bool) error {
	if !c.lockSend(ctx) {
		return errSendAborted
	}
	defer c.unlockSend()
	if c.sendClosed.Load() || c.isStopped() {
		return errSendClosed
	}
	if !m.stamp(ctx) {
		return errSendAborted
	}
	sent.Store(true)
	return c.write(&m.resp)
}

// write sends m; the caller holds the send slot.
func (c *conn) write(m *toolsdv1.ProviderServiceConnectResponse) error {
	return streamgate.Send(&c.sends, c.out.Send, m)
}

// flushQueued sends the queued messages; the caller holds the send slot.
func (c *conn) flushQueued() {
	c.mu.Lock()
	q := c.queued
	c.queued, c.queuedBytes = nil, 0
	c.hasQueued.Store(false)
	c.mu.Unlock()
	if c.sendClosed.Load() {
		return
	}
	for _, m := range q {
		if err := c.write(m); err != nil {
			c.quiet.Do(func() { c.log.Debug("queued message not sent", zap.Error(err)) })
			return
		}
	}
}

// cancel tells the provider to stop request id without waiting for the send slot: it
// sends the cancel now if the slot is free, else the slot's holder sends it when it
// releases the slot.
func (c *conn) cancel(id uint64, reason string) {
	if !c.enqueue(cancelMsg(id, reason)) {
		return
	}
	select {
	case c.sem <- struct{}{}:
		c.unlockSend()
	default: // the holder sends it when it releases the slot
	}
}

// post sends m from the receive loop, which must never wait on a send: even a free
// slot's Send can wait for the provider to read, and the provider may be waiting for
// the loop to read what it is sending. A goroutine takes the slot, or gives up when the
// stream ends; messages are rare (registration answers), so the goroutine is cheap.
//
// At most one such goroutine waits for the slot per stream: whoever holds it sends the
// whole queue, so a provider that sends registrations without reading leaves queued answers
// (up to its queue's limit, see enqueue), not goroutines.
func (c *conn) post(m *toolsdv1.ProviderServiceConnectResponse) {
	if !c.enqueue(m) || !c.posting.CompareAndSwap(false, true) {
		return
	}
	go func() {
		locked := c.lockSend(c.ctx)
		// Cleared before the flush: a message queued from here on is either in the
		// flush or posted by a new goroutine.
		c.posting.Store(false)
		if locked {
			c.unlockSend()
		}
	}()
}

// maxQueuedAnswers and maxQueuedBytes bound the messages waiting for the send slot (see
// queueLimit). A provider that lets more pile up is not reading its stream; the
// supervisor ends the stream. The bytes count because a registration answer echoes its
// tools' names: thousands of answers to large registrations would hold gigabytes. An
// empty queue takes one message of any size.
const (
	maxQueuedAnswers = 3072
	maxQueuedBytes   = 64 << 20
)

// queueLimit is how many messages a stream's queue holds when its provider may run
// maxInFlight calls: one cancel per call, and maxQueuedAnswers more (4096 in all with
// the default limit). Every call may be cancelled while a send holds the slot, and
// those cancels, toolsd's own, must not count as the provider not reading. They
// cannot pile up beyond that: a call is cancelled at most once, only once its execute
// was sent, and the queue is sent whenever the slot is released, so the calls whose
// cancels wait were all in flight when the slot's holder took it (give or take the
// holder's own call and a result racing its cancel, which the answers' room absorbs).
// A limit near math.MaxInt does not wrap around.
func queueLimit(maxInFlight int) int {
	return min(maxInFlight, math.MaxInt-maxQueuedAnswers) + maxQueuedAnswers
}

// enqueue queues m for the next holder of the send slot to send. It reports false, and
// drops m, once the stream is closed or the queue is full.
func (c *conn) enqueue(m *toolsdv1.ProviderServiceConnectResponse) bool {
	size := proto.Size(m)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	if len(c.queued) >= c.maxQueued || (len(c.queued) > 0 && c.queuedBytes+size > maxQueuedBytes) {
		c.overflowed.Do(func() { close(c.overflow) })
		return false
	}
	c.queued = append(c.queued, m)
	c.queuedBytes += size
	c.hasQueued.Store(true)
	return true
}

// closeSend sends goodbye (if non-nil) and forbids further sends. It waits at most
// goodbyeWait for a send in progress, and as long again for the goodbye, so a provider
// that stopped reading cannot stall the stream's end; it reports whether no send other
// than its own goodbye is left in progress.
func (c *conn) closeSend(goodbye *toolsdv1.ProviderServiceConnectResponse) bool {
	locked := false
	select {
	case c.sem <- struct{}{}:
		locked = true
	default:
		t := time.NewTimer(goodbyeWait)
		select {
		case c.sem <- struct{}{}:
			locked = true
		case <-t.C:
		}
		t.Stop()
	}
	if !locked {
		c.sendClosed.Store(true)
		c.log.Warn("provider stream send blocked; closing without goodbye")
		return false
	}
	if goodbye == nil || c.sendClosed.Load() {
		c.sendClosed.Store(true)
		<-c.sem
		return true
	}
	c.sayGoodbye(goodbye)
	return true
}

// sayGoodbye sends goodbye while holding the send slot, which it releases, and forbids
// further sends. The slot being free does not mean the provider reads: the last send
// may have used up the stream's flow-control window, and the goodbye would then wait in
// Send until the provider reads. It is written by a goroutine that the stream's end
// releases; after goodbyeWait the teardown goes on without it.
func (c *conn) sayGoodbye(goodbye *toolsdv1.ProviderServiceConnectResponse) {
	sent := make(chan struct{})
	go func() {
		err := c.write(goodbye)
		c.sendClosed.Store(true)
		<-c.sem
		if err != nil {
			c.quiet.Do(func() { c.log.Debug("goodbye not sent", zap.Error(err)) })
		}
		close(sent)
	}()
	t := time.NewTimer(goodbyeWait)
	defer t.Stop()
	select {
	case <-sent:
	case <-t.C:
		c.sendClosed.Store(true)
		c.log.Warn("provider stream not read; closing without waiting for the goodbye to be sent")
	}
}

// begin records p as pending and returns its request id, or the rejection code and the
// in-flight limit when the call cannot be dispatched.
func (c *conn) begin(p *pendingCall) (uint64, tool.Code, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, tool.CodeProviderUnavailable, 0
	}
	if len(c.pending) >= c.maxInFlight {
		return 0, tool.CodeProviderOverloaded, c.maxInFlight
	}
	c.nextReq++
	id := c.nextReq
	c.pending[id] = p
	return id, "", 0
}

// take removes and returns the pending call for id, or nil if id is not pending here.
func (c *conn) take(id uint64) *pendingCall {
	c.mu.Lock()
	p := c.pending[id]
	if p != nil {
		delete(c.pending, id)
	}
	c.mu.Unlock()
	return p
}

// answer removes and returns the pending call a result for id answers: nil unless id is
// pending here and its execute was sent (a provider that guessed the id of a call still
// waiting for the send slot answers a call it was never sent).
func (c *conn) answer(id uint64) *pendingCall {
	c.mu.Lock()
	p := c.pending[id]
	if p != nil && p.sent.Load() {
		delete(c.pending, id)
	} else {
		p = nil
	}
	c.mu.Unlock()
	return p
}

// issued reports whether request id was issued on this stream (it may be finished).
func (c *conn) issued(id uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return id != 0 && id <= c.nextReq
}

// forget withdraws request id; false means someone else already resolved it and its
// result is (or is about to be) in the call's channel.
func (c *conn) forget(id uint64) bool { return c.take(id) != nil }

// failPending closes the conn for calls and fails every pending call with PROVIDER_GONE,
// or, if its execute was never sent, PROVIDER_UNAVAILABLE, which the call, waking in
// notSent, turns into ABORTED_BEFORE_DISPATCH if its context has ended and otherwise
// counts as rejected, as it does when it withdraws itself first (see [conn.unsent]).
func (c *conn) failPending() int {
	c.mu.Lock()
	c.closed = true
	pend := c.pending
	c.pending = nil
	c.queued, c.queuedBytes = nil, 0
	c.mu.Unlock()
	for _, p := range pend {
		if !p.sent.Load() { // still waiting for the send slot: the provider never saw it
			p.done <- disconnectedUnsent(c.id)
			continue
		}
		p.done <- tool.Failure(tool.CodeProviderGone, "provider disconnected while the call was running")
	}
	return len(pend)
}

// registering runs fn (registrar calls) unless the stream's registrations were already
// removed; it reports whether fn ran.
func (c *conn) registering(fn func()) bool {
	c.regMu.Lock()
	defer c.regMu.Unlock()
	if c.regClosed {
		return false
	}
	fn()
	return true
}

// closeRegistrations waits for registrar calls in progress and refuses later ones.
func (c *conn) closeRegistrations() {
	c.regMu.Lock()
	c.regClosed = true
	c.regMu.Unlock()
}

// retire waits for the receive loop to finish the message in hand and stops it from
// processing more.
func (c *conn) retire() { c.live.Retire() }

func (c *conn) info() ProviderInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	return ProviderInfo{
		ID:          c.id,
		Name:        c.name,
		Version:     c.version,
		ConnectedAt: c.connectedAt,
		MaxInFlight: c.maxInFlight,
		InFlight:    len(c.pending),
	}
}
