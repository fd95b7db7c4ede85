package hook_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/protobuf/proto"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/hook"
	"github.com/toolsd/toolsd/internal/tool"
)

func replaceContent(content string, contexts ...string) answerFunc {
	return always(&toolsdv1.HookDecision{Verdict: toolsdv1.HookVerdict_HOOK_VERDICT_REPLACE,
		ReplaceContent: proto.String(content), AddContext: contexts})
}

// appendContent replaces the content with what the hook saw plus suffix.
func appendContent(suffix string) answerFunc {
	return func(r *toolsdv1.HookRequest) *toolsdv1.HookDecision {
		return &toolsdv1.HookDecision{Verdict: toolsdv1.HookVerdict_HOOK_VERDICT_REPLACE,
			ReplaceContent: proto.String(r.GetResult().GetContent() + suffix)}
	}
}

type postHook struct {
	name   string
	prio   int32
	answer answerFunc
}

func TestPostExecute(t *testing.T) {
	blocked := func(code tool.Code, msg, reason string, contexts ...string) tool.Result {
		r := failure(code, msg, reason)
		r.AdditionalContexts = contexts
		return r
	}
	tests := map[string]struct {
		dispatched tool.Result
		hooks      []postHook
		want       tool.Result
	}{
		"accept keeps the result": {
			hooks: []postHook{{name: "a", answer: always(verdict(toolsdv1.HookVerdict_HOOK_VERDICT_ACCEPT, ""))}},
			want:  tool.Result{Content: "ok"},
		},
		"unspecified accepts, adding context": {
			hooks: []postHook{{name: "a", answer: always(&toolsdv1.HookDecision{AddContext: []string{"c1", "c2"}})}},
			want:  tool.Result{Content: "ok", AdditionalContexts: []string{"c1", "c2"}},
		},
		"replace content": {
			hooks: []postHook{{name: "a", answer: replaceContent("OK!")}},
			want:  tool.Result{Content: "OK!"},
		},
		"replace value": {
			dispatched: tool.Result{Content: "ok", Value: json.RawMessage(`{"n":1}`)},
			hooks: []postHook{{name: "a", answer: always(&toolsdv1.HookDecision{Verdict: toolsdv1.HookVerdict_HOOK_VERDICT_REPLACE,
				ReplaceValueJson: `{"n":2}`})}},
			want: tool.Result{Content: "ok", Value: json.RawMessage(`{"n":2}`)},
		},
		"replace content of an error keeps it an error": {
			dispatched: tool.Failure(tool.CodeToolError, "disk /secret full"),
			hooks:      []postHook{{name: "a", answer: replaceContent("Error: disk full")}},
			want:       failure(tool.CodeToolError, "disk full", ""),
		},
		"block": {
			hooks: []postHook{{name: "a", answer: always(verdict(toolsdv1.HookVerdict_HOOK_VERDICT_BLOCK, "contains a password"))}},
			want:  blocked(tool.CodeBlocked, "contains a password", `hook "a": contains a password`),
		},
		"private block": {
			hooks: []postHook{{name: "a", answer: always(&toolsdv1.HookDecision{Verdict: toolsdv1.HookVerdict_HOOK_VERDICT_BLOCK,
				Reason: "customer 42's password", Private: true})}},
			want: blocked(tool.CodeBlocked, "result blocked by policy", `hook "a": customer 42's password`),
		},
		"two hooks replace in priority order": {
			hooks: []postHook{
				{name: "second", prio: 5, answer: appendContent("+second")},
				{name: "first", prio: 1, answer: appendContent("+first")},
			},
			want: tool.Result{Content: "ok+first+second"},
		},
		"contexts accumulate in order and survive a block": {
			hooks: []postHook{
				{name: "a", prio: 1, answer: always(&toolsdv1.HookDecision{AddContext: []string{"from a"}})},
				{name: "b", prio: 2, answer: always(&toolsdv1.HookDecision{Verdict: toolsdv1.HookVerdict_HOOK_VERDICT_BLOCK, AddContext: []string{"from b"}})},
				{name: "c", prio: 3, answer: always(&toolsdv1.HookDecision{AddContext: []string{"from c"}})},
			},
			want: blocked(tool.CodeBlocked, "result blocked by policy", `hook "b" blocked the result`, "from a", "from b"),
		},
		"block stops the chain": {
			hooks: []postHook{
				{name: "a", prio: 1, answer: always(verdict(toolsdv1.HookVerdict_HOOK_VERDICT_BLOCK, "no"))},
				{name: "b", prio: 2, answer: replaceContent("replaced")},
			},
			want: blocked(tool.CodeBlocked, "no", `hook "a": no`),
		},
		"pre-execute verdict is a protocol error": {
			hooks: []postHook{{name: "a", answer: always(verdict(toolsdv1.HookVerdict_HOOK_VERDICT_ALLOW, ""))}},
			want: blocked(tool.CodePolicyUnavailable, "result withheld: a policy hook is unavailable",
				`hook "a": protocol error: verdict HOOK_VERDICT_ALLOW is not valid after execution`),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			for _, h := range tc.hooks {
				e.connect(t, helloFor(h.name, sub(post, "echo", "", h.prio)), h.answer)
			}
			dispatched := tc.dispatched
			if dispatched.Content == "" {
				dispatched = tool.Result{Content: "ok"}
			}
			disp := &dispatcher{fn: func(*tool.Exec) tool.Result { return dispatched }}
			got := e.newPipeline(disp).Run(t.Context(), newExec("echo", `{}`))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Run() (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPostExecuteSeesResult checks the result a hook is shown, including the previous
// hook's replacement of content and value.
func TestPostExecuteSeesResult(t *testing.T) {
	e := newEnv(t)
	e.connect(t, helloFor("first", sub(post, "", "", 1)), always(&toolsdv1.HookDecision{
		Verdict: toolsdv1.HookVerdict_HOOK_VERDICT_REPLACE, ReplaceContent: proto.String("new"), ReplaceValueJson: `{"v":2}`}))
	second := e.connect(t, helloFor("second", sub(post, "", "", 2)), always(verdict(toolsdv1.HookVerdict_HOOK_VERDICT_ACCEPT, "")))
	disp := &dispatcher{fn: func(*tool.Exec) tool.Result { return tool.Result{Content: "old", Value: json.RawMessage(`{"v":1}`)} }}
	got := e.newPipeline(disp).Run(t.Context(), newExec("echo", `{}`))
	if want := (tool.Result{Content: "new", Value: json.RawMessage(`{"v":2}`)}); !cmp.Equal(want, got) {
		t.Errorf("Run() = %+v, want %+v", got, want)
	}
	req := second.next()
	if req.GetStage() != post {
		t.Errorf("stage = %v, want %v", req.GetStage(), post)
	}
	wantSeen := &toolsdv1.HookResult{Content: "new", ValueJson: `{"v":2}`}
	if !proto.Equal(wantSeen, req.GetResult()) {
		t.Errorf("second hook saw %v, want %v", req.GetResult(), wantSeen)
	}
}

// TestPostExecuteNotForPrepareFailures checks that a call denied before dispatch never
// reaches post-execute hooks.
func TestPostExecuteNotForPrepareFailures(t *testing.T) {
	e := newEnv(t)
	e.connect(t, helloFor("deny", sub(pre, "", "", 0)), always(verdict(toolsdv1.HookVerdict_HOOK_VERDICT_DENY, "no")))
	p := e.connect(t, helloFor("post", sub(post, "", "", 0)), always(replaceContent("replaced")(nil)))
	r := e.newPipeline(&dispatcher{}).Run(t.Context(), newExec("echo", `{}`))
	if r.Code() != tool.CodeDenied {
		t.Errorf("Run() code = %q, want %q", r.Code(), tool.CodeDenied)
	}
	select {
	case req := <-p.reqs:
		t.Errorf("post hook received %v", req)
	default:
	}
}

// TestChainedValueReplacements: a chain of post-execute hooks that replace a result's
// value (and content) leaves what the model reads, and what a last, accepting hook is
// shown, as the chain left it:
//   - value redaction on derived content: a hook that redacts only the value of a result
//     whose content is derived from it (the tool returned a value alone) redacts what
//     the model reads too, and the next hook sees the content derived again;
//   - value redaction after content replacement: a hook that redacts the value alone,
//     after an earlier hook replaced content and value together (the content being the
//     value's text), redacts what the model reads too, not the earlier hook's content
//     beside the later value;
//   - derived content through a value that is not JSON: content derived from the value
//     stays derived when a hook replaces the value with one that is not JSON (whose
//     text is empty) and a later hook replaces it again with a valid one.
func TestChainedValueReplacements(t *testing.T) {
	replace := func(d *toolsdv1.HookDecision) *toolsdv1.HookDecision {
		d.Verdict = toolsdv1.HookVerdict_HOOK_VERDICT_REPLACE
		return d
	}
	redacted := tool.Result{Content: `{"token":"[redacted]"}`, Value: json.RawMessage(`{"token":"[redacted]"}`)}
	for name, tc := range map[string]struct {
		replacements []*toolsdv1.HookDecision // in chain order
		tool         tool.Result
	}{
		"value redaction on derived content": {
			[]*toolsdv1.HookDecision{replace(&toolsdv1.HookDecision{ReplaceValueJson: `{"token":"[redacted]"}`})},
			tool.Result{Content: `{"token":"s3cret"}`, Value: json.RawMessage(`{"token":"s3cret"}`)},
		},
		"value redaction after content replacement": {
			[]*toolsdv1.HookDecision{
				replace(&toolsdv1.HookDecision{ReplaceContent: proto.String(`{"token":"s3cret"}`), ReplaceValueJson: `{"token":"s3cret"}`}),
				replace(&toolsdv1.HookDecision{ReplaceValueJson: `{"token":"[redacted]"}`}),
			},
			tool.Result{Content: "token: s3cret", Value: json.RawMessage(`{"token": "s3cret"}`)},
		},
		"derived content through a value that is not JSON": {
			[]*toolsdv1.HookDecision{
				replace(&toolsdv1.HookDecision{ReplaceValueJson: `{"token":`}),
				replace(&toolsdv1.HookDecision{ReplaceValueJson: `{"token":"[redacted]"}`}),
			},
			tool.Result{Content: `{"token":"s3cret"}`, Value: json.RawMessage(`{"token":"s3cret"}`)},
		},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			for i, d := range tc.replacements {
				e.connect(t, helloFor(fmt.Sprint("replace-", i), sub(post, "", "", int32(i+1))), always(d))
			}
			last := e.connect(t, helloFor("last", sub(post, "", "", int32(len(tc.replacements)+1))), always(verdict(toolsdv1.HookVerdict_HOOK_VERDICT_ACCEPT, "")))
			disp := &dispatcher{fn: func(*tool.Exec) tool.Result { return tc.tool }}
			got := e.newPipeline(disp).Run(t.Context(), newExec("echo", `{}`))
			if !cmp.Equal(redacted, got) {
				t.Errorf("Run() = %+v, want %+v", got, redacted)
			}
			wantSeen := &toolsdv1.HookResult{Content: redacted.Content, ValueJson: string(redacted.Value)}
			if seen := last.next().GetResult(); !proto.Equal(wantSeen, seen) {
				t.Errorf("the last hook saw %v, want %v", seen, wantSeen)
			}
		})
	}
}

// TestPostExecuteContextLimits: the add_context entries one call keeps, from all its
// hooks together, are bounded in number and bytes. An entry that would take the call
// past either limit is dropped (later ones that fit are kept, in order), counted for its
// hook and logged; the result itself is untouched.
func TestPostExecuteContextLimits(t *testing.T) {
	contexts := func(cs ...string) answerFunc { return always(&toolsdv1.HookDecision{AddContext: cs}) }
	long := strings.Repeat("x", 16)
	tests := map[string]struct {
		count, bytes int
		hooks        []postHook
		want         []string
		dropped      map[string]int
	}{
		"within both limits": {
			count: 4, bytes: 32,
			hooks: []postHook{{name: "a", prio: 1, answer: contexts("a1", "a2")}, {name: "b", prio: 2, answer: contexts("b1")}},
			want:  []string{"a1", "a2", "b1"},
		},
		"past the count": {
			count: 3, bytes: 1 << 10,
			hooks:   []postHook{{name: "a", prio: 1, answer: contexts("a1", "a2")}, {name: "b", prio: 2, answer: contexts("b1", "b2", "b3")}},
			want:    []string{"a1", "a2", "b1"},
			dropped: map[string]int{"b": 2},
		},
		"past the bytes": {
			count: 10, bytes: 20,
			hooks: []postHook{
				{name: "a", prio: 1, answer: contexts("a1", long)},
				{name: "b", prio: 2, answer: contexts(long, "b2")},
				{name: "c", prio: 3, answer: contexts("c3")},
			},
			want:    []string{"a1", long, "b2"},
			dropped: map[string]int{"b": 1, "c": 1},
		},
		"one entry over the bytes": {
			count: 10, bytes: 15,
			hooks:   []postHook{{name: "a", prio: 1, answer: contexts(long, "a2")}},
			want:    []string{"a2"},
			dropped: map[string]int{"a": 1},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			observed, logs := observer.New(zap.WarnLevel)
			e := newEnv(t, hook.WithMaxContexts(tc.count, tc.bytes), hook.WithLogger(zap.New(observed)))
			for _, h := range tc.hooks {
				e.connect(t, helloFor(h.name, sub(post, "echo", "", h.prio)), h.answer)
			}
			disp := &dispatcher{fn: func(*tool.Exec) tool.Result { return tool.Result{Content: "ok"} }}
			got := e.newPipeline(disp).Run(t.Context(), newExec("echo", `{}`))
			if want := (tool.Result{Content: "ok", AdditionalContexts: tc.want}); !cmp.Equal(want, got) {
				t.Errorf("Run() = %+v, want %+v", got, want)
			}
			for _, h := range tc.hooks {
				if got, want := e.obs.get("contexts_dropped:"+h.name), tc.dropped[h.name]; got != want {
					t.Errorf("contexts dropped for hook %q = %d, want %d", h.name, got, want)
				}
				lines := logs.FilterMessage("hook contexts dropped").FilterFieldKey("hook").Filter(func(l observer.LoggedEntry) bool {
					return l.ContextMap()["hook"] == h.name
				})
				if want := min(tc.dropped[h.name], 1); lines.Len() != want {
					t.Errorf("%d warnings about hook %q's dropped contexts, want %d", lines.Len(), h.name, want)
				}
			}
		})
	}
}

// TestPostExecuteContextDefaults: without options a call keeps at most
// hook.DefaultMaxContexts entries of hook.DefaultMaxContextBytes together.
func TestPostExecuteContextDefaults(t *testing.T) {
	e := newEnv(t)
	many := make([]string, hook.DefaultMaxContexts+1)
	for i := range many {
		many[i] = fmt.Sprintf("c%d", i)
	}
	huge := strings.Repeat("x", hook.DefaultMaxContextBytes)
	e.connect(t, helloFor("many", sub(post, "many", "", 0)), always(&toolsdv1.HookDecision{AddContext: many}))
	e.connect(t, helloFor("huge", sub(post, "huge", "", 0)), always(&toolsdv1.HookDecision{AddContext: []string{"small", huge}}))
	disp := &dispatcher{fn: func(*tool.Exec) tool.Result { return tool.Result{Content: "ok"} }}
	p := e.newPipeline(disp)
	if got := p.Run(t.Context(), newExec("many", `{}`)).AdditionalContexts; !slices.Equal(got, many[:hook.DefaultMaxContexts]) {
		t.Errorf("contexts kept of %d = %q, want the first %d", len(many), got, hook.DefaultMaxContexts)
	}
	if got := p.Run(t.Context(), newExec("huge", `{}`)).AdditionalContexts; !slices.Equal(got, []string{"small"}) {
		t.Errorf("contexts kept = %d entries, want [small]: %d bytes and more are over the default", len(got), hook.DefaultMaxContextBytes)
	}
}

// TestPostExecuteChainAsksReconnectedHook: a later hook of a post-execute chain whose
// stream ends, and which connects again, while an earlier hook holds the chain is asked
// at its turn on its new stream, seeing the earlier hook's output: the chain does not
// fail closed on the stream that was live when it started.
func TestPostExecuteChainAsksReconnectedHook(t *testing.T) {
	e := newEnv(t)
	held := make(chan struct{})
	release := make(chan struct{})
	e.connect(t, helloFor("first", sub(post, "", "", 1)), func(r *toolsdv1.HookRequest) *toolsdv1.HookDecision {
		close(held)
		<-release
		return appendContent("+first")(r)
	})
	old := e.connect(t, helloFor("second", sub(post, "", "", 2)), appendContent("+old"))
	disp := &dispatcher{fn: func(*tool.Exec) tool.Result { return tool.Result{Content: "ok"} }}
	p := e.newPipeline(disp)
	done := make(chan tool.Result, 1)
	go func() { done <- p.Run(context.Background(), newExec("echo", `{}`)) }()

	<-held // the chain, holding both hooks, waits for "first"
	_ = old.cc.Close()
	waitUntil(t, "the old stream's removal", func() bool { return len(e.hub.Hooks()) == 1 })
	renewed := e.connect(t, helloFor("second", sub(post, "", "", 2)), appendContent("+second"))
	close(release)

	var got tool.Result
	select {
	case got = <-done:
	case <-time.After(waitTimeout):
		t.Fatal("call still waiting")
	}
	if want := (tool.Result{Content: "ok+first+second"}); !cmp.Equal(want, got) {
		t.Errorf("Run() = %+v, want %+v", got, want)
	}
	if seen := renewed.next().GetResult().GetContent(); seen != "ok+first" {
		t.Errorf("reconnected hook saw content %q, want %q", seen, "ok+first")
	}
	select {
	case r := <-old.reqs:
		t.Errorf("old stream received %v", r)
	default:
	}
	if n := e.obs.get("failure:second:post_execute:false"); n != 0 {
		t.Errorf("failures of hook second = %d, want 0", n)
	}
}

// TestPostExecuteChainGoneHookNotReplaced: a later hook whose stream ended before its
// turn, with no live hook of its name subscribed to the call, fails the chain closed, as
// it did; a live hook of that name whose subscription does not match the call does not
// take its place.
func TestPostExecuteChainGoneHookNotReplaced(t *testing.T) {
	e := newEnv(t)
	held := make(chan struct{})
	release := make(chan struct{})
	e.connect(t, helloFor("first", sub(post, "", "", 1)), func(r *toolsdv1.HookRequest) *toolsdv1.HookDecision {
		close(held)
		<-release
		return appendContent("+first")(r)
	})
	old := e.connect(t, helloFor("second", sub(post, "", "", 2)), appendContent("+old"))
	p := e.newPipeline(&dispatcher{fn: func(*tool.Exec) tool.Result { return tool.Result{Content: "ok"} }})
	done := make(chan tool.Result, 1)
	go func() { done <- p.Run(context.Background(), newExec("echo", `{}`)) }()

	<-held
	_ = old.cc.Close()
	waitUntil(t, "the old stream's removal", func() bool { return len(e.hub.Hooks()) == 1 })
	other := e.connect(t, helloFor("second", sub(post, "other-tool", "", 2)), appendContent("+other"))
	close(release)

	var got tool.Result
	select {
	case got = <-done:
	case <-time.After(waitTimeout):
		t.Fatal("call still waiting")
	}
	if got.Code() != tool.CodePolicyUnavailable || got.Err.Reason != `hook "second": stream closed` {
		t.Errorf("Run() = %+v, want %s from hook second's closed stream", got, tool.CodePolicyUnavailable)
	}
	select {
	case r := <-other.reqs:
		t.Errorf("hook subscribed to another tool received %v", r)
	default:
	}
}

// TestPostExecuteChainGoneHookTakenOnlyByItsIdentity: a hook whose stream ended before
// its turn is replaced only by a stream of its name that its own identity opened. A
// tenant's hook that takes the operator's hook's name must not take its turn: the
// operator's fail-closed hook would then no longer block that tenant's results.
func TestPostExecuteChainGoneHookTakenOnlyByItsIdentity(t *testing.T) {
	for _, tc := range []struct {
		name   string
		md     []string // the new stream's metadata (see tenantsFilter)
		reason string   // "" for a result that went through the new stream
	}{
		{"its own identity", nil, ""},
		{"a tenant's identity", []string{"tenant", "b"}, `hook "second": stream closed`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, hook.WithScopeFilter(tenantsFilter))
			held := make(chan struct{})
			release := make(chan struct{})
			e.connect(t, helloFor("first", sub(post, "", "", 1)), func(r *toolsdv1.HookRequest) *toolsdv1.HookDecision {
				close(held)
				<-release
				return appendContent("+first")(r)
			})
			old := e.connect(t, helloFor("second", sub(post, "", "", 2)), appendContent("+old"))
			p := e.newPipeline(&dispatcher{fn: func(*tool.Exec) tool.Result { return tool.Result{Content: "ok"} }})
			done := make(chan tool.Result, 1)
			go func() { done <- p.Run(context.Background(), withScope(newExec("echo", `{}`), "tenant-b/bot")) }()

			<-held
			_ = old.cc.Close()
			waitUntil(t, "the old stream's removal", func() bool { return len(e.hub.Hooks()) == 1 })
			renewed := e.connect(t, helloFor("second", sub(post, "", "", 2)), appendContent("+second"), withMetadata(tc.md...))
			close(release)

			var got tool.Result
			select {
			case got = <-done:
			case <-time.After(waitTimeout):
				t.Fatal("call still waiting")
			}
			if tc.reason == "" {
				if want := (tool.Result{Content: "ok+first+second"}); !cmp.Equal(want, got) {
					t.Errorf("Run() = %+v, want %+v", got, want)
				}
				return
			}
			if got.Code() != tool.CodePolicyUnavailable || got.Err.Reason != tc.reason {
				t.Errorf("Run() = %+v, want %s from hook second's closed stream", got, tool.CodePolicyUnavailable)
			}
			select {
			case r := <-renewed.reqs:
				t.Errorf("another identity's hook of the same name received %v", r)
			default:
			}
		})
	}
}
