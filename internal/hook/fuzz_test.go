package hook

import (
	"encoding/json"
	"testing"

	"google.golang.org/protobuf/proto"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/tool"
)

type nopSender struct{}

func (nopSender) Send(*response) error { return nil }

// FuzzHookMessage feeds two arbitrary messages from a hook through the stream's message
// handling, the hello validation and subscription matching, and the mapping of
// decisions to verdicts: none of it may panic.
func FuzzHookMessage(f *testing.F) {
	seeds := []*toolsdv1.HookServiceConnectRequest{
		{Msg: &toolsdv1.HookServiceConnectRequest_Hello{Hello: &toolsdv1.HookHello{Name: "h", FailOpen: true,
			Subscriptions: []*toolsdv1.HookSubscription{
				{Stage: toolsdv1.HookStage_HOOK_STAGE_PRE_EXECUTE, Tool: "ec*", Scope: "tenant-a/**", Priority: -3},
				{Stage: toolsdv1.HookStage_HOOK_STAGE_POST_EXECUTE, Tool: "[a-z]*", Scope: "**/agent"},
			}}}},
		{Msg: &toolsdv1.HookServiceConnectRequest_Hello{Hello: &toolsdv1.HookHello{Name: "h",
			Subscriptions: []*toolsdv1.HookSubscription{{Stage: 9, Tool: "["}}}}},
		{Msg: &toolsdv1.HookServiceConnectRequest_Decision{Decision: &toolsdv1.HookDecision{RequestId: 1,
			Verdict: toolsdv1.HookVerdict_HOOK_VERDICT_DENY, Reason: "no", Private: true}}},
		{Msg: &toolsdv1.HookServiceConnectRequest_Decision{Decision: &toolsdv1.HookDecision{RequestId: 2,
			Verdict: toolsdv1.HookVerdict_HOOK_VERDICT_REPLACE, ReplaceContent: proto.String("x"), ReplaceValueJson: `{"a":1}`,
			AddContext: []string{"c"}}}},
		{Msg: &toolsdv1.HookServiceConnectRequest_Decision{Decision: &toolsdv1.HookDecision{RequestId: 3, Verdict: 77}}},
		{},
	}
	for _, a := range seeds {
		for _, b := range seeds {
			ab, _ := proto.Marshal(a)
			bb, _ := proto.Marshal(b)
			f.Add(ab, bb)
		}
	}
	f.Fuzz(func(t *testing.T, first, second []byte) {
		h := New()
		c := h.newConn(nopSender{}, Scopes{})
		c.hello = hello{name: "fuzz"}
		ch := make(chan answer, 3)
		for i := range 3 {
			// Sent under request ids 1 to 3: a decision resolves only a request the
			// stream has sent (see conn.resolve).
			id := uint64(i + 1)
			c.pending[id] = waiter{slot: i, ch: ch, id: id}
			c.sent[id] = id
		}
		e := &tool.Exec{Call: tool.Call{Name: "echo", Scope: "tenant-a/x/agent", Arguments: `{}`}, Siblings: []string{"echo"}}
		for _, b := range [][]byte{first, second} {
			var m toolsdv1.HookServiceConnectRequest
			if proto.Unmarshal(b, &m) != nil {
				break
			}
			if c.handle(&m) != nil {
				break
			}
			select {
			case hm := <-c.helloCh:
				if hl, err := parseHello(hm); err == nil {
					c.hello = hl
					buildTable([]*conn{c}).match(StagePreExecute, e.Name, e.Scope)
					buildTable([]*conn{c}).match(StagePostExecute, "", "")
				}
			default:
			}
		}
		for {
			select {
			case a := <-ch:
				h.preVerdict(c, e, a)
				for _, r := range []tool.Result{tool.Failure(tool.CodeToolError, "boom"), {Content: `{"a":1}`, Value: json.RawMessage(`{"a":1}`)}} {
					ch := chain{cur: r}
					h.postStep(&ch, c, e, a)
					ch.verdict()
				}
			default:
				return
			}
		}
	})
}
