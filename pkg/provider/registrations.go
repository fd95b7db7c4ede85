package provider

import "fmt"

// RegistrationState is where toolsd's answers left a tool's registration on the
// provider's current stream (see [Provider.Registrations]).
type RegistrationState int

const (
	// Pending: the tool is not registered on the current stream, and toolsd has not
	// refused it there either: there is no stream (not yet connected, reconnecting,
	// stopped), toolsd has not answered its registration yet, its name is taken and the
	// provider registers it again ([WithRetakeWindow]; Code is then ALREADY_EXISTS), or
	// it was unregistered (a changed definition being replaced, the shutdown).
	Pending RegistrationState = iota
	// Registered: toolsd holds the tool from this stream and routes its calls here.
	Registered
	// Quarantined: toolsd holds the tool's definition but keeps it invisible, as it
	// differs from the one pinned for its name (registry.pinning), until an operator
	// approves it (ApproveQuarantined). It is not called meanwhile.
	Quarantined
	// Refused: toolsd refused the tool (an invalid schema or condition, a scope the
	// provider may not register in, a name another stream holds past the retake
	// window); Code and Message say why. It is not called, and not registered again
	// before the next stream or an [Provider.Add] that changes its definition.
	Refused
)

// String returns the state's name in lower case ("registered").
func (s RegistrationState) String() string {
	switch s {
	case Pending:
		return "pending"
	case Registered:
		return "registered"
	case Quarantined:
		return "quarantined"
	case Refused:
		return "refused"
	}
	return fmt.Sprintf("RegistrationState(%d)", int(s))
}

// Registration is one tool's registration, as [Provider.Registrations] reports it.
type Registration struct {
	Tool  string // the tool's name
	Scope string // the scope it is registered in ([WithScope]; "" is global)
	State RegistrationState
	// Code and Message are toolsd's refusal: Code a gRPC code name (INVALID_ARGUMENT,
	// PERMISSION_DENIED, ALREADY_EXISTS, …) and Message why, for a person to read (match
	// on Code). Both are empty unless the tool is Refused, or Pending after
	// ALREADY_EXISTS.
	Code, Message string
}

// regAnswer is toolsd's last answer about a tool on the current stream.
type regAnswer struct {
	state         RegistrationState
	code, message string
}

// Registrations returns the registration of each of the provider's tools, in the order
// they were first added, as toolsd last answered it on the current stream: which tools
// toolsd accepted, and why it refused the others, which are never called. It is updated
// as toolsd's answers arrive; a tool is Pending until then, and every tool is Pending
// again from the end of a stream until the next stream's answers. Once [Provider.Ready]
// is closed the first registration has its answers, so a readiness probe or a test can
// wait for Ready and then require its tools to be Registered:
//
//	<-p.Ready()
//	for _, r := range p.Registrations() {
//		if r.State != provider.Registered {
//			return fmt.Errorf("tool %s %s: %s %s", r.Tool, r.State, r.Code, r.Message)
//		}
//	}
//
// The call path does not read it: it costs the answers' bookkeeping only.
func (p *Provider) Registrations() []Registration {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Registration, len(p.tools))
	for i, t := range p.tools {
		a := p.answers[t.Name()]
		out[i] = Registration{Tool: t.Name(), Scope: p.opts.scope, State: a.state, Code: a.code, Message: a.message}
	}
	return out
}

// answered records toolsd's answer about the tool name on s, unless s is no longer the
// provider's stream (its answers say nothing of the current one).
func (p *Provider) answered(s *session, name string, a regAnswer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur != s || p.byName[name] == nil {
		return
	}
	if p.answers == nil {
		p.answers = make(map[string]regAnswer)
	}
	p.answers[name] = a
}

// gaveUp marks the tool name, pending on s after ALREADY_EXISTS, refused: its retakes
// are over.
func (p *Provider) gaveUp(s *session, name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if a, ok := p.answers[name]; ok && p.cur == s && a.state == Pending {
		a.state = Refused
		p.answers[name] = a
	}
}
