package pipeline

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/toolsd/toolsd/internal/tool"
)

// Pipeline runs tool calls through the stages. It is safe for concurrent use; its config
// and policy can be swapped while calls are in flight (each call keeps the snapshot it
// started with). Its Run and Mode methods are what a batch scheduler needs per call.
type Pipeline struct {
	res  Resolver
	disp Dispatcher
	opts options

	mu  sync.Mutex // serializes snapshot writers
	cur atomic.Pointer[snapshot]
}

// snapshot is one immutable generation of config and policy with its chain precomposed.
type snapshot struct {
	p      *Pipeline
	base   Config // as given, before defaults and the policy's default decision
	cfg    Config
	policy Policy
	// guardList is [WithGuards]'s followed by the policy's ([GuardSource]).
	guardList []Guard
	// dispatch is the execute chain: the built-in layers and the operator's execute
	// interceptors around the provider call.
	dispatch Handler
}

// New builds a pipeline that resolves tools with res and dispatches them with disp.
func New(res Resolver, disp Dispatcher, opts ...Option) *Pipeline {
	p := &Pipeline{res: res, disp: disp}
	for _, o := range opts {
		o(&p.opts)
	}
	if p.opts.logger == nil {
		p.opts.logger = zap.NewNop()
	}
	if p.opts.now == nil {
		p.opts.now = time.Now
	}
	if p.opts.sleep == nil {
		p.opts.sleep = sleepCtx
	}
	if p.opts.backoff == nil {
		p.opts.backoff = jitteredBackoff
	}
	if p.opts.after == nil {
		p.opts.after = func(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }
	}
	p.cur.Store(p.build(p.opts.cfg, p.opts.policy))
	return p
}

// SetPolicy installs (or, with nil, removes) the operator policy for calls that start
// afterwards; calls in flight finish under the policy they started with. It is how a
// config reload (SIGHUP) applies new rules, and new guards when pol is a [GuardSource].
func (p *Pipeline) SetPolicy(pol Policy) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cur.Store(p.build(p.cur.Load().base, pol))
}

// SetConfig replaces the limits and defaults for calls that start afterwards.
func (p *Pipeline) SetConfig(cfg Config) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cur.Store(p.build(cfg, p.cur.Load().policy))
}

// Run takes one call through every stage and returns its final result. It never fails:
// every failure, panics included, is an error result. A call whose mode [Pipeline.Mode]
// read runs under the config and policy that gave it, the current ones otherwise.
func (p *Pipeline) Run(ctx context.Context, e *tool.Exec) tool.Result {
	s, ok := e.Pin.(*snapshot)
	if !ok || s.p != p {
		s = p.cur.Load()
	}
	if p.opts.tracer != nil {
		return s.traced(ctx, e, p.opts.tracer)
	}
	return s.finish(ctx, e)
}

// Mode returns the call's concurrency mode: the operator's override if set, else the
// operator's per-call mode expression, else the definition's mode, and parallel when
// none says. A failing mode expression yields exclusive (the safe choice); an
// unresolvable tool yields parallel (it fails in prepare without dispatching). It pins
// the call (e.Pin) to the config and policy it read, under which [Pipeline.Run] then
// runs the call: a reload in between applies to later calls only. A mode read from the
// definition is kept in e.DefinitionMode: Run does not start a call scheduled as
// parallel whose tool has been registered again as exclusive meanwhile.
func (p *Pipeline) Mode(ctx context.Context, e *tool.Exec) tool.Mode {
	s := p.cur.Load()
	e.Pin, e.DefinitionMode = s, tool.ModeUnspecified
	c := &e.Call
	set := s.settings(c.Scope, c.Name)
	if set.Mode != tool.ModeUnspecified {
		return set.Mode
	}
	if set.ModeFunc != nil {
		m, err := set.ModeFunc(ctx, c)
		if err != nil {
			p.opts.logger.Warn("mode expression failed", zap.String("tool", c.Name), zap.Error(err))
			return tool.ModeExclusive
		}
		if m != tool.ModeUnspecified {
			return m
		}
	}
	e.DefinitionMode = tool.ModeParallel
	t, err := p.res.Resolve(ctx, c)
	if err != nil {
		return tool.ModeParallel
	}
	if m := t.Definition().Mode; m != tool.ModeUnspecified {
		e.DefinitionMode = m
	}
	return e.DefinitionMode
}

// build makes one config/policy generation: finish → prepare → complete are plain
// calls, the prepare checks running one after another, and complete runs the execute
// chain composed here once (stage trace, metrics, timeout, retry, then the operator's
// interceptors around the provider call). Keeping the call path shallow keeps a call's
// stack small: the scheduler reserves it up front (see stack.Reserve), and a
// call that outgrows the reservation pays a stack copy.
func (p *Pipeline) build(cfg Config, pol Policy) *snapshot {
	s := &snapshot{p: p, base: cfg, cfg: cfg.withDefaults(), policy: pol, guardList: p.opts.guards}
	if gs, ok := pol.(GuardSource); ok {
		if pg := gs.Guards(); len(pg) > 0 {
			s.guardList = append(slices.Clip(p.opts.guards), pg...)
		}
	}
	if pol != nil {
		s.cfg.DefaultDecision = pol.DefaultDecision()
		if s.cfg.DefaultDecision == Abstain {
			s.cfg.DefaultDecision = Allow
		}
	}
	exec := make([]Interceptor, 0, 4+len(p.opts.execute))
	if p.opts.tracer != nil {
		exec = append(exec, s.traceDispatch)
	}
	if p.opts.observer != nil {
		exec = append(exec, s.metrics)
	}
	exec = append(exec, s.timeout, s.retry)
	exec = append(exec, p.opts.execute...)
	s.dispatch = bind(exec, s.body)
	return s
}

// settings merges the config's per-tool settings with the policy's (policy wins). Not
// inlined, so that its temporaries stay out of resolve's frame.
//
//go:noinline
func (s *snapshot) settings(scope, name string) ToolSettings {
	var ts ToolSettings
	if s.cfg.ToolPolicy != nil {
		ts = s.cfg.ToolPolicy(scope, name)
	}
	if s.policy != nil {
		ts = ts.merge(s.policy.Tool(scope, name))
	}
	return ts
}

func (s *snapshot) body(ctx context.Context, e *tool.Exec, t Tool) tool.Result {
	return s.p.disp.Dispatch(ctx, t, e)
}
