package broker

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/tool"
)

// mapRegistrar is a minimal Registrar (brokertest would be an import cycle here).
type mapRegistrar struct {
	mu    sync.Mutex
	tools map[string]string // scope/name → owner
}

func (r *mapRegistrar) Register(scope string, def tool.Definition, owner string) (string, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if def.Name == "" || !json.Valid(def.Parameters) {
		return "", false, errTest
	}
	r.tools[scope+"/"+def.Name] = owner
	return "hash", false, nil
}

func (r *mapRegistrar) Unregister(scope, name, owner string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tools[scope+"/"+name] != owner {
		return errTest
	}
	delete(r.tools, scope+"/"+name)
	return nil
}

func (r *mapRegistrar) RemoveOwner(owner string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, o := range r.tools {
		if o == owner {
			delete(r.tools, k)
		}
	}
}

type testError string

func (e testError) Error() string { return string(e) }

const errTest = testError("rejected \xff by the registrar")

// recordingSender checks that every message the broker sends can be marshaled: a
// marshal failure inside a real Send would end the stream.
type recordingSender struct {
	tb   testing.TB
	sent []*toolsdv1.ProviderServiceConnectResponse
}

func (s *recordingSender) Send(m *toolsdv1.ProviderServiceConnectResponse) error {
	if _, err := proto.Marshal(m); err != nil {
		s.tb.Errorf("broker sent an unmarshalable message %v: %v", m, err)
	}
	s.sent = append(s.sent, m)
	return nil
}

// handleHarness is a welcomed conn without a network, for driving message handling.
type handleHarness struct {
	b     *Broker
	c     *conn
	out   *recordingSender
	calls []*pendingCall
}

func newHandleHarness(tb testing.TB) *handleHarness {
	b := New(&mapRegistrar{tools: map[string]string{}}, WithLimits(Limits{MaxToolsPerRegister: 4, MaxResultBytes: 256}))
	out := &recordingSender{tb: tb}
	c := b.newConn(context.Background(), out)
	hello := &toolsdv1.ProviderServiceConnectRequest{Msg: &toolsdv1.ProviderServiceConnectRequest_Hello{Hello: &toolsdv1.ProviderHello{Name: "fuzz"}}}
	if err := b.hello(c, hello); err != nil {
		tb.Fatalf("hello() = %v", err)
	}
	h := &handleHarness{b: b, c: c, out: out}
	for range 2 { // request ids 1 and 2 are pending
		p := newPending(&tool.Exec{Call: tool.Call{CallID: "c"}, Progress: func(pr tool.Progress) {
			if !utf8.ValidString(pr.Message) || math.IsNaN(pr.Progress) || math.IsInf(pr.Total, 0) {
				tb.Errorf("progress %+v is not valid UTF-8 with finite numbers", pr)
			}
		}})
		if _, code, _ := c.begin(p); code != "" {
			tb.Fatalf("begin() = %s", code)
		}
		h.calls = append(h.calls, p)
	}
	return h
}

// finish tears the conn down and checks that every pending call got exactly one
// well-formed result.
func (h *handleHarness) finish(tb testing.TB) {
	h.b.teardown(h.c, nil, false)
	for i, p := range h.calls {
		select {
		case r := <-p.done:
			if !utf8.ValidString(r.Content) || (r.IsError != (r.Err != nil)) ||
				(r.IsError && !strings.HasPrefix(r.Content, tool.ErrorContentPrefix)) {
				tb.Errorf("call %d result %+v is malformed", i+1, r)
			}
		default:
			tb.Errorf("call %d got no result", i+1)
		}
		select {
		case r := <-p.done:
			tb.Errorf("call %d got a second result %+v", i+1, r)
		default:
		}
	}
}

func fuzzSeeds() []*toolsdv1.ProviderServiceConnectRequest {
	return []*toolsdv1.ProviderServiceConnectRequest{
		{},
		{Msg: &toolsdv1.ProviderServiceConnectRequest_Hello{Hello: &toolsdv1.ProviderHello{Name: "again", MaxInFlight: 3}}},
		{Msg: &toolsdv1.ProviderServiceConnectRequest_Register{Register: &toolsdv1.RegisterTools{Ref: 1, Scope: "s", Tools: []*toolsdv1.ToolDefinition{
			{Name: "echo", ParametersJson: `{"type":"object"}`, Timeout: durationpb.New(time.Second), Annotations: &toolsdv1.ToolAnnotations{Title: "t"}},
			{Name: "bad", ParametersJson: `{`, Timeout: &durationpb.Duration{Seconds: -1, Nanos: 5}},
			{Name: "neg", MaxContentBytes: -4},
		}}}},
		{Msg: &toolsdv1.ProviderServiceConnectRequest_Unregister{Unregister: &toolsdv1.UnregisterTools{Ref: 2, Scope: "s", Names: []string{"echo", "x"}}}},
		{Msg: &toolsdv1.ProviderServiceConnectRequest_Result{Result: &toolsdv1.ExecuteResult{RequestId: 1, Content: []byte("ok")}}},
		{Msg: &toolsdv1.ProviderServiceConnectRequest_Result{Result: &toolsdv1.ExecuteResult{RequestId: 2, Content: []byte("\xff")}}},
		{Msg: &toolsdv1.ProviderServiceConnectRequest_Result{Result: &toolsdv1.ExecuteResult{RequestId: 1, ValueJson: []byte(`{"a": "b"}`)}}},
		{Msg: &toolsdv1.ProviderServiceConnectRequest_Result{Result: &toolsdv1.ExecuteResult{RequestId: 2, IsError: true, ErrorMessage: []byte("\xc3")}}},
		{Msg: &toolsdv1.ProviderServiceConnectRequest_Result{Result: &toolsdv1.ExecuteResult{RequestId: 99, Content: []byte("stale")}}},
		{Msg: &toolsdv1.ProviderServiceConnectRequest_Progress{Progress: &toolsdv1.ExecuteProgress{RequestId: 1, Message: []byte("\xfe"), Progress: math.NaN(), Total: math.Inf(1)}}},
	}
}

func FuzzProviderMessage(f *testing.F) {
	for _, m := range fuzzSeeds() {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatalf("proto.Marshal(%v) = %v", m, err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var m toolsdv1.ProviderServiceConnectRequest
		if proto.Unmarshal(data, &m) != nil {
			return // gRPC's codec rejects it before the broker sees it
		}
		// As the first message on a new stream.
		first := New(&mapRegistrar{tools: map[string]string{}})
		if err := first.hello(first.newConn(context.Background(), &recordingSender{tb: t}), &m); (err == nil) != (m.GetHello() != nil) {
			t.Errorf("hello(%v) = %v; want an error exactly when it is not a hello", &m, err)
		}
		// As any later message, twice (a replayed result must be stale). Only a register
		// or unregister naming over twice the harness's limit of 4 ends the stream.
		h := newHandleHarness(t)
		farOver := len(m.GetRegister().GetTools()) > 8 || len(m.GetUnregister().GetNames()) > 8
		for range 2 {
			if err := h.b.handle(h.c, &m); (err != nil) != farOver {
				t.Errorf("handle(%v) = %v; want an error exactly when it names over 8 tools", &m, err)
			}
		}
		h.finish(t)
	})
}
