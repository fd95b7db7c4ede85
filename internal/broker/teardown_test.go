package broker

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/tool"
)

// noRegistrar is a Registrar for a conn that registers nothing.
type noRegistrar struct{}

func (noRegistrar) Register(string, tool.Definition, string) (string, bool, error) {
	return "", false, nil
}
func (noRegistrar) Unregister(string, string, string) error { return nil }
func (noRegistrar) RemoveOwner(string)                      {}

// stuckSender's Send blocks until released and then fails, as a stream's Send to a
// provider that stopped reading fails once the stream ends.
type stuckSender struct{ entered, release chan struct{} }

func (s *stuckSender) Send(*toolsdv1.ProviderServiceConnectResponse) error {
	close(s.entered)
	<-s.release
	return errors.New("stream ended")
}

// TestNoQueuedLineAfterTeardown: a queued answer whose write was stuck when the stream
// was torn down fails after the handler returned; its log line must not follow the
// stream's end (a test's logger is gone by then; an operator reads lines out of order).
func TestNoQueuedLineAfterTeardown(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	b := New(noRegistrar{}, WithLogger(zap.New(core)))
	out := &stuckSender{entered: make(chan struct{}), release: make(chan struct{})}
	c := b.newConn(t.Context(), out)
	close(c.welcomed)
	c.post(&toolsdv1.ProviderServiceConnectResponse{}) // the post goroutine writes it, and sticks
	<-out.entered
	b.teardown(c, nil, false) // gives up on the stuck send after goodbyeWait
	ended := logs.Len()
	close(out.release)
	c.sem <- struct{}{} // the failed write's holder released the slot: its flush is over
	<-c.sem
	for _, e := range logs.All()[ended:] {
		t.Errorf("logged after teardown: %q %v", e.Message, e.ContextMap())
	}
}

// failingSender's Send fails at once, as a stream's does once it is closing.
type failingSender struct{}

func (failingSender) Send(*toolsdv1.ProviderServiceConnectResponse) error {
	return errors.New("stream closing")
}

// rejections counts CallRejected by code.
type rejections struct {
	NopObserver
	mu  sync.Mutex
	got map[tool.Code]int
}

func (r *rejections) CallRejected(code tool.Code) {
	r.mu.Lock()
	r.got[code]++
	r.mu.Unlock()
}

// count is how many calls were counted as rejected with code.
func (r *rejections) count(code tool.Code) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.got[code]
}

// oneSlotConn is a registered conn over a failing stream with one send slot, of a
// broker whose rejections are counted.
func oneSlotConn(t *testing.T) (*Broker, *conn, *rejections) {
	t.Helper()
	obs := &rejections{got: map[tool.Code]int{}}
	b := New(noRegistrar{}, WithObserver(obs))
	c := b.newConn(t.Context(), failingSender{})
	c.maxInFlight = 1
	b.mu.Lock()
	b.conns[c.id] = c
	b.mu.Unlock()
	return b, c, obs
}

// parkCall takes c's one send slot, as another send would, and starts a call that waits
// for it; it returns once the call is pending, with the channel its result comes on.
func parkCall(ctx context.Context, b *Broker, c *conn) <-chan tool.Result {
	c.sem <- struct{}{}
	done := make(chan tool.Result, 1)
	go func() {
		done <- b.Call(ctx, c.id, &tool.Exec{Call: tool.Call{CallID: "c", Name: "t", Arguments: `{}`}}, 1)
	}()
	for pending := 0; pending == 0; runtime.Gosched() {
		c.mu.Lock()
		pending = len(c.pending)
		c.mu.Unlock()
	}
	return done
}

// TestUnsentCallCountsAsRejected: a call whose execute could not be written (its
// stream closing under it) is PROVIDER_UNAVAILABLE before dispatch, like a call to a
// provider already gone, and is counted in toolsd_broker_calls_rejected_total as one.
func TestUnsentCallCountsAsRejected(t *testing.T) {
	b, c, obs := oneSlotConn(t)
	r := b.Call(t.Context(), c.id, &tool.Exec{Call: tool.Call{CallID: "c", Name: "t", Arguments: `{}`}}, 1)
	if r.Code() != tool.CodeProviderUnavailable {
		t.Fatalf("Call over a failing stream = %v, want PROVIDER_UNAVAILABLE", r)
	}
	if n := obs.count(tool.CodeProviderUnavailable); n != 1 {
		t.Errorf("CallRejected(PROVIDER_UNAVAILABLE) counted %d times, want 1", n)
	}
}

// TestFailPendingTellsUnsentCalls: at a stream's end, a call whose execute was handed
// to the stream may have run (PROVIDER_GONE), one still waiting for the send slot never
// reached the provider (PROVIDER_UNAVAILABLE, as for a call that finds the provider gone).
func TestFailPendingTellsUnsentCalls(t *testing.T) {
	b := New(noRegistrar{})
	c := b.newConn(t.Context(), failingSender{})
	c.maxInFlight = 2
	sent, unsent := newPending(&tool.Exec{}), newPending(&tool.Exec{})
	sent.sent.Store(true)
	for _, p := range []*pendingCall{sent, unsent} {
		if _, code, _ := c.begin(p); code != "" {
			t.Fatalf("begin() = %s", code)
		}
	}
	if n := c.failPending(); n != 2 {
		t.Fatalf("failPending() = %d, want 2", n)
	}
	if r := <-sent.done; r.Code() != tool.CodeProviderGone {
		t.Errorf("the sent call ended %s, want PROVIDER_GONE", r.Code())
	}
	if r := <-unsent.done; r.Code() != tool.CodeProviderUnavailable {
		t.Errorf("the call never sent ended %s, want PROVIDER_UNAVAILABLE", r.Code())
	}
}

// watchedSender keeps what is sent and runs onSend after each Send.
type watchedSender struct {
	mu     sync.Mutex
	sent   []*toolsdv1.ProviderServiceConnectResponse
	onSend func()
}

func (s *watchedSender) Send(m *toolsdv1.ProviderServiceConnectResponse) error {
	s.mu.Lock()
	s.sent = append(s.sent, m)
	s.mu.Unlock()
	s.onSend()
	return nil
}

// TestNoExecuteOnceTeardownBegan: a call that takes the send slot after the stream's
// teardown began (the slot happened to be free, or a waiter won it over the stop) is not
// sent: it is PROVIDER_UNAVAILABLE, never on the stream, rather than an execute the
// provider gets just before its goodbye and a PROVIDER_GONE that says the tool may have run.
func TestNoExecuteOnceTeardownBegan(t *testing.T) {
	b := New(noRegistrar{}, WithLimits(Limits{CancelGrace: -1}))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	out := &watchedSender{onSend: cancel} // an execute sent ends the call's wait
	c := b.newConn(t.Context(), out)
	c.maxInFlight = 1
	close(c.welcomed)
	b.mu.Lock()
	b.conns[c.id] = c
	b.mu.Unlock()
	c.stop() // the teardown has begun: it has not taken the send slot yet
	r := b.Call(ctx, c.id, &tool.Exec{Call: tool.Call{CallID: "c", Name: "t", Arguments: `{}`}}, 1)
	if r.Code() != tool.CodeProviderUnavailable {
		t.Errorf("Call on a stream being torn down = %v, want PROVIDER_UNAVAILABLE", r)
	}
	out.mu.Lock()
	defer out.mu.Unlock()
	for _, m := range out.sent {
		t.Errorf("sent after the teardown began: %v", m)
	}
}

// TestUnsentCallFailedByTeardownCountsAsRejected: a call still waiting for the send
// slot when its stream ends never reached the provider; whether the teardown fails it
// or the call withdraws itself first, it is PROVIDER_UNAVAILABLE, with the same message
// and reason, and counted once in toolsd_broker_calls_rejected_total. The teardown's
// failure was not counted, and the two read "disconnected before the call was sent" and
// "is not connected" (with the broker's own error as the reason).
func TestUnsentCallFailedByTeardownCountsAsRejected(t *testing.T) {
	orders := map[string]func(c *conn, done <-chan tool.Result) tool.Result{
		"teardown first": func(c *conn, done <-chan tool.Result) tool.Result {
			c.failPending()
			c.stop()
			return <-done
		},
		"withdrawn first": func(c *conn, done <-chan tool.Result) tool.Result {
			c.stop() // the call wakes, finds the stream ending and withdraws itself
			r := <-done
			c.failPending()
			return r
		},
	}
	for name, order := range orders {
		t.Run(name, func(t *testing.T) {
			b, c, obs := oneSlotConn(t)
			r := order(c, parkCall(t.Context(), b, c))
			want := tool.FailureWithReason(tool.CodeProviderUnavailable, "the tool's provider disconnected before the call was sent",
				"provider "+c.id+" disconnected before the call was sent")
			if diff := cmp.Diff(want, r); diff != "" {
				t.Errorf("Call waiting for the send slot at teardown: (-want +got)\n%s", diff)
			}
			if n := obs.count(tool.CodeProviderUnavailable); n != 1 {
				t.Errorf("CallRejected(PROVIDER_UNAVAILABLE) counted %d times, want 1", n)
			}
		})
	}
}

// TestCancelledUnsentCallIsAbortedWhoeverWithdrawsIt: a call waiting for the send slot
// whose context ended as its stream was torn down never reached the provider because
// of its own cancel: it is ABORTED_BEFORE_DISPATCH and not counted as rejected, whether
// it withdrew itself or the teardown took it from the pending calls first. The result
// depended on which side won (the teardown's PROVIDER_UNAVAILABLE, counted); each
// round runs the race once, so both sides win some.
func TestCancelledUnsentCallIsAbortedWhoeverWithdrawsIt(t *testing.T) {
	for round := range 32 {
		b, c, obs := oneSlotConn(t)
		ctx, cancel := context.WithCancel(t.Context())
		done := parkCall(ctx, b, c)
		cancel()
		c.stop()
		c.failPending()
		if r := <-done; r.Code() != tool.CodeAbortedBeforeDispatch {
			t.Errorf("round %d: Call cancelled waiting for the send slot at teardown = %v, want ABORTED_BEFORE_DISPATCH", round, r)
		}
		if n := obs.count(tool.CodeProviderUnavailable); n != 0 {
			t.Errorf("round %d: CallRejected(PROVIDER_UNAVAILABLE) counted %d times, want 0", round, n)
		}
	}
}

// removalRegistrar runs onRemove as a provider's registrations are removed.
type removalRegistrar struct {
	noRegistrar
	onRemove func(owner string)
}

func (r removalRegistrar) RemoveOwner(owner string) { r.onRemove(owner) }

// TestTeardownRemovesToolsBeforeFailingCalls: a stream's end removes its provider's
// tools before it tells the calls running on it PROVIDER_GONE, so an idempotent call's
// retry, or a new call, that resolves the tool as the call returns finds another
// provider's registration (or none), never the provider that is going away. The calls
// were failed first: a retry in the window between found the dead provider's tool again
// and failed with PROVIDER_UNAVAILABLE, spending an attempt.
func TestTeardownRemovesToolsBeforeFailingCalls(t *testing.T) {
	var failedFirst []tool.Code
	var p *pendingCall
	removed := 0
	b := New(removalRegistrar{onRemove: func(string) {
		removed++
		select {
		case r := <-p.done:
			failedFirst = append(failedFirst, r.Code())
			p.done <- r
		default:
		}
	}})
	c := b.newConn(t.Context(), failingSender{})
	c.maxInFlight = 1
	close(c.welcomed)
	if err := b.attach(c); err != nil {
		t.Fatalf("attach() = %v", err)
	}
	p = newPending(&tool.Exec{})
	p.sent.Store(true) // the provider has it: the stream ends while the call runs
	if _, code, _ := c.begin(p); code != "" {
		t.Fatalf("begin() = %s", code)
	}
	b.teardown(c, nil, false)
	if removed != 1 {
		t.Fatalf("RemoveOwner ran %d times at teardown, want 1", removed)
	}
	if len(failedFirst) != 0 {
		t.Errorf("the running call was told %v before its provider's tools were removed, want it told after", failedFirst)
	}
	if r := <-p.done; r.Code() != tool.CodeProviderGone {
		t.Errorf("the running call ended %s, want PROVIDER_GONE", r.Code())
	}
}

// TestCancelledCallToAGoneProviderIsAborted: a call whose context has ended by the time
// it looks its provider up is ABORTED_BEFORE_DISPATCH, not counted as rejected, when the
// provider's stream has already been torn down, as it is when the teardown comes while
// the call waits for the send slot (TestCancelledUnsentCallIsAbortedWhoeverWithdrawsIt):
// which came first, the teardown or the lookup, does not decide the result. It was
// PROVIDER_UNAVAILABLE, counted.
func TestCancelledCallToAGoneProviderIsAborted(t *testing.T) {
	b, c, obs := oneSlotConn(t)
	c.stop()
	c.failPending()
	b.mu.Lock()
	delete(b.conns, c.id)
	b.mu.Unlock()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if r := b.Call(ctx, c.id, &tool.Exec{Call: tool.Call{CallID: "c", Name: "t", Arguments: `{}`}}, 1); r.Code() != tool.CodeAbortedBeforeDispatch {
		t.Errorf("Call cancelled, to a provider gone = %v, want ABORTED_BEFORE_DISPATCH", r)
	}
	if n := obs.count(tool.CodeProviderUnavailable); n != 0 {
		t.Errorf("CallRejected(PROVIDER_UNAVAILABLE) counted %d times, want 0", n)
	}
}
