package hook

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"go.uber.org/zap"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/pipeline"
	"github.com/toolsd/toolsd/internal/textcut"
	"github.com/toolsd/toolsd/internal/tool"
)

// PostExecute returns the post-execute participant of the connected hooks. It runs the
// hooks subscribed to the call as a chain in priority order (lower first), each with its
// own deadline and each seeing the result as the hooks before it left it: replacements
// apply in order, add_context accumulates in order, and a BLOCK (or a failed fail-closed
// hook) ends the chain. The chain's outcome is one composed verdict: the last content
// and value replacements, every added context, or the block.
//
// Each step asks the hook subscribed when its turn comes: a hook whose stream ended
// after the chain started is asked on a live stream of the same name and identity that
// matches the call and has not taken part in the chain yet (it reconnected), and only
// without one does its failure apply. While a required hook is absent (see
// [WithRequired]) the result is blocked without asking the others.
func (h *Hub) PostExecute() pipeline.PostExecute { return postExecute{h} }

type postExecute struct{ h *Hub }

func (postExecute) Name() string { return "hooks" }

func (p postExecute) PostExecute(ctx context.Context, e *tool.Exec, _ pipeline.Tool, r tool.Result) pipeline.PostVerdict {
	hooks := p.h.subscribed(StagePostExecute, e)
	absent := p.h.absent(StagePostExecute, e, hooks)
	if len(hooks) == 0 && absent == nil {
		return pipeline.PostVerdict{}
	}
	ch := chain{cur: r}
	if absent != nil {
		if ctx.Err() != nil {
			return ch.cancelled()
		}
		p.h.failedAbsent(absent, e)
		return unavailablePost(absent.name, errRequiredAbsent)
	}
	call, traceContext := hookCall(e), p.h.traceContext(ctx)
	ran := make([]*conn, 0, len(hooks))
	for _, c := range hooks {
		if ctx.Err() != nil {
			return ch.cancelled()
		}
		if slices.Contains(ran, c) {
			continue // it took the turn of a stream of its name that had ended
		}
		if c.isDead() {
			c = p.h.successor(c, e, ran)
		}
		ran = append(ran, c)
		x := p.h.send(StagePostExecute, []*conn{c}, call, hookResult(&ch.cur), traceContext)
		a, end := x.next(ctx)
		x.close()
		switch end {
		case cancelled:
			return ch.cancelled()
		case expired:
			a.err = errTimeout
		}
		if stop := p.h.postStep(&ch, c, e, a); stop {
			break
		}
	}
	return ch.verdict()
}

// successor returns the live hook that takes the turn of dead in a post-execute chain
// for e: the first, in the current subscription table, of dead's name, opened by dead's
// identity, that matches e and is not in ran. Without one it returns dead, whose
// request then fails. Hook names are the hooks' own choice: a tenant's hook named like
// the operator's must not stand in for it, or the operator's fail-closed hook would no
// longer block that tenant's results.
func (h *Hub) successor(dead *conn, e *tool.Exec, ran []*conn) *conn {
	for _, c := range h.subscribed(StagePostExecute, e) {
		if c != dead && c.hello.name == dead.hello.name && c.identity == dead.identity && c.confined == dead.confined &&
			!slices.Contains(ran, c) && !c.isDead() {
			return c
		}
	}
	return dead
}

// chain is the composed outcome of the post-execute hooks so far.
type chain struct {
	cur     tool.Result // the result as the next hook sees it
	content *string
	// derived: the chain derived content from a value it set, and no hook has set
	// content since.
	derived  bool
	value    json.RawMessage
	contexts []string
	// contextBytes is the length of contexts' entries together.
	contextBytes int
	block        *pipeline.PostVerdict
}

// postStep applies one hook's answer; it reports whether the chain ends.
func (h *Hub) postStep(ch *chain, c *conn, e *tool.Exec, a answer) bool {
	if a.err != nil {
		return h.postFailure(ch, c, e, a.err)
	}
	d := a.d
	switch d.GetVerdict() {
	case toolsdv1.HookVerdict_HOOK_VERDICT_UNSPECIFIED, toolsdv1.HookVerdict_HOOK_VERDICT_ACCEPT:
		h.addContexts(ch, c, e, d)
		return false
	case toolsdv1.HookVerdict_HOOK_VERDICT_BLOCK:
		h.addContexts(ch, c, e, d)
		v := pipeline.PostVerdict{Action: pipeline.Block, Reason: reasonOf(d), UserReason: userReason(c, reasonOf(d), "blocked the result")}
		if d.GetPrivate() {
			v.Reason = "" // the pipeline's generic message
		}
		ch.block = &v
		return true
	case toolsdv1.HookVerdict_HOOK_VERDICT_REPLACE:
		h.addContexts(ch, c, e, d)
		return ch.replace(d)
	}
	return h.postFailure(ch, c, e, fmt.Errorf("%w: verdict %s is not valid after execution", errProtocol, d.GetVerdict()))
}

// addContexts appends the decision's contexts that carry text. One with none (empty,
// or white space only) is dropped: delivered, it would become an empty user message in
// the model's next request, which model APIs refuse. One that would take the call past
// the hub's context limits is dropped too (later ones that fit are kept), logged and
// counted: the batch's settled message gathers every call's contexts.
func (h *Hub) addContexts(ch *chain, c *conn, e *tool.Exec, d *toolsdv1.HookDecision) {
	dropped, droppedBytes := 0, 0
	for _, s := range d.GetAddContext() {
		switch {
		case strings.TrimSpace(s) == "":
		case len(ch.contexts) >= h.opts.maxContexts || len(s) > h.opts.maxContextBytes-ch.contextBytes:
			dropped++
			droppedBytes += len(s)
		default:
			ch.contexts = append(ch.contexts, s)
			ch.contextBytes += len(s)
		}
	}
	if dropped == 0 {
		return
	}
	h.opts.obs.ContextsDropped(c.hello.name, dropped)
	c.log.Warn("hook contexts dropped", zap.String("hook", c.hello.name), zap.String("tool", e.Name),
		zap.String("call_id", textcut.Ellipsis(e.CallID, textcut.MaxLoggedID)), zap.Int("dropped", dropped), zap.Int("dropped_bytes", droppedBytes),
		zap.Int("max_contexts", h.opts.maxContexts), zap.Int("max_context_bytes", h.opts.maxContextBytes))
}

// replace applies a REPLACE to the result the next hook sees. The composed verdict
// carries every content the chain set, explicit or derived from a new value, so the
// pipeline's result is the one the last hook left. A value for an error result ends the
// chain: the pipeline rejects it.
func (ch *chain) replace(d *toolsdv1.HookDecision) bool {
	if d.ReplaceContent != nil {
		s := d.GetReplaceContent()
		ch.content, ch.derived = &s, false
		ch.cur = replaceContent(ch.cur, s)
	}
	if v := d.GetReplaceValueJson(); v != "" {
		ch.value = json.RawMessage(v)
		if ch.cur.IsError {
			return true
		}
		if d.ReplaceContent == nil && (ch.derived || tool.DerivedFrom(ch.cur.Content, ch.cur.Value)) {
			// The content derived again is carried as a replacement of its own: the
			// pipeline derives content only from the dispatched result, which an
			// earlier hook's content may have replaced with the old value's text. It
			// stays derived through a value that is not JSON (its text is then "", and
			// normalization fails the value unless a later hook replaces it).
			s, _ := tool.ContentFromValue(ch.value)
			ch.content, ch.derived = &s, true
			ch.cur.Content = s
		}
		ch.cur.Value = ch.value
	}
	return false
}

// replaceContent mirrors the pipeline: on an error result the message follows the
// content, which stays "Error: <message>".
func replaceContent(r tool.Result, content string) tool.Result {
	if !r.IsError || r.Err == nil {
		r.Content = content
		return r
	}
	er := *r.Err
	er.Message = strings.TrimPrefix(content, tool.ErrorContentPrefix)
	r.Err, r.Content = &er, tool.ErrorContentPrefix+er.Message
	return r
}

// postFailure handles a hook that could not review the result: block with
// POLICY_UNAVAILABLE, or go on without it when the hook fails open for e (see
// [Hub.failsOpen]).
func (h *Hub) postFailure(ch *chain, c *conn, e *tool.Exec, err error) bool {
	if h.failed(c, StagePostExecute, e, err) {
		return false
	}
	v := unavailablePost(c.hello.name, err)
	ch.block = &v
	return true
}

// unavailablePost blocks a result that the hook named hook could not review, for err.
func unavailablePost(hook string, err error) pipeline.PostVerdict {
	return pipeline.PostVerdict{
		Action:     pipeline.Block,
		Reason:     msgResultUnavailable,
		UserReason: failureReason(hook, err),
		Code:       tool.CodePolicyUnavailable,
	}
}

// cancelled withholds a result whose call was cancelled before the hooks reviewed it;
// an error keeps its code, a success becomes ABORTED.
func (ch *chain) cancelled() pipeline.PostVerdict {
	ch.block = &pipeline.PostVerdict{Action: pipeline.Block, Reason: msgCancelledReview, Code: cmp.Or(ch.cur.Code(), tool.CodeAborted)}
	return ch.verdict()
}

// verdict is the composed verdict of the chain so far.
func (ch *chain) verdict() pipeline.PostVerdict {
	contexts := slices.Clip(ch.contexts)
	switch {
	case ch.block != nil:
		v := *ch.block
		v.AddContext = contexts
		return v
	case ch.content != nil || ch.value != nil:
		return pipeline.PostVerdict{Action: pipeline.Replace, Content: ch.content, Value: ch.value, AddContext: contexts}
	}
	return pipeline.PostVerdict{AddContext: contexts}
}
