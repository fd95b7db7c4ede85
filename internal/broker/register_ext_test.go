package broker_test

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap/zaptest"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/broker"
	"github.com/toolsd/toolsd/internal/broker/brokertest"
	"github.com/toolsd/toolsd/internal/rpcerr"
	"github.com/toolsd/toolsd/internal/tool"
)

func toolDef(name string) *toolsdv1.ToolDefinition {
	return &toolsdv1.ToolDefinition{Name: name, Description: "d", ParametersJson: `{"type":"object"}`}
}

func registerMsg(ref uint64, scope string, defs ...*toolsdv1.ToolDefinition) *toolsdv1.ProviderServiceConnectRequest {
	return &toolsdv1.ProviderServiceConnectRequest{Msg: &toolsdv1.ProviderServiceConnectRequest_Register{
		Register: &toolsdv1.RegisterTools{Ref: ref, Scope: scope, Tools: defs},
	}}
}

func unregisterMsg(ref uint64, scope string, names ...string) *toolsdv1.ProviderServiceConnectRequest {
	return &toolsdv1.ProviderServiceConnectRequest{Msg: &toolsdv1.ProviderServiceConnectRequest_Unregister{
		Unregister: &toolsdv1.UnregisterTools{Ref: ref, Scope: scope, Names: names},
	}}
}

// statusCodes reduces a register result to name → error code. Refs from 100 on are
// unregisters, whose accepted statuses carry no content hash.
func statusCodes(tb testing.TB, m *toolsdv1.ProviderServiceConnectResponse, ref uint64) map[string]string {
	tb.Helper()
	res := m.GetRegisterResult()
	if res == nil || res.GetRef() != ref {
		tb.Fatalf("server message = %v, want register_result with ref %d", m, ref)
	}
	out := map[string]string{}
	for _, st := range res.GetTools() {
		out[st.GetName()] = st.GetErrorCode()
		if st.GetErrorCode() == "" && st.GetContentHash() == "" && m.GetRegisterResult().GetRef() < 100 {
			tb.Errorf("accepted tool %q has no content hash", st.GetName())
		}
		if st.GetErrorCode() != "" && st.GetErrorMessage() == "" {
			tb.Errorf("rejected tool %q has no error message", st.GetName())
		}
	}
	return out
}

var errDuplicate = errors.New("duplicate")

func TestRegisterStatuses(t *testing.T) {
	negative := toolDef("negative_timeout")
	negative.Timeout = durationpb.New(-time.Second)
	negSize := toolDef("negative_size")
	negSize.MaxContentBytes = -1
	unknownMode := toolDef("unknown_mode")
	unknownMode.Mode = 3
	negativeMode := toolDef("negative_mode")
	negativeMode.Mode = -1
	for name, tc := range map[string]struct {
		mapper broker.ErrorMapper
		defs   []*toolsdv1.ToolDefinition
		want   map[string]string
	}{
		"accepted": {
			defs: []*toolsdv1.ToolDefinition{toolDef("a"), toolDef("b")},
			want: map[string]string{"a": "", "b": ""},
		},
		"registrar error with the default mapper": {
			defs: []*toolsdv1.ToolDefinition{toolDef("a"), toolDef("rejected")},
			want: map[string]string{"a": "", "rejected": "INVALID_ARGUMENT"},
		},
		"registrar error with a mapper": {
			mapper: func(err error) (string, string) {
				if errors.Is(err, errDuplicate) {
					return "ALREADY_EXISTS", "taken"
				}
				return "INTERNAL", err.Error()
			},
			defs: []*toolsdv1.ToolDefinition{toolDef("rejected")},
			want: map[string]string{"rejected": "ALREADY_EXISTS"},
		},
		"a mapper returning no code still rejects": {
			mapper: func(error) (string, string) { return "", "" },
			defs:   []*toolsdv1.ToolDefinition{toolDef("rejected")},
			want:   map[string]string{"rejected": "INVALID_ARGUMENT"},
		},
		"unrepresentable definitions": {
			defs: []*toolsdv1.ToolDefinition{negative, negSize},
			want: map[string]string{"negative_timeout": "INVALID_ARGUMENT", "negative_size": "INVALID_ARGUMENT"},
		},
		"unknown modes": {
			defs: []*toolsdv1.ToolDefinition{unknownMode, negativeMode},
			want: map[string]string{"unknown_mode": "INVALID_ARGUMENT", "negative_mode": "INVALID_ARGUMENT"},
		},
		"over the per-message limit": {
			defs: []*toolsdv1.ToolDefinition{toolDef("a"), toolDef("b"), toolDef("c")},
			want: map[string]string{"a": "", "b": "", "c": "RESOURCE_EXHAUSTED"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			reg := brokertest.NewRegistrar()
			reg.Reject = func(_ string, def tool.Definition) error {
				if def.Name == "rejected" {
					return errDuplicate
				}
				return nil
			}
			srv := brokertest.Start(t, reg, broker.WithErrorMapper(tc.mapper), broker.WithLogger(zaptest.NewLogger(t)),
				broker.WithLimits(broker.Limits{MaxToolsPerRegister: 2}))
			r := helloRaw(t, srv, "raw", 0)
			r.send(registerMsg(42, "agent/x", tc.defs...))
			got := statusCodes(t, r.next(), 42)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("register statuses mismatch (-want +got):\n%s", diff)
			}
			for toolName, code := range tc.want {
				_, registered := reg.Lookup("agent/x", toolName)
				if registered != (code == "") {
					t.Errorf("registrar has %q = %v, want %v", toolName, registered, code == "")
				}
			}
		})
	}
}

func TestRegisterMapsTheDefinition(t *testing.T) {
	reg := brokertest.NewRegistrar()
	srv := brokertest.Start(t, reg)
	r := helloRaw(t, srv, "raw", 0)
	r.send(registerMsg(1, "s", &toolsdv1.ToolDefinition{
		Name:             "full",
		Description:      "all fields",
		ParametersJson:   `{"type":"object","properties":{"b":{},"a":{}}}`,
		OutputSchemaJson: `{"type":"number"}`,
		Mode:             toolsdv1.ExecutionMode_EXECUTION_MODE_EXCLUSIVE,
		Timeout:          durationpb.New(1500 * time.Millisecond),
		Annotations: &toolsdv1.ToolAnnotations{
			Title: "Full", ReadOnlyHint: true, DestructiveHint: true, IdempotentHint: true, OpenWorldHint: true,
		},
		DeferLoading:    true,
		Condition:       `session.succeeded("x")`,
		MaxContentBytes: 100,
	}))
	statusCodes(t, r.next(), 1)
	got, ok := reg.Lookup("s", "full")
	if !ok {
		t.Fatal("tool not registered")
	}
	want := brokertest.Registration{
		Owner: r.id,
		Hash:  got.Hash,
		Def: tool.Definition{
			Name:            "full",
			Description:     "all fields",
			Parameters:      json.RawMessage(`{"type":"object","properties":{"b":{},"a":{}}}`),
			OutputSchema:    json.RawMessage(`{"type":"number"}`),
			Mode:            tool.ModeExclusive,
			Timeout:         1500 * time.Millisecond,
			Annotations:     tool.Annotations{Title: "Full", ReadOnly: true, Destructive: true, Idempotent: true, OpenWorld: true},
			DeferLoading:    true,
			Condition:       `session.succeeded("x")`,
			MaxContentBytes: 100,
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("registered definition mismatch (-want +got):\n%s", diff)
	}
}

func TestUnregister(t *testing.T) {
	reg := brokertest.NewRegistrar()
	srv := brokertest.Start(t, reg)
	r := helloRaw(t, srv, "raw", 0)
	r.send(registerMsg(1, "", toolDef("a"), toolDef("b")))
	statusCodes(t, r.next(), 1)

	r.send(unregisterMsg(100, "", "a", "never_registered"))
	got := statusCodes(t, r.next(), 100)
	want := map[string]string{"a": "", "never_registered": "INVALID_ARGUMENT"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("unregister statuses mismatch (-want +got):\n%s", diff)
	}
	if _, ok := reg.Lookup("", "a"); ok {
		t.Error("a still registered after unregister")
	}
	if _, ok := reg.Lookup("", "b"); !ok {
		t.Error("b was removed by an unregister of a")
	}
}

// An unregister past the per-message limit removes the tools it takes and refuses the
// rest, each on its own.
func TestUnregisterOverThePerMessageLimit(t *testing.T) {
	reg := brokertest.NewRegistrar()
	srv := brokertest.Start(t, reg, broker.WithLimits(broker.Limits{MaxToolsPerRegister: 2}))
	r := helloRaw(t, srv, "raw", 0)
	r.send(registerMsg(1, "", toolDef("a"), toolDef("b")))
	statusCodes(t, r.next(), 1)
	r.send(registerMsg(2, "", toolDef("c")))
	statusCodes(t, r.next(), 2)

	r.send(unregisterMsg(100, "", "a", "b", "c"))
	want := map[string]string{"a": "", "b": "", "c": "RESOURCE_EXHAUSTED"}
	if diff := cmp.Diff(want, statusCodes(t, r.next(), 100)); diff != "" {
		t.Errorf("unregister statuses mismatch (-want +got):\n%s", diff)
	}
	if _, ok := reg.Lookup("", "c"); !ok {
		t.Error("c, past the limit, was removed")
	}
	if _, ok := reg.Lookup("", "a"); ok {
		t.Error("a, within the limit, is still registered")
	}
}

func TestAnotherProvidersToolCannotBeUnregistered(t *testing.T) {
	reg := brokertest.NewRegistrar()
	srv := brokertest.Start(t, reg)
	owner, other := helloRaw(t, srv, "owner", 0), helloRaw(t, srv, "other", 0)
	owner.send(registerMsg(1, "", toolDef("a")))
	statusCodes(t, owner.next(), 1)
	other.send(unregisterMsg(100, "", "a"))
	if got := statusCodes(t, other.next(), 100); got["a"] == "" {
		t.Error("another provider unregistered a")
	}
	if reg, _ := reg.Lookup("", "a"); reg.Owner != owner.id {
		t.Errorf("owner of a = %q, want %q", reg.Owner, owner.id)
	}
}

// TestUnrepresentableDefinitionMessageIsBounded: a definition refused because it cannot
// be mapped (a negative timeout or size) says so in an error message that quotes the
// tool's name cut short: the status already names the tool, and the name may be as
// long as the message toolsd accepts.
func TestUnrepresentableDefinitionMessageIsBounded(t *testing.T) {
	long := strings.Repeat("n", 1<<20)
	negTimeout := toolDef(long)
	negTimeout.Timeout = durationpb.New(-time.Second)
	negSize := toolDef(long)
	negSize.MaxContentBytes = -1
	for name, def := range map[string]*toolsdv1.ToolDefinition{"negative timeout": negTimeout, "negative size": negSize} {
		t.Run(name, func(t *testing.T) {
			srv := brokertest.Start(t, brokertest.NewRegistrar())
			r := helloRaw(t, srv, "raw", 0)
			r.send(registerMsg(1, "", def))
			sts := r.next().GetRegisterResult().GetTools()
			if len(sts) != 1 || sts[0].GetErrorCode() != "INVALID_ARGUMENT" {
				t.Fatalf("register statuses = %v, want one INVALID_ARGUMENT", sts)
			}
			if msg := sts[0].GetErrorMessage(); len(msg) > 1<<10 {
				t.Errorf("error message is %d bytes, want the %d-byte name cut short", len(msg), len(long))
			}
		})
	}
}

// TestRegisterFarOverThePerMessageLimit: a register (or unregister) naming far more tools
// than one message may is refused whole, ending the stream with RESOURCE_EXHAUSTED. An
// empty definition is two bytes on the wire and its refusal tens: answered one by one,
// a 4 MiB message of them drew an answer of ~170 MiB. The client receives messages of
// any size, as the SDK does, so that an oversized answer reaches the test.
func TestRegisterFarOverThePerMessageLimit(t *testing.T) {
	const limit = 1000
	empty := make([]*toolsdv1.ToolDefinition, 128<<10)
	for i := range empty {
		empty[i] = &toolsdv1.ToolDefinition{}
	}
	for name, m := range map[string]*toolsdv1.ProviderServiceConnectRequest{
		"register":   registerMsg(1, "", empty...),
		"unregister": unregisterMsg(100, "", make([]string, len(empty))...),
	} {
		t.Run(name, func(t *testing.T) {
			srv := brokertest.Start(t, brokertest.NewRegistrar(), broker.WithLimits(broker.Limits{MaxToolsPerRegister: limit}))
			conn, err := grpc.NewClient(srv.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
				grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(math.MaxInt32)))
			if err != nil {
				t.Fatalf("grpc.NewClient() = %v", err)
			}
			t.Cleanup(func() { _ = conn.Close() })
			r := hello(t, openRawOn(t, conn), "raw", 0)
			r.send(m)
			select {
			case answer, ok := <-r.msgs:
				if ok {
					t.Fatalf("answer of %d bytes to a %s of %d bytes, want the stream ended", proto.Size(answer), name, proto.Size(m))
				}
			case <-time.After(waitTimeout):
				t.Fatal("timed out waiting for the stream to end")
			}
			st, _ := status.FromError(r.err)
			if st.Code() != codes.ResourceExhausted || !hasReason(st, rpcerr.LimitExceeded) {
				t.Errorf("stream end = %v, want ResourceExhausted with reason %s", r.err, rpcerr.LimitExceeded)
			}
		})
	}
}

// TestRegisterTwiceThePerMessageLimit: a message naming up to twice the per-message limit
// is answered tool by tool, the tools past the limit refused.
func TestRegisterTwiceThePerMessageLimit(t *testing.T) {
	reg := brokertest.NewRegistrar()
	srv := brokertest.Start(t, reg, broker.WithLimits(broker.Limits{MaxToolsPerRegister: 2}))
	r := helloRaw(t, srv, "raw", 0)
	r.send(registerMsg(1, "", toolDef("a"), toolDef("b"), toolDef("c"), toolDef("d")))
	want := map[string]string{"a": "", "b": "", "c": "RESOURCE_EXHAUSTED", "d": "RESOURCE_EXHAUSTED"}
	if diff := cmp.Diff(want, statusCodes(t, r.next(), 1)); diff != "" {
		t.Errorf("register statuses mismatch (-want +got):\n%s", diff)
	}
	r.send(unregisterMsg(100, "", "a", "b", "c", "d"))
	if diff := cmp.Diff(want, statusCodes(t, r.next(), 100)); diff != "" {
		t.Errorf("unregister statuses mismatch (-want +got):\n%s", diff)
	}
	r.send(registerMsg(2, "", toolDef("a"), toolDef("b"), toolDef("c"), toolDef("d"), toolDef("e")))
	if err := r.end(); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("stream end after a register of five = %v, want ResourceExhausted", err)
	}
}

// hasReason reports whether st carries an ErrorInfo with reason.
func hasReason(st *status.Status, reason string) bool {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == reason {
			return true
		}
	}
	return false
}
