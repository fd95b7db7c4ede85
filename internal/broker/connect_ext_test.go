package broker_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/broker"
	"github.com/toolsd/toolsd/internal/broker/brokertest"
	"github.com/toolsd/toolsd/internal/tool"
)

func TestHelloWelcome(t *testing.T) {
	srv := brokertest.Start(t, brokertest.NewRegistrar(), broker.WithLogger(zaptest.NewLogger(t)),
		broker.WithLimits(broker.Limits{MaxInFlightPerProvider: 8}))
	for name, tc := range map[string]struct {
		hello, want uint32
	}{
		"hello lowers the limit":       {hello: 3, want: 3},
		"zero takes the limit":         {hello: 0, want: 8},
		"hello cannot raise the limit": {hello: 100, want: 8},
	} {
		t.Run(name, func(t *testing.T) {
			r := helloRaw(t, srv, "raw-"+name, tc.hello)
			if !strings.HasPrefix(r.id, "p-") {
				t.Errorf("welcome provider_id = %q, want prefix p-", r.id)
			}
			if !srv.Broker.Connected(r.id) {
				t.Errorf("Connected(%q) = false, want true", r.id)
			}
			var got *broker.ProviderInfo
			for _, p := range srv.Broker.Providers() {
				if p.ID == r.id {
					got = &p
				}
			}
			if got == nil {
				t.Fatalf("Providers() lacks %q", r.id)
			}
			want := broker.ProviderInfo{ID: r.id, Name: "raw-" + name, Version: "v0", MaxInFlight: int(tc.want)}
			if diff := cmp.Diff(want, *got, cmpopts.IgnoreFields(broker.ProviderInfo{}, "ConnectedAt")); diff != "" {
				t.Errorf("Providers() entry mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestProviderIDsAreUnique(t *testing.T) {
	srv := brokertest.Start(t, brokertest.NewRegistrar())
	a, b := helloRaw(t, srv, "a", 0), helloRaw(t, srv, "b", 0)
	if a.id == b.id {
		t.Errorf("two streams got provider_id %q", a.id)
	}
}

func TestFirstMessageMustBeHello(t *testing.T) {
	srv := brokertest.Start(t, brokertest.NewRegistrar(), broker.WithLogger(zaptest.NewLogger(t)))
	for name, first := range map[string]*toolsdv1.ProviderServiceConnectRequest{
		"empty":    {},
		"register": {Msg: &toolsdv1.ProviderServiceConnectRequest_Register{Register: &toolsdv1.RegisterTools{}}},
		"result":   {Msg: &toolsdv1.ProviderServiceConnectRequest_Result{Result: &toolsdv1.ExecuteResult{RequestId: 1}}},
	} {
		t.Run(name, func(t *testing.T) {
			r := openRaw(t, srv)
			r.send(first)
			err := r.end()
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "must be hello") {
				t.Errorf("stream end = %v, want InvalidArgument saying the first message must be hello", err)
			}
		})
	}
	if n := len(srv.Broker.Providers()); n != 0 {
		t.Errorf("len(Providers()) = %d, want 0", n)
	}
}

func TestHelloTimeout(t *testing.T) {
	srv := brokertest.Start(t, brokertest.NewRegistrar(), broker.WithLimits(broker.Limits{HelloTimeout: 20 * time.Millisecond}))
	r := openRaw(t, srv)
	if err := r.end(); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("stream end = %v, want DeadlineExceeded", err)
	}
}

func TestMaxProviders(t *testing.T) {
	obs := newRecorder()
	srv := brokertest.Start(t, brokertest.NewRegistrar(), broker.WithObserver(obs), broker.WithLimits(broker.Limits{MaxProviders: 1}))
	first := helloRaw(t, srv, "first", 0)
	second := openRaw(t, srv)
	second.send(&toolsdv1.ProviderServiceConnectRequest{Msg: &toolsdv1.ProviderServiceConnectRequest_Hello{Hello: &toolsdv1.ProviderHello{Name: "second"}}})
	if err := second.end(); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("second stream end = %v, want ResourceExhausted", err)
	}
	if !srv.Broker.Connected(first.id) {
		t.Errorf("Connected(first) = false after a refused second provider")
	}
	if got := obs.get("connected"); got != 1 {
		t.Errorf("ProviderConnected sum = %d, want 1", got)
	}
}

func TestMalformedMessagesKeepTheStream(t *testing.T) {
	obs := newRecorder()
	reg := brokertest.NewRegistrar()
	srv := brokertest.Start(t, reg, broker.WithObserver(obs), broker.WithLogger(zaptest.NewLogger(t)))
	r := helloRaw(t, srv, "raw", 0)
	r.send(&toolsdv1.ProviderServiceConnectRequest{})
	r.send(&toolsdv1.ProviderServiceConnectRequest{Msg: &toolsdv1.ProviderServiceConnectRequest_Hello{Hello: &toolsdv1.ProviderHello{Name: "again"}}})
	r.send(&toolsdv1.ProviderServiceConnectRequest{Msg: &toolsdv1.ProviderServiceConnectRequest_Progress{Progress: &toolsdv1.ExecuteProgress{RequestId: 77}}})
	obs.waitFor(t, "malformed", 2)
	r.send(registerMsg(1, "", toolDef("still_alive")))
	if res := r.next().GetRegisterResult(); res == nil || res.GetTools()[0].GetErrorCode() != "" {
		t.Errorf("register after malformed messages = %v, want success", res)
	}
}

func TestDisconnectRemovesRegistrations(t *testing.T) {
	obs := newRecorder()
	reg := brokertest.NewRegistrar()
	srv := brokertest.Start(t, reg, broker.WithObserver(obs))
	r := helloRaw(t, srv, "raw", 0)
	r.send(registerMsg(1, "", toolDef("t1")))
	r.next()
	if _, ok := reg.Lookup("", "t1"); !ok {
		t.Fatal("t1 not registered")
	}
	r.cancel()
	reg.WaitFor(t, "RemoveOwner", func() bool { return len(reg.Removed()) == 1 })
	if got := reg.Removed(); got[0] != r.id {
		t.Errorf("RemoveOwner(%q), want RemoveOwner(%q)", got[0], r.id)
	}
	if _, ok := reg.Lookup("", "t1"); ok {
		t.Error("t1 still registered after its stream ended")
	}
	if srv.Broker.Connected(r.id) {
		t.Errorf("Connected(%q) = true after disconnect", r.id)
	}
	obs.waitFor(t, "connected", 0)
}

func TestShutdown(t *testing.T) {
	reg := brokertest.NewRegistrar()
	srv := brokertest.Start(t, reg, broker.WithLogger(zaptest.NewLogger(t)))
	r := helloRaw(t, srv, "raw", 0)
	call := goCall(context.Background(), srv.Broker, r.id, execFor("t", "{}"))
	r.execute()

	done := make(chan struct{})
	go func() { srv.Broker.Shutdown("maintenance"); close(done) }()

	if g := r.next().GetGoodbye(); g.GetReason() != "maintenance" {
		t.Errorf("goodbye = %v, want reason maintenance", g)
	}
	if err := r.end(); !errors.Is(err, io.EOF) {
		t.Errorf("stream end after goodbye = %v, want io.EOF (a clean end)", err)
	}
	if res := awaitResult(t, call); res.Code() != tool.CodeProviderGone {
		t.Errorf("in-flight Call() code = %q, want %q", res.Code(), tool.CodeProviderGone)
	}
	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		t.Fatal("Shutdown did not return")
	}
	if got := reg.Removed(); len(got) != 1 || got[0] != r.id {
		t.Errorf("Removed() = %v, want [%s]", got, r.id)
	}
	late := openRaw(t, srv)
	if err := late.end(); status.Code(err) != codes.Unavailable {
		t.Errorf("stream opened after Shutdown ended with %v, want Unavailable", err)
	}
}

// A provider sees its own id: the ids must not tell it how many providers (other
// tenants') connected before or since, nor let it guess a live one's.
func TestProviderIDsUnrelated(t *testing.T) {
	srv := brokertest.Start(t, brokertest.NewRegistrar(), broker.WithLogger(zaptest.NewLogger(t)))
	ids := make([]string, 8)
	for i := range ids {
		ids[i] = helloRaw(t, srv, fmt.Sprintf("p%d", i), 0).id
	}
	checkUnrelatedIDs(t, "p", ids)
}

// checkUnrelatedIDs checks that ids, of consecutive connections, are distinct
// "<kind>-<8 hex>-<16 hex>" whose connection parts are far apart: counted ids differ by
// one, unrelated ones by less than 2^32 with probability 2^-31 for a pair.
func checkUnrelatedIDs(tb testing.TB, kind string, ids []string) {
	tb.Helper()
	shape := regexp.MustCompile(`^` + kind + `-[0-9a-f]{8}-([0-9a-f]{16})$`)
	seen := map[string]bool{}
	var prev uint64
	for i, id := range ids {
		m := shape.FindStringSubmatch(id)
		if m == nil {
			tb.Fatalf("id %q, want %s-<8 hex>-<16 hex>", id, kind)
		}
		if seen[id] {
			tb.Fatalf("id %q issued twice", id)
		}
		seen[id] = true
		cur, err := strconv.ParseUint(m[1], 16, 64)
		if err != nil {
			tb.Fatalf("id %q: %v", id, err)
		}
		if d := max(cur, prev) - min(cur, prev); i > 0 && d < 1<<32 {
			tb.Errorf("ids %q and %q of consecutive connections are %d apart, want them unrelated", ids[i-1], id, d)
		}
		prev = cur
	}
}
