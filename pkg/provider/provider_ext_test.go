package provider_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/broker"
	"github.com/toolsd/toolsd/internal/broker/brokertest"
	"github.com/toolsd/toolsd/internal/textcut"
	"github.com/toolsd/toolsd/internal/tool"
	"github.com/toolsd/toolsd/pkg/provider"
)

const waitTimeout = brokertest.WaitTimeout

func exec(name, args string) *tool.Exec {
	return &tool.Exec{Call: tool.Call{SessionID: "s-9", Scope: "agent/b", CallID: "call-9", Name: name,
		Arguments: args, Turn: 5, Step: 6}}
}

func wait(tb testing.TB, ch <-chan struct{}, what string) {
	tb.Helper()
	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	select {
	case <-ch:
	case <-timer.C:
		tb.Fatalf("timed out waiting for %s", what)
	}
}

// run runs p against addr until the test ends.
func run(tb testing.TB, p *provider.Provider, addr string) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx, addr) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("Run() = %v, want nil", err)
		}
	})
}

func newProvider(tb testing.TB, opts ...provider.Option) *provider.Provider {
	return provider.New("sdk", append([]provider.Option{
		provider.WithLogger(zaptest.NewLogger(tb)), provider.WithBackoff(time.Millisecond, 20*time.Millisecond),
	}, opts...)...)
}

type echoArgs struct {
	Text string `json:"text"`
}

func echoTool(opts ...provider.ToolOption) provider.Tool {
	return provider.NewTool("echo", "echoes", func(_ context.Context, _ provider.Call, a echoArgs) (string, error) {
		return a.Text, nil
	}, opts...)
}

func TestHandlerOutcomes(t *testing.T) {
	srv := brokertest.Start(t, brokertest.NewRegistrar())
	p := newProvider(t)
	p.Add(
		echoTool(),
		provider.NewTool("strict_echo", "echoes strictly", func(_ context.Context, _ provider.Call, a echoArgs) (string, error) {
			return a.Text, nil
		}, provider.StrictArguments()),
		provider.NewTool("panics", "panics", func(context.Context, provider.Call, struct{}) (string, error) {
			panic("kaboom")
		}),
		provider.NewTool("wrapped", "wrapped error", func(context.Context, provider.Call, struct{}) (int, error) {
			return 0, errors.Join(errors.New("first"), errors.New("second \xff"))
		}),
		provider.NewTool("unencodable", "bad value", func(context.Context, provider.Call, struct{}) (any, error) {
			return func() {}, nil
		}),
		provider.NewTool("nil_result", "nil *Result", func(context.Context, provider.Call, struct{}) (*provider.Result, error) {
			return nil, nil
		}),
		provider.NewTool("goexit", "ends its goroutine", func(context.Context, provider.Call, struct{}) (string, error) {
			runtime.Goexit()
			return "", nil
		}),
		provider.NewTool("integers", "integer arguments", func(_ context.Context, _ provider.Call, a intArgs) (string, error) {
			if a.M != nil {
				return fmt.Sprint(a.N, a.U, a.F, a.L, a.M), nil
			}
			return fmt.Sprint(a.N, a.U, a.F, a.L), nil
		}, provider.StrictArguments()),
		provider.NewTool("when", "a time argument", func(_ context.Context, _ provider.Call, a whenArgs) (string, error) {
			return a.At.String(), nil
		}),
	)
	run(t, p, srv.Addr)
	wait(t, p.Ready(), "registration")
	longTime := `{"at":"` + strings.Repeat("9", 64<<10) + `"}`
	for name, tc := range map[string]struct {
		tool, args string
		want       tool.Result
	}{
		"echo":                     {"echo", `{"text":"hi"}`, tool.Result{Content: "hi"}},
		"lenient unknown field":    {"echo", `{"text":"hi","extra":1}`, tool.Result{Content: "hi"}},
		"strict unknown field":     {"strict_echo", `{"text":"hi","extra":1}`, tool.Failure(tool.CodeInvalidArguments, `invalid arguments: json: unknown field "extra"`)},
		"strict trailing data":     {"strict_echo", `{"text":"hi"} {}`, tool.Failure(tool.CodeInvalidArguments, "invalid arguments: unexpected data after the arguments")},
		"strict ok":                {"strict_echo", `{"text":"ok"}`, tool.Result{Content: "ok"}},
		"empty arguments":          {"echo", ``, tool.Result{}},
		"panic":                    {"panics", `{}`, tool.Failure(tool.CodeToolError, `tool "panics" failed unexpectedly (panic)`)},
		"error text made UTF-8":    {"wrapped", `{}`, tool.Failure(tool.CodeToolError, "first\nsecond \uFFFD")},
		"value that cannot encode": {"unencodable", `{}`, tool.Failure(tool.CodeToolError, "cannot encode the tool's value: json: unsupported type: func()")},
		"nil *Result":              {"nil_result", `{}`, tool.Result{}},
		"goroutine ended":          {"goexit", `{}`, tool.Failure(tool.CodeToolError, `tool "goexit" failed unexpectedly (it ended its goroutine)`)},
		// JSON Schema's integers include 1.0 and 2e0; encoding/json's do not.
		"integers with a fraction or exponent": {"integers", `{"n":1.0,"u":2e0,"f":1.5,"l":[3.00,-4E1,0.5e1]}`, tool.Result{Content: "1 2 1.5 [3 -40 5]"}},
		"integer with a real fraction":         {"integers", `{"n":1.5}`, tool.Failure(tool.CodeInvalidArguments, "invalid arguments: "+jsonError[intArgs](`{"n":1.5}`))},
		"integer out of range":                 {"integers", `{"u":3.0e2}`, tool.Failure(tool.CodeInvalidArguments, "invalid arguments: "+jsonError[intArgs](`{"u":300}`))},
		// The retry decodes the same text, only its numbers rewritten: a repeated key
		// (toolsd refuses them) merges into the map as encoding/json merges it.
		"integers decoded afresh":    {"integers", `{"m":{"a":1},"n":1.0,"m":{"b":2}}`, tool.Result{Content: "1 0 0 [] map[a:1 b:2]"}},
		"integers and trailing data": {"integers", `{"n":1.0} {}`, tool.Failure(tool.CodeInvalidArguments, "invalid arguments: "+jsonError[intArgs](`{"n":1.0}`))},
		// encoding/json quotes the time it could not parse: the message stays short.
		"long time that does not parse": {"when", longTime, tool.Failure(tool.CodeInvalidArguments, "invalid arguments: "+textcut.Prefix(jsonError[whenArgs](longTime), 1024)+"…")},
	} {
		t.Run(name, func(t *testing.T) {
			got := srv.Broker.Call(t.Context(), p.ProviderID(), exec(tc.tool, tc.args), 1)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Call(%s, %s) mismatch (-want +got):\n%s", tc.tool, tc.args, diff)
			}
		})
	}
}

type intArgs struct {
	N int            `json:"n"`
	U uint8          `json:"u"`
	F float64        `json:"f"`
	L []int64        `json:"l"`
	M map[string]int `json:"m"`
}

type whenArgs struct {
	At time.Time `json:"at"`
}

// jsonError is what encoding/json says about decoding doc into an A.
func jsonError[A any](doc string) string {
	var a A
	if err := json.Unmarshal([]byte(doc), &a); err != nil {
		return err.Error()
	}
	return "(no error)"
}

func TestCallMetadata(t *testing.T) {
	srv := brokertest.Start(t, brokertest.NewRegistrar())
	got := make(chan provider.Call, 1)
	ctxDeadline := make(chan time.Time, 1)
	p := newProvider(t)
	p.Add(provider.NewTool("meta", "reports its call", func(ctx context.Context, call provider.Call, _ struct{}) (string, error) {
		d, _ := ctx.Deadline()
		ctxDeadline <- d
		got <- call
		return "", nil
	}))
	run(t, p, srv.Addr)
	wait(t, p.Ready(), "registration")
	deadline := time.Now().Add(time.Hour)
	ctx, cancel := context.WithDeadline(t.Context(), deadline)
	defer cancel()
	before := time.Now()
	srv.Broker.Call(ctx, p.ProviderID(), exec("meta", "{}"), 2)
	took := time.Since(before)
	want := provider.Call{CallID: "call-9", SessionID: "s-9", Scope: "agent/b", Tool: "meta", Turn: 5, Step: 6, Attempt: 2}
	call := <-got
	if diff := cmp.Diff(want, call, cmp.AllowUnexported(provider.Call{}),
		cmp.FilterPath(func(p cmp.Path) bool { s := p.Last().String(); return s == ".run" || s == ".Deadline" }, cmp.Ignore())); diff != "" {
		t.Errorf("handler's Call mismatch (-want +got):\n%s", diff)
	}
	// The time toolsd had left, from when the call arrived: toolsd's deadline, plus at
	// most the call's round trip.
	if call.Deadline.Before(deadline) || call.Deadline.After(deadline.Add(took)) {
		t.Errorf("Call.Deadline = %v, want between %v and %v", call.Deadline, deadline, deadline.Add(took))
	}
	if d := <-ctxDeadline; !d.Equal(call.Deadline) {
		t.Errorf("handler context's deadline = %v, want Call.Deadline %v", d, call.Deadline)
	}
}

// A handler's deadline is timed on the provider's clock, from when its call arrived, by
// the time toolsd had left for it: a toolsd clock far behind the provider's (a deadline
// an hour past as the provider reads it) neither ends the call before it starts nor
// moves its deadline. From a toolsd that sends no timeout, the deadline is toolsd's.
func TestCallDeadlineIsTimedFromArrival(t *testing.T) {
	for name, tc := range map[string]struct {
		deadline time.Time
		timeout  time.Duration // 0: none sent
	}{
		"timeout, deadline past on this clock": {deadline: time.Now().Add(-time.Hour), timeout: time.Minute},
		"deadline alone":                       {deadline: time.Now().Add(time.Hour)},
	} {
		t.Run(name, func(t *testing.T) {
			ex := executeMsg(1, "clock", `{}`)
			ex.GetExecute().Deadline = timestamppb.New(tc.deadline)
			if tc.timeout > 0 {
				ex.GetExecute().Timeout = durationpb.New(tc.timeout)
			}
			srv := &scriptedToolsd{script: []*toolsdv1.ProviderServiceConnectResponse{ex}, results: make(chan *toolsdv1.ExecuteResult, 1)}
			addr := startScripted(t, srv)
			type seen struct {
				err      error
				deadline time.Time
				call     provider.Call
			}
			saw := make(chan seen, 1)
			p := newProvider(t)
			p.Add(provider.NewTool("clock", "reports its deadline", func(ctx context.Context, call provider.Call, _ struct{}) (string, error) {
				d, _ := ctx.Deadline()
				saw <- seen{err: ctx.Err(), deadline: d, call: call}
				return "", nil
			}))
			before := time.Now()
			run(t, p, addr)
			var got seen
			timer := time.NewTimer(waitTimeout)
			defer timer.Stop()
			select {
			case got = <-saw:
			case <-timer.C:
				t.Fatal("timed out waiting for the handler")
			}
			after := time.Now()
			if got.err != nil {
				t.Errorf("handler context at start: Err() = %v, want nil", got.err)
			}
			least, most := tc.deadline, tc.deadline
			if tc.timeout > 0 {
				least, most = before.Add(tc.timeout), after.Add(tc.timeout)
			}
			if got.deadline.Before(least) || got.deadline.After(most) {
				t.Errorf("handler context's deadline = %v, want between %v and %v", got.deadline, least, most)
			}
			if !got.call.Deadline.Equal(got.deadline) {
				t.Errorf("Call.Deadline = %v, want the context's %v", got.call.Deadline, got.deadline)
			}
		})
	}
}

func TestToolOptionsReachTheRegistry(t *testing.T) {
	reg := brokertest.NewRegistrar()
	srv := brokertest.Start(t, reg)
	p := newProvider(t, provider.WithScope("agent/x"), provider.WithVersion("1.2.3"))
	p.Add(provider.NewTool("full", "all options", func(context.Context, provider.Call, struct{}) (string, error) { return "", nil },
		provider.WithSchema(`{"type":"object"}`),
		provider.WithOutputSchema(`{"type":"object","properties":{"n":{"type":"number"}}}`),
		provider.Exclusive(),
		provider.WithTimeout(2*time.Second),
		provider.WithAnnotations(provider.Annotations{Title: "Full", ReadOnly: true, Destructive: true, Idempotent: true, OpenWorld: true}),
		provider.DeferLoading(),
		provider.WithCondition(`session.succeeded("x")`),
		provider.WithMaxContentBytes(512),
	), echoTool(provider.Parallel()))
	run(t, p, srv.Addr)
	wait(t, p.Ready(), "registration")
	got, ok := reg.Lookup("agent/x", "full")
	if !ok {
		t.Fatal("full is not registered in agent/x")
	}
	want := tool.Definition{
		Name:            "full",
		Description:     "all options",
		Parameters:      json.RawMessage(`{"type":"object"}`),
		OutputSchema:    json.RawMessage(`{"type":"object","properties":{"n":{"type":"number"}}}`),
		Mode:            tool.ModeExclusive,
		Timeout:         2 * time.Second,
		Annotations:     tool.Annotations{Title: "Full", ReadOnly: true, Destructive: true, Idempotent: true, OpenWorld: true},
		DeferLoading:    true,
		Condition:       `session.succeeded("x")`,
		MaxContentBytes: 512,
	}
	if diff := cmp.Diff(want, got.Def); diff != "" {
		t.Errorf("registered definition mismatch (-want +got):\n%s", diff)
	}
	if echo, _ := reg.Lookup("agent/x", "echo"); echo.Def.Mode != tool.ModeParallel {
		t.Errorf("echo mode = %v, want parallel", echo.Def.Mode)
	}
	info := srv.Broker.Providers()
	if len(info) != 1 || info[0].Name != "sdk" || info[0].Version != "1.2.3" {
		t.Errorf("Providers() = %+v, want one provider sdk 1.2.3", info)
	}
}

func TestAddWhileConnected(t *testing.T) {
	reg := brokertest.NewRegistrar()
	srv := brokertest.Start(t, reg)
	p := newProvider(t)
	run(t, p, srv.Addr)
	wait(t, p.Ready(), "readiness without tools")
	p.Add(echoTool())
	reg.WaitFor(t, "echo registered", func() bool { _, ok := reg.Lookup("", "echo"); return ok })
	if got := srv.Broker.Call(t.Context(), p.ProviderID(), exec("echo", `{"text":"late"}`), 1); got.Content != "late" {
		t.Errorf("Call(echo) = %+v, want content late", got)
	}
	// Replacing a tool keeps one entry and re-registers it.
	before := reg.Registrations()
	p.Add(provider.NewTool("echo", "shouts", func(_ context.Context, _ provider.Call, a echoArgs) (string, error) {
		return a.Text + "!", nil
	}))
	reg.WaitFor(t, "echo re-registered", func() bool { return reg.Registrations() == before+1 })
	if got := srv.Broker.Call(t.Context(), p.ProviderID(), exec("echo", `{"text":"late"}`), 1); got.Content != "late!" {
		t.Errorf("Call(echo) after replacement = %+v, want content late!", got)
	}
}

// TestTextNotUTF8IsRepaired checks that a provider name or tool text that is not UTF-8
// neither ends the stream (gRPC cannot marshal such a string) nor keeps the provider's
// other tools from registering.
func TestTextNotUTF8IsRepaired(t *testing.T) {
	reg := brokertest.NewRegistrar()
	srv := brokertest.Start(t, reg)
	p := provider.New("sdk\xff", provider.WithVersion("v\xfe"), provider.WithLogger(zaptest.NewLogger(t)),
		provider.WithBackoff(time.Millisecond, 20*time.Millisecond))
	p.Add(echoTool(), provider.NewTool("latin1", "caf\xe9", func(context.Context, provider.Call, struct{}) (string, error) {
		return "ok", nil
	}, provider.WithAnnotations(provider.Annotations{Title: "T\xff"})))
	run(t, p, srv.Addr)
	wait(t, p.Ready(), "registration")
	if _, ok := reg.Lookup("", "echo"); !ok {
		t.Error("echo is not registered")
	}
	r, ok := reg.Lookup("", "latin1")
	if !ok || r.Def.Description != "caf\uFFFD" || r.Def.Annotations.Title != "T\uFFFD" {
		t.Errorf("latin1 registration = %+v, %v; want description caf\uFFFD and title T\uFFFD", r.Def, ok)
	}
	if got := srv.Broker.Call(t.Context(), p.ProviderID(), exec("echo", `{"text":"hi"}`), 1); got.Content != "hi" {
		t.Errorf("Call(echo) = %+v, want content hi", got)
	}
}

func TestReconnectRegistersAgain(t *testing.T) {
	reg := brokertest.NewRegistrar()
	first := brokertest.Start(t, reg)
	p := newProvider(t)
	p.Add(echoTool())
	run(t, p, first.Addr)
	wait(t, p.Ready(), "registration")
	oldID := p.ProviderID()

	first.Stop() // goodbye, stream ends, registrations removed
	reg.WaitFor(t, "old registrations removed", func() bool { _, ok := reg.Lookup("", "echo"); return !ok })

	second := brokertest.StartAt(t, first.Addr, reg)
	var newID string
	reg.WaitFor(t, "echo registered again", func() bool {
		r, ok := reg.Lookup("", "echo")
		newID = r.Owner
		return ok && r.Owner != oldID
	})
	if !second.Broker.Connected(newID) {
		t.Fatalf("the new registration's owner %q is not connected", newID)
	}
	if got := second.Broker.Call(t.Context(), newID, exec("echo", `{"text":"again"}`), 1); got.Content != "again" {
		t.Errorf("Call(echo) after reconnect = %+v, want content again", got)
	}
	if got := p.ProviderID(); got != newID {
		t.Errorf("ProviderID() = %q, want %q", got, newID)
	}
}

func TestServe(t *testing.T) {
	srv := brokertest.Start(t, brokertest.NewRegistrar())
	conn := srv.Dial(t)

	t.Run("returns nil when its context ends", func(t *testing.T) {
		p := newProvider(t)
		p.Add(echoTool())
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- p.Serve(ctx, conn) }()
		wait(t, p.Ready(), "registration")
		if err := p.Serve(ctx, conn); !errors.Is(err, provider.ErrRunning) {
			t.Errorf("second Serve() = %v, want ErrRunning", err)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve() = %v, want nil", err)
		}
		if id := p.ProviderID(); id != "" {
			t.Errorf("ProviderID() after Serve = %q, want empty", id)
		}
	})

	t.Run("returns the stream's end", func(t *testing.T) {
		other := brokertest.Start(t, brokertest.NewRegistrar())
		p := newProvider(t)
		otherConn := other.Dial(t)
		done := make(chan error, 1)
		go func() { done <- p.Serve(t.Context(), otherConn) }()
		wait(t, p.Ready(), "readiness")
		other.Stop()
		if err := <-done; err == nil {
			t.Error("Serve() = nil after the server went away, want an error")
		}
	})
}

// TestTakenNameIsRegisteredOnceFreed covers a provider whose registration toolsd refuses
// because another stream holds the name, as happens when toolsd has not yet seen the
// provider's previous stream close: once the holder's stream ends, the provider's
// retries register the tool on its own stream.
func TestTakenNameIsRegisteredOnceFreed(t *testing.T) {
	reg := brokertest.NewRegistrar()
	srv := brokertest.Start(t, reg, takenAsAlreadyExists)
	holder := newProvider(t)
	holder.Add(provider.NewTool("echo", "the previous stream's echo", func(context.Context, provider.Call, echoArgs) (string, error) {
		return "old", nil
	}))
	holderCtx, stopHolder := context.WithCancel(context.Background())
	holderDone := make(chan error, 1)
	go func() { holderDone <- holder.Run(holderCtx, srv.Addr) }()
	wait(t, holder.Ready(), "the holder's registration")
	holderID := holder.ProviderID()

	p := newProvider(t)
	p.Add(echoTool())
	run(t, p, srv.Addr)
	wait(t, p.Ready(), "the refused registration's answer")
	if r, _ := reg.Lookup("", "echo"); r.Owner != holderID {
		t.Fatalf("echo's owner = %q, want the holder %q", r.Owner, holderID)
	}

	stopHolder()
	if err := <-holderDone; err != nil {
		t.Fatalf("holder Run() = %v", err)
	}
	reg.WaitFor(t, "echo registered by the second provider", func() bool {
		r, ok := reg.Lookup("", "echo")
		return ok && r.Owner == p.ProviderID()
	})
	if got := srv.Broker.Call(t.Context(), p.ProviderID(), exec("echo", `{"text":"new"}`), 1); got.Content != "new" {
		t.Errorf("Call(echo) = %+v, want content new", got)
	}
}

// TestTakenNameIsGivenUp covers a name another provider really owns: the retries end
// after the retake window, with a warning, instead of going on for the stream's life.
func TestTakenNameIsGivenUp(t *testing.T) {
	reg := brokertest.NewRegistrar()
	srv := brokertest.Start(t, reg, takenAsAlreadyExists)
	owner := newProvider(t)
	owner.Add(echoTool())
	run(t, owner, srv.Addr)
	wait(t, owner.Ready(), "the owner's registration")

	core, logs := observer.New(zap.DebugLevel)
	clock := newRetakeClock()
	p := newProvider(t, provider.WithLogger(zap.New(core)), provider.WithRetakeWindow(300*time.Millisecond),
		provider.WithRetakeClock(clock.Now, clock.NewTimer))
	p.Add(echoTool())
	ctx, stop := context.WithCancel(t.Context())
	ran := make(chan error, 1)
	go func() { ran <- p.Run(ctx, srv.Addr) }()
	const givenUp = "tool name still taken in toolsd; giving up registering it on this stream"
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	recheck := time.NewTicker(5 * time.Millisecond)
	defer recheck.Stop()
	for logs.FilterMessage(givenUp).Len() == 0 {
		select {
		case <-clock.armed: // a retake waits: its delay passes at once, on the fake clock
			clock.FireDue()
		case <-recheck.C:
		case <-deadline.C:
			t.Fatal("timed out waiting for the retries to be given up")
		}
	}
	// Lines about the tool, but for toolsd's answer to the unregister the shutdown sends
	// for every tool the provider has, held or not: logged when the answer arrives
	// before the stream ends, which it may or may not.
	const notUnregistered = "tool not unregistered; toolsd removes what this stream holds when it ends"
	aboutTool := func() int {
		return logs.FilterFieldKey("tool").Filter(func(e observer.LoggedEntry) bool { return e.Message != notUnregistered }).Len()
	}
	refusals := aboutTool()
	// Once Run has returned, every retake the session started has made its timer: one
	// made after the give-up, as a retry would, is a timer the test never fired.
	stop()
	if err := <-ran; err != nil {
		t.Fatalf("Run() = %v, want nil", err)
	}
	if made, fired := clock.Timers(); made != fired || fired < 2 {
		t.Errorf("retake timers: %d made, %d fired before the give-up; want some, and none made after it", made, fired)
	}
	if got := aboutTool(); got != refusals {
		t.Errorf("%d more log lines about the tool after giving up, want none", got-refusals)
	}
	if r, _ := reg.Lookup("", "echo"); r.Owner != owner.ProviderID() {
		t.Errorf("echo's owner = %q, want the first provider %q", r.Owner, owner.ProviderID())
	}
}

// retakeClock is a fake clock for a provider's retakes (provider.WithRetakeClock): its
// time moves only as FireDue fires the timers made on it.
type retakeClock struct {
	armed   chan struct{} // has a value while a timer is pending
	mu      sync.Mutex
	now     time.Time
	pending []retakeTimer
	made    int
	fired   int
}

type retakeTimer struct {
	at time.Time
	c  chan time.Time
}

func newRetakeClock() *retakeClock {
	return &retakeClock{now: time.Unix(1_000_000, 0), armed: make(chan struct{}, 1)}
}

func (c *retakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *retakeClock) NewTimer(d time.Duration) (<-chan time.Time, func() bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := retakeTimer{at: c.now.Add(d), c: make(chan time.Time, 1)}
	c.pending = append(c.pending, t)
	c.made++
	select {
	case c.armed <- struct{}{}:
	default:
	}
	return t.c, func() bool { return false }
}

// FireDue moves the clock to the timers made so far and fires them.
func (c *retakeClock) FireDue() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range c.pending {
		c.now = maxTime(c.now, t.at)
		t.c <- c.now
		c.fired++
	}
	c.pending = nil
}

// Timers reports how many timers were made and how many of them fired.
func (c *retakeClock) Timers() (made, fired int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.made, c.fired
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// TestHeldBackToolIsReported: a registration toolsd accepts but holds back (pinning
// quarantine) makes the provider ready and warns that the tool stays invisible.
func TestHeldBackToolIsReported(t *testing.T) {
	reg := brokertest.NewRegistrar()
	reg.Hold = func(string, tool.Definition) bool { return true }
	srv := brokertest.Start(t, reg)
	core, logs := observer.New(zap.WarnLevel)
	p := newProvider(t, provider.WithLogger(zap.New(core)))
	p.Add(echoTool())
	run(t, p, srv.Addr)
	wait(t, p.Ready(), "registration")
	held := logs.FilterField(zap.String("tool", "echo")).All()
	if len(held) != 1 || !strings.Contains(held[0].Message, "held back") {
		t.Errorf("warnings about echo = %v, want one saying it is held back", held)
	}
}

// takenAsAlreadyExists makes the test broker answer a taken name as toolsd does.
var takenAsAlreadyExists = broker.WithErrorMapper(func(err error) (string, string) {
	if errors.Is(err, brokertest.ErrTaken) {
		return "ALREADY_EXISTS", err.Error()
	}
	return "INVALID_ARGUMENT", err.Error()
})

// TestReplacedToolIsNotRetaken covers a tool replaced while connected: toolsd refuses to
// register a name twice even for the stream holding it, so the replacement unregisters
// the name first, and is neither refused nor retried as a name taken by someone else.
func TestReplacedToolIsNotRetaken(t *testing.T) {
	reg, srv := startRefusingTaken(t)
	core, logs := observer.New(zap.DebugLevel)
	p := newProvider(t, provider.WithLogger(zap.New(core)))
	p.Add(echoTool())
	run(t, p, srv.Addr)
	wait(t, p.Ready(), "registration")

	p.Add(provider.NewTool("echo", "shouts", func(_ context.Context, _ provider.Call, a echoArgs) (string, error) {
		return a.Text + "!", nil
	}))
	reg.WaitFor(t, "the replacement registered", func() bool { r, ok := reg.Lookup("", "echo"); return ok && r.Def.Description == "shouts" })
	for _, msg := range []string{"tool name taken in toolsd; registering again later", "tool already registered on this stream; toolsd keeps the first definition"} {
		if n := logs.FilterMessage(msg).Len(); n != 0 {
			t.Errorf("%d logs %q for the stream's own tool, want none", n, msg)
		}
	}
	if got := srv.Broker.Call(t.Context(), p.ProviderID(), exec("echo", `{"text":"hi"}`), 1); got.Content != "hi!" {
		t.Errorf("Call(echo) = %+v, want the replacement's content hi!", got)
	}
}

// TestWindows checks the flow-control windows the provider grants toolsd: fixed by
// default, as set by WithWindows, and left to gRPC's estimation (which pings when data
// arrives) with WithWindows(0, 0) or a zero in either.
func TestWindows(t *testing.T) {
	for _, tc := range []struct {
		name         string
		opts         []provider.Option
		stream, conn uint32
		estimating   bool
	}{
		{name: "defaults", stream: provider.DefaultStreamWindow, conn: provider.DefaultConnWindow},
		{name: "set", opts: []provider.Option{provider.WithWindows(128<<10, 256<<10)}, stream: 128 << 10, conn: 256 << 10},
		{name: "estimated", opts: []provider.Option{provider.WithWindows(0, 0)}, stream: 65535, conn: 65535, estimating: true},
		{name: "one zero", opts: []provider.Option{provider.WithWindows(1<<20, 0)}, stream: 65535, conn: 65535, estimating: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = lis.Close() }()
			ctx, cancel := context.WithCancel(t.Context())
			p := provider.New("windows", tc.opts...)
			done := make(chan error, 1)
			go func() { done <- p.Run(ctx, lis.Addr().String()) }()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("Provider.Run() = %v, want nil after cancel", err)
				}
			}()
			c, err := lis.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = c.Close() }()
			stream, conn, pinged := clientWindows(t, c)
			if stream != tc.stream || conn != tc.conn {
				t.Errorf("windows = %d / %d, want %d / %d", stream, conn, tc.stream, tc.conn)
			}
			if pinged != tc.estimating {
				t.Errorf("estimation ping after data = %v, want %v", pinged, tc.estimating)
			}
		})
	}
}

// clientWindows reads an HTTP/2 client's preface, SETTINGS and any connection
// WINDOW_UPDATE that come before its first request, then answers that request's
// headers with one DATA frame followed by a PING of its own, and reports whether the
// client pinged between the two (it handles frames, and queues what they make it
// write, in order).
func clientWindows(t *testing.T, c net.Conn) (stream, conn uint32, pinged bool) {
	t.Helper()
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(c, preface); err != nil || string(preface) != http2.ClientPreface {
		t.Fatalf("client preface = %q, %v", preface, err)
	}
	fr := http2.NewFramer(c, c)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	stream, conn = 65535, 65535
	mine := [8]byte{'t', 'o', 'o', 'l', 's', 'd'}
	answered := false
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading the client's frames: %v", err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if f.IsAck() {
				continue
			}
			if v, ok := f.Value(http2.SettingInitialWindowSize); ok {
				stream = v
			}
			if err := fr.WriteSettingsAck(); err != nil {
				t.Fatal(err)
			}
		case *http2.WindowUpdateFrame:
			if f.StreamID == 0 && !answered {
				conn += f.Increment
			}
		case *http2.HeadersFrame: // the Connect stream: the preamble is over
			if answered {
				continue
			}
			answered = true
			answer(t, fr, f.StreamID)
			if err := fr.WritePing(false, mine); err != nil {
				t.Fatal(err)
			}
		case *http2.PingFrame:
			if f.IsAck() && f.Data == mine {
				return stream, conn, pinged
			}
			if !f.IsAck() {
				pinged = true
			}
		}
	}
}

// answer sends response headers and one empty gRPC message on the stream.
func answer(t *testing.T, fr *http2.Framer, id uint32) {
	t.Helper()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":status", "200"}, {"content-type", "application/grpc"}} {
		if err := enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}); err != nil {
			t.Fatal(err)
		}
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	if err := fr.WriteData(id, false, []byte{0, 0, 0, 0, 0}); err != nil {
		t.Fatal(err)
	}
}

// A Result whose value or metadata cannot be JSON-encoded fails its call, and still asks
// to end the turn: toolsd keeps concludes_turn when it replaces a result with an error
// (too large, invalid), and the SDK's own replacement does the same.
func TestUnencodableResultKeepsConcludesTurn(t *testing.T) {
	srv := brokertest.Start(t, brokertest.NewRegistrar())
	p := newProvider(t)
	p.Add(
		provider.NewTool("bad_value", "value is NaN", func(context.Context, provider.Call, struct{}) (provider.Result, error) {
			return provider.Result{Value: math.NaN(), ConcludesTurn: true}, nil
		}),
		provider.NewTool("bad_meta", "meta is a channel", func(context.Context, provider.Call, struct{}) (*provider.Result, error) {
			return &provider.Result{Content: "done", Meta: make(chan int), ConcludesTurn: true}, nil
		}),
	)
	run(t, p, srv.Addr)
	wait(t, p.Ready(), "registration")
	for name, want := range map[string]tool.Result{
		"bad_value": tool.Failure(tool.CodeToolError, "cannot encode the tool's value: json: unsupported value: NaN"),
		"bad_meta":  tool.Failure(tool.CodeToolError, "cannot encode the tool's metadata: json: unsupported type: chan int"),
	} {
		want.ConcludesTurn = true
		got := srv.Broker.Call(t.Context(), p.ProviderID(), exec(name, `{}`), 1)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Call(%s) mismatch (-want +got):\n%s", name, diff)
		}
	}
}

// Options that say "no limit" or "the default" with a value below zero register the
// tool as 0 would, rather than a definition toolsd refuses (which would leave the tool
// missing, with only a warning in the provider's log).
func TestNegativeToolOptionsMeanNone(t *testing.T) {
	reg := brokertest.NewRegistrar()
	srv := brokertest.Start(t, reg)
	p := newProvider(t)
	p.Add(echoTool(provider.WithMaxContentBytes(-1), provider.WithTimeout(-time.Second)))
	run(t, p, srv.Addr)
	wait(t, p.Ready(), "registration")
	got, ok := reg.Lookup("", "echo")
	if !ok {
		t.Fatal("echo with WithMaxContentBytes(-1) and WithTimeout(-1s) is not registered")
	}
	if got.Def.MaxContentBytes != 0 || got.Def.Timeout != 0 {
		t.Errorf("registered max content bytes %d, timeout %v; want 0, 0", got.Def.MaxContentBytes, got.Def.Timeout)
	}
}

// TestCancellationReachesHandlers: toolsd's cancel ends the handler's context, and what
// the handler returns then decides the outcome, as the package documentation says: its
// context's error (also wrapped) reports that the tool stopped (ABORTED), any other
// error stays the tool's failure.
func TestCancellationReachesHandlers(t *testing.T) {
	// A grace no slow machine outlasts: the answer, not its absence, decides.
	srv := brokertest.Start(t, brokertest.NewRegistrar(), broker.WithLimits(broker.Limits{CancelGrace: waitTimeout}))
	started := make(chan struct{}, 1)
	blocking := func(ret func(ctx context.Context) error) provider.Tool {
		return provider.NewTool("t", "waits for cancellation", func(ctx context.Context, _ provider.Call, _ struct{}) (string, error) {
			started <- struct{}{}
			<-ctx.Done()
			return "", ret(ctx)
		})
	}
	for name, tc := range map[string]struct {
		ret  func(ctx context.Context) error
		want tool.Code
	}{
		"context's error": {func(ctx context.Context) error { return ctx.Err() }, tool.CodeAborted},
		"wrapped":         {func(ctx context.Context) error { return fmt.Errorf("stopped: %w", ctx.Err()) }, tool.CodeAborted},
		"own failure":     {func(context.Context) error { return errors.New("cleanup failed") }, tool.CodeToolError},
	} {
		t.Run(name, func(t *testing.T) {
			p := newProvider(t)
			p.Add(blocking(tc.ret))
			run(t, p, srv.Addr)
			wait(t, p.Ready(), "registration")
			ctx, cancel := context.WithCancel(t.Context())
			go func() {
				<-started
				cancel()
			}()
			if got := srv.Broker.Call(ctx, p.ProviderID(), exec("t", `{}`), 1); got.Code() != tc.want {
				t.Errorf("Call() after cancel = %+v, want %s", got, tc.want)
			}
		})
	}
}
