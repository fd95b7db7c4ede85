package app_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
)

// TestConnectStreamErrorsCarryErrorInfo: a provider or hook stream that toolsd refuses
// ends, like every other RPC error, with a google.rpc.ErrorInfo (domain toolsd.v1) whose
// stable reason a client can match on instead of the message text.
func TestConnectStreamErrorsCarryErrorInfo(t *testing.T) {
	e := start(t, "limits: {max_providers: 1, max_hooks: 1}\n")
	providerEnd := func(first *toolsdv1.ProviderServiceConnectRequest) error {
		t.Helper()
		stream, err := toolsdv1.NewProviderServiceClient(e.conn).Connect(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if err := stream.Send(first); err != nil {
			t.Fatal(err)
		}
		for {
			if _, err := stream.Recv(); err != nil {
				return err
			}
		}
	}
	hookEnd := func(hello *toolsdv1.HookHello) error {
		t.Helper()
		stream, err := toolsdv1.NewHookServiceClient(e.conn).Connect(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if err := stream.Send(&toolsdv1.HookServiceConnectRequest{Msg: &toolsdv1.HookServiceConnectRequest_Hello{Hello: hello}}); err != nil {
			t.Fatal(err)
		}
		for {
			if _, err := stream.Recv(); err != nil {
				return err
			}
		}
	}
	check := func(what string, err error, code codes.Code, reason string) {
		t.Helper()
		st := status.Convert(err)
		var info *errdetails.ErrorInfo
		for _, d := range st.Details() {
			if i, ok := d.(*errdetails.ErrorInfo); ok {
				info = i
			}
		}
		if st.Code() != code || info.GetReason() != reason || info.GetDomain() != "toolsd.v1" {
			t.Errorf("%s ended with %v (ErrorInfo %v), want %v with reason %s in domain toolsd.v1", what, err, info, code, reason)
		}
	}

	check("a provider stream opening with register", providerEnd(&toolsdv1.ProviderServiceConnectRequest{
		Msg: &toolsdv1.ProviderServiceConnectRequest_Register{Register: &toolsdv1.RegisterTools{Ref: 1}},
	}), codes.InvalidArgument, "BAD_REQUEST")
	check("a hook hello without subscriptions", hookEnd(&toolsdv1.HookHello{Name: "h"}), codes.InvalidArgument, "BAD_REQUEST")

	// The places: one provider and one hook hold them, the next of each is refused.
	_, _ = runProvider(t, e.app.Addr(), constTool("fine", "ok"))
	check("a provider stream past limits.max_providers", providerEnd(&toolsdv1.ProviderServiceConnectRequest{
		Msg: &toolsdv1.ProviderServiceConnectRequest_Hello{Hello: &toolsdv1.ProviderHello{Name: "second"}},
	}), codes.ResourceExhausted, "LIMIT_EXCEEDED")
	sub := []*toolsdv1.HookSubscription{{Stage: toolsdv1.HookStage_HOOK_STAGE_RESULT}}
	first, err := toolsdv1.NewHookServiceClient(e.conn).Connect(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Send(&toolsdv1.HookServiceConnectRequest{Msg: &toolsdv1.HookServiceConnectRequest_Hello{Hello: &toolsdv1.HookHello{Name: "first", Subscriptions: sub}}}); err != nil {
		t.Fatal(err)
	}
	if m, err := first.Recv(); err != nil || m.GetWelcome() == nil {
		t.Fatalf("first hook: Recv() = %v, %v, want a welcome", m, err)
	}
	check("a hook stream past limits.max_hooks", hookEnd(&toolsdv1.HookHello{Name: "second", Subscriptions: sub}), codes.ResourceExhausted, "LIMIT_EXCEEDED")
	_ = first.CloseSend()
}

// TestSilentStreamsEndAtFirstMessageTimeout: limits.first_message_timeout bounds the wait
// for the first message of every stream a client opens — a batch's, and a provider's or
// hook's hello — each ended with DEADLINE_EXCEEDED and its reason.
func TestSilentStreamsEndAtFirstMessageTimeout(t *testing.T) {
	e := start(t, "limits: {first_message_timeout: 20ms}\n")
	// Under the default's 10s: a stream ended by that instead ends with the client's
	// DeadlineExceeded, without a reason.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	firstErr := func(recv func() error) error {
		t.Helper()
		for {
			if err := recv(); err != nil {
				return err
			}
		}
	}
	provider, err := toolsdv1.NewProviderServiceClient(e.conn).Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hook, err := toolsdv1.NewHookServiceClient(e.conn).Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	batch, err := toolsdv1.NewToolServiceClient(e.conn).ExecuteBatch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for what, c := range map[string]struct {
		err    error
		reason string
	}{
		"a provider stream": {firstErr(func() error { _, err := provider.Recv(); return err }), "HELLO_TIMEOUT"},
		"a hook stream":     {firstErr(func() error { _, err := hook.Recv(); return err }), "HELLO_TIMEOUT"},
		"a batch stream":    {firstErr(func() error { _, err := batch.Recv(); return err }), "FIRST_MESSAGE_TIMEOUT"},
	} {
		if status.Code(c.err) != codes.DeadlineExceeded || reason(c.err) != c.reason {
			t.Errorf("%s that sends nothing ended with %v (reason %q), want DeadlineExceeded with reason %s", what, c.err, reason(c.err), c.reason)
		}
	}
}
