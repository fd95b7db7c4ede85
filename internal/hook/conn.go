package hook

import (
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/streamgate"
)

type response = toolsdv1.HookServiceConnectResponse

// sender is the half of the stream the writer uses.
type sender interface {
	Send(*response) error
}

// answer is what one consulted hook's request resolves to: a decision or a failure.
type answer struct {
	slot int
	d    *toolsdv1.HookDecision
	err  error
}

// waiter is a pending request: the slot it fills in its call's answer channel, and the
// request id the writer sent it under (0 until it is sent).
type waiter struct {
	slot int
	ch   chan<- answer
	id   uint64
}

// outbound is a request waiting for the writer.
type outbound struct {
	key uint64 // its key in pending
	msg *response
}

// conn is one hook stream.
type conn struct {
	h   *Hub
	id  string
	seq uint64
	out sender
	// log names the stream; it never changes (the receive loop reads it concurrently).
	log *zap.Logger
	// allow is the identity's scope filter; it never changes.
	allow func(scope string) bool
	// confined: the identity may not see every tenant's calls (see [Scopes]).
	confined bool
	identity string // the caller, for the per-identity cap of confined hooks

	// hello is set by the handler before the conn is attached; read-only afterwards.
	hello       hello
	connectedAt time.Time
	// started is set by the handler once the writer runs; only the handler reads it.
	started bool

	// helloCh carries the first message's hello from the receive loop to the handler.
	helloCh chan *toolsdv1.HookHello
	// sawHello is touched only by the receive loop.
	sawHello bool

	reqs  chan outbound  // requests for the writer
	notes chan *response // result notifications for the writer; full means drop (see notify)
	quit  chan struct{}  // closed by the handler's teardown: the writer stops
	// goodbye, when set before quit is closed, is the writer's last message.
	goodbye    *response
	writerDone chan struct{}
	// sends times the writer's Send in progress (see Hub.serve).
	sends streamgate.SendWatch

	gone chan struct{} // closed by die

	// live guards the receive loop's handling of a message and the writer's logging of
	// its goodbye's failure: the handler's teardown retires it, so no line of theirs
	// follows the end of the handler (which does not wait for either goroutine); later
	// lines are dropped. Neither runs a send under it.
	streamLive streamgate.Retire

	mu sync.Mutex
	// pending holds the requests waiting for a decision by key, a number the hook never
	// sees: a request gets its request id only when the writer sends it.
	pending map[uint64]waiter
	nextKey uint64
	// sent maps the request id of each pending request the writer sent to its key, so a
	// decision resolves only a request the hook was sent.
	sent map[uint64]uint64
	// lastID is the last request id sent on this stream. Ids are numbered per stream, in
	// the order the messages go out, so a hook sees 1, 2, 3, … for its own requests and
	// notifications only: numbered across streams, the gaps between them would tell it
	// how many calls the other hooks (other tenants) see. Only the writer moves it.
	lastID uint64
	// dead: die ran; no notification is queued from then on, and those it found queued
	// were counted lost, unless it left them for the writer to send before its goodbye
	// (see [conn.end]).
	dead  bool
	cause error
	// removed: die has unpublished the conn (its HookConnected(-1) has been counted).
	// A failure that the stream's end causes before then is handed to die (a request
	// stays pending, a lost notification is added to lateLost) and counted after the
	// removal, so the observer never counts it under a name whose series the removal
	// is about to delete.
	removed  bool
	lateLost int
}

func (h *Hub) newConn(out sender, scopes Scopes) *conn {
	allow := scopes.Allow
	if allow == nil {
		allow = func(string) bool { return true }
	}
	seq := h.nextConn.Add(1)
	id := h.ids.Next()
	return &conn{
		h:          h,
		id:         id,
		seq:        seq,
		out:        out,
		log:        h.log.With(zap.String("hook_id", id)),
		allow:      allow,
		confined:   scopes.Confined,
		identity:   scopes.Identity,
		helloCh:    make(chan *toolsdv1.HookHello, 1),
		reqs:       make(chan outbound, requestQueue),
		notes:      make(chan *response, h.opts.resultQueue),
		quit:       make(chan struct{}),
		writerDone: make(chan struct{}),
		gone:       make(chan struct{}),
		pending:    make(map[uint64]waiter),
		sent:       make(map[uint64]uint64),
	}
}

func (c *conn) info() Info {
	c.mu.Lock()
	n := len(c.pending)
	c.mu.Unlock()
	subs := make([]Subscription, len(c.hello.subs))
	for i, s := range c.hello.subs {
		subs[i] = s.Subscription
	}
	return Info{ID: c.id, Name: c.hello.name, FailOpen: c.hello.failOpen, Subscriptions: subs, ConnectedAt: c.connectedAt, Pending: n}
}

func (c *conn) isDead() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dead
}

// die ends the conn's life as a participant: it is detached from the hub, so later
// calls do not consult it, and every pending request fails at once. The first cause
// is kept for the handler. Idempotent.
func (c *conn) die(cause error) { c.end(cause, false) }

// end is die; with keepNotes, the result notifications still queued are left for the
// writer, which sends them before its goodbye (a graceful shutdown: they are the final
// results of its drain, and the hook is still reading), instead of being counted lost.
func (c *conn) end(cause error, keepNotes bool) {
	c.mu.Lock()
	if c.dead {
		c.mu.Unlock()
		return
	}
	c.dead, c.cause = true, cause
	c.mu.Unlock()
	// Detached before gone is closed: whoever sees gone (the handler, then its client)
	// sees the hub without this conn. Detached before the pending requests fail: their
	// failures, and the notifications lost meanwhile, are counted after the hook's
	// removal (see removed).
	c.h.detach(c)
	c.mu.Lock()
	pending, late := c.pending, c.lateLost
	c.pending, c.sent, c.removed = nil, nil, true
	c.mu.Unlock()
	close(c.gone)
	for _, w := range pending {
		w.ch <- answer{slot: w.slot, err: errGone}
	}
	// Unless kept for the goodbye, the notifications still queued will not be sent: the
	// writer may take a few more meanwhile, and every one is either handed to Send or
	// counted here. None is queued after dead was set (see notify).
	lost := late
	if !keepNotes {
		lost += c.takeNotes()
	}
	c.lost(lost)
}

// takeNotes empties the queue of result notifications and returns how many it took.
func (c *conn) takeNotes() int {
	n := 0
	for {
		select {
		case <-c.notes:
			n++
		default:
			return n
		}
	}
}

// lost counts n result notifications that the stream's end kept from being sent.
func (c *conn) lost(n int) {
	if n > 0 {
		c.h.opts.obs.NotificationsLost(c.hello.name, n)
	}
}

// lostOnDeath counts n result notifications lost to the end of a dead conn's stream:
// now if die has removed the conn, else by die once it has.
func (c *conn) lostOnDeath(n int) {
	c.mu.Lock()
	if !c.removed {
		c.lateLost += n
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	c.lost(n)
}

func (c *conn) deathCause() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cause
}

// request registers a request as pending for slot and queues msg (a request, whose id
// the writer sets) for the writer. It returns the request's key for [conn.forget] (0,
// which is no key, when the stream is dead). On failure the answer is delivered to ch
// right away, so every slot gets exactly one.
func (c *conn) request(slot int, ch chan answer, msg *response) uint64 {
	c.mu.Lock()
	if c.removed {
		c.mu.Unlock()
		ch <- answer{slot: slot, err: errGone}
		return 0
	}
	c.nextKey++
	key := c.nextKey
	c.pending[key] = waiter{slot: slot, ch: ch}
	dead := c.dead
	c.mu.Unlock()
	if dead {
		// die has yet to remove the conn; it fails the request once it has.
		return key
	}
	select {
	case c.reqs <- outbound{key: key, msg: msg}:
	default:
		if c.forget(key) {
			ch <- answer{slot: slot, err: errOverloaded}
		} // else die took it and answered
	}
	return key
}

// forget withdraws the pending request of key; it reports whether it was still pending
// (when not, its answer has been delivered).
func (c *conn) forget(key uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	w, ok := c.pending[key]
	if !ok {
		return false
	}
	delete(c.pending, key)
	if w.id != 0 {
		delete(c.sent, w.id)
	}
	return true
}

// resolve delivers a decision to the request it answers; it reports whether that
// request was pending and sent.
func (c *conn) resolve(d *toolsdv1.HookDecision) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	key, ok := c.sent[d.GetRequestId()]
	if !ok {
		return false
	}
	w := c.pending[key]
	delete(c.sent, w.id)
	delete(c.pending, key)
	w.ch <- answer{slot: w.slot, d: d} // never blocks: one slot per answer
	return true
}

// notify queues a result notification. It fails with errOverloaded when the queue is
// full and with errGone when the stream has ended (a call can still hold a subscription
// table from before): such a notification is never sent, and notify counts it lost.
func (c *conn) notify(msg *response) error {
	c.mu.Lock()
	if c.dead {
		c.mu.Unlock()
		c.lostOnDeath(1)
		return errGone
	}
	defer c.mu.Unlock()
	select {
	case c.notes <- msg:
		return nil
	default:
		return errOverloaded
	}
}

// receive is the stream's only reader. It ends when Recv fails (which returning from
// the handler guarantees), on a protocol error (the conn dies then), or once the
// teardown retired the conn.
func (c *conn) receive(recv func() (*toolsdv1.HookServiceConnectRequest, error)) {
	defer c.recoverReceive()
	for {
		m, err := recv()
		if err == nil {
			var live bool
			if live, err = c.step(m); !live {
				return
			}
		}
		if err != nil {
			c.die(err)
			return
		}
	}
}

// recoverReceive ends the stream with INTERNAL when handling a message panicked: the
// receive loop runs on a goroutine of its own, and a panic there would end the process
// with every batch in it. The hook's pending requests fail as on any stream that drops.
func (c *conn) recoverReceive() {
	p := recover()
	if p == nil {
		return
	}
	// Under the gate, as a handled message's lines: none follows the end of the handler.
	c.streamLive.Do(func() {
		c.log.Error("handling a hook message panicked", zap.Any("panic", p), zap.Stack("stack"))
	})
	c.h.opts.obs.Panicked()
	c.die(status.Error(codes.Internal, "hook: internal error"))
}

// step handles one message unless the conn is retired (live is false then).
func (c *conn) step(m *toolsdv1.HookServiceConnectRequest) (live bool, err error) {
	live = c.streamLive.Do(func() { err = c.handle(m) })
	return live, err
}

// retire waits for the receive loop to finish the message in hand (handling one never
// waits on a send) and for a goodbye failure being logged, and stops both from doing
// more.
func (c *conn) retire() { c.streamLive.Retire() }

// handle processes one message from the hook. Only the receive loop calls it.
func (c *conn) handle(m *toolsdv1.HookServiceConnectRequest) error {
	switch msg := m.GetMsg().(type) {
	case *toolsdv1.HookServiceConnectRequest_Hello:
		if c.sawHello {
			return fmt.Errorf("%w: hello sent twice", errProtocol)
		}
		c.sawHello = true
		c.helloCh <- msg.Hello // buffered: the only hello
		return nil
	case *toolsdv1.HookServiceConnectRequest_Decision:
		if !c.sawHello {
			return fmt.Errorf("%w: the first message must be hello, got decision", errProtocol)
		}
		if !c.resolve(msg.Decision) {
			// Late (the call gave up), duplicated or never issued: harmless.
			c.log.Debug("decision for no pending request ignored", zap.Uint64("request_id", msg.Decision.GetRequestId()))
		}
		return nil
	default:
		if !c.sawHello {
			return fmt.Errorf("%w: the first message must be hello", errProtocol)
		}
		c.log.Debug("empty or unknown hook message ignored")
		return nil
	}
}

// write is the stream's only sender after the welcome: requests first, then result
// notifications. It stops when quit closes (saying goodbye if asked) or a send fails.
func (c *conn) write() {
	defer close(c.writerDone)
	for {
		var msg *response
		note := false
		select {
		case <-c.quit:
			c.farewell()
			return
		case o := <-c.reqs:
			msg = c.number(o)
		default:
			select {
			case <-c.quit:
				c.farewell()
				return
			case o := <-c.reqs:
				msg = c.number(o)
			case msg = <-c.notes:
				note = true
				c.numberNote(msg)
			}
		}
		if msg != nil && !c.send(msg, note) {
			return
		}
	}
}

// send sends msg (a result notification if note) and reports whether it went. On
// failure the conn dies, and msg and the notifications still queued are counted lost.
func (c *conn) send(msg *response, note bool) bool {
	err := streamgate.Send(&c.sends, c.out.Send, msg)
	if err == nil {
		return true
	}
	c.die(fmt.Errorf("hook: send: %w", err))
	lost := c.takeNotes() // those a graceful shutdown left queued (see end)
	if note {
		lost++
	}
	c.lostOnDeath(lost) // another die may still be removing the conn
	return false
}

// farewell is the writer's end once quit is closed. On a shutdown (a goodbye is set) it
// first sends the result notifications still queued, at most the queue's size since
// none is queued after die; the teardown bounds how long it waits for them and the
// goodbye.
func (c *conn) farewell() {
	if c.goodbye == nil {
		return
	}
	for {
		select {
		case msg := <-c.notes:
			c.numberNote(msg)
			if !c.send(msg, true) {
				return
			}
		default:
			c.sayGoodbye()
			return
		}
	}
}

// number gives o's request the stream's next request id and returns its message, or
// returns nil when its call stopped waiting for it (it takes no id then).
func (c *conn) number(o outbound) *response {
	c.mu.Lock()
	defer c.mu.Unlock()
	w, ok := c.pending[o.key]
	if !ok {
		return nil
	}
	c.lastID++
	w.id = c.lastID
	c.pending[o.key] = w
	c.sent[w.id] = o.key
	o.msg.GetRequest().RequestId = w.id
	return o.msg
}

// numberNote gives a result notification the stream's next request id.
func (c *conn) numberNote(msg *response) {
	c.mu.Lock()
	c.lastID++
	msg.GetRequest().RequestId = c.lastID
	c.mu.Unlock()
}

// sayGoodbye sends the goodbye. The conn is dead by then (its requests failed first),
// which does not stop the goodbye.
func (c *conn) sayGoodbye() {
	if err := c.out.Send(c.goodbye); err != nil {
		// A Send the teardown stopped waiting for fails only once the handler returned.
		c.streamLive.Do(func() { c.log.Debug("goodbye not sent", zap.Error(err)) })
	}
}
