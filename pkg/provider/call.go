package provider

import "time"

// Call describes the call a handler is running.
type Call struct {
	// CallID is the model's id for this tool call.
	CallID string
	// SessionID is the agent session the call belongs to.
	SessionID string
	// Scope is the calling agent's scope.
	Scope string
	// Tool is the tool's name.
	Tool string
	// Turn and Step locate the call in the session.
	Turn, Step uint64
	// Attempt is 1 for the first try and higher when toolsd retries an idempotent tool.
	Attempt int
	// Deadline is when toolsd stops waiting (zero if none), on this host's clock: when
	// the request arrived plus the time toolsd had left when it sent it, so skew between
	// the two clocks does not move it (a toolsd that sends no timeout gives its deadline,
	// read on its own clock). The handler's context carries it too.
	Deadline time.Time
	// TraceContext holds the call's W3C Trace Context headers ("traceparent" and
	// "tracestate"), naming toolsd's span of the call as the parent, when toolsd traces;
	// nil otherwise. The handler's context already carries it as a remote span context
	// (trace.SpanContextFromContext), so that a span the handler starts with any
	// OpenTelemetry tracer joins the agent's trace; the headers are for handlers that
	// trace with something else or pass them on. Read-only.
	TraceContext map[string]string

	run *running
}

// Progress reports intermediate progress of the call to toolsd, which forwards it to
// the agent loop. progress and total are in any unit (total 0 means unknown). Reports
// after the handler returned, or after toolsd cancelled the call, are dropped. A message
// is cut to 64 KiB (less if toolsd's max_result_bytes is smaller).
func (c Call) Progress(message string, progress, total float64) {
	if c.run != nil {
		c.run.progress(message, progress, total)
	}
}
