package session

// toolSummary is an immutable [Summary] snapshot. Updates copy it, which is cheap
// because the set of tool names a session uses changes rarely, and lets Summary return
// without copying or locking.
type toolSummary struct {
	called    map[string]struct{}
	succeeded map[string]struct{}
}

var emptySummary = &toolSummary{}

func (s *toolSummary) Called(name string) bool    { _, ok := s.called[name]; return ok }
func (s *toolSummary) Succeeded(name string) bool { _, ok := s.succeeded[name]; return ok }

// toolNames is what some events add to a summary.
type toolNames struct {
	called, succeeded []string
}

// add notes the names c adds that have lacks (nil: none yet).
func (n *toolNames) add(c change, have *toolSummary) {
	if have == nil {
		have = emptySummary
	}
	if c.called != "" && !have.Called(c.called) {
		n.called = append(n.called, c.called)
	}
	if c.succeeded != "" && !have.Succeeded(c.succeeded) {
		n.succeeded = append(n.succeeded, c.succeeded)
	}
}

func (n *toolNames) empty() bool { return len(n.called) == 0 && len(n.succeeded) == 0 }

// with returns s itself when it already holds every name, else an updated copy.
func (s *toolSummary) with(n toolNames) *toolSummary {
	if !s.lacks(s.called, n.called) && !s.lacks(s.succeeded, n.succeeded) {
		return s
	}
	return &toolSummary{called: union(s.called, n.called), succeeded: union(s.succeeded, n.succeeded)}
}

func (s *toolSummary) lacks(set map[string]struct{}, names []string) bool {
	for _, name := range names {
		if _, ok := set[name]; !ok {
			return true
		}
	}
	return false
}

func union(set map[string]struct{}, names []string) map[string]struct{} {
	out := make(map[string]struct{}, len(set)+len(names))
	for k := range set {
		out[k] = struct{}{}
	}
	for _, name := range names {
		out[name] = struct{}{}
	}
	return out
}

// openCall is a tool/call still waiting for its tool/result.
type openCall struct {
	callID, name string
}

// change is what one event did to its session's calls.
type change struct {
	opened    bool     // the event is a tool/call, now open at its own seq
	closed    []uint64 // seqs of the open calls the event closed (valid until the next apply)
	called    string   // tool name the event called
	succeeded string   // tool name the event reported a success for
}

// calls tracks one session's open calls. It is not safe for concurrent use.
type calls struct {
	open    map[uint64]openCall
	scratch []uint64
}

// callNamer resolves the tool name of a stored tool/call ("" when seq is not one).
type callNamer interface {
	callName(seq uint64) string
}

// apply records ev (whose Seq is assigned). names resolves a cited call that is no
// longer open (a second result for one call).
func (c *calls) apply(ev *Event, names callNamer) change {
	switch {
	case ev.Type == TypeToolCall && ev.Call != nil:
		if c.open == nil {
			c.open = make(map[uint64]openCall)
		}
		c.open[ev.Seq] = openCall{callID: ev.Call.CallID, name: ev.Call.Name}
		return change{opened: true, called: ev.Call.Name}
	case ev.Type == TypeToolResult && ev.Result != nil:
		return c.close(ev, names)
	}
	return change{}
}

func (c *calls) close(ev *Event, names callNamer) change {
	var ch change
	name := ""
	c.scratch = c.scratch[:0]
	for _, s := range ev.SourceSeqs {
		if oc, ok := c.open[s]; ok {
			delete(c.open, s)
			c.scratch = append(c.scratch, s)
			name = oc.name
		}
	}
	if len(ev.SourceSeqs) == 0 { // an uncited result closes the oldest open call with its id
		if s, oc, ok := c.byCallID(ev.Result.CallID); ok {
			delete(c.open, s)
			c.scratch = append(c.scratch, s)
			name = oc.name
		}
	}
	ch.closed = c.scratch
	if ev.Result.IsError {
		return ch
	}
	if name == "" && len(ev.SourceSeqs) > 0 {
		name = names.callName(ev.SourceSeqs[0])
	}
	ch.succeeded = name
	return ch
}

func (c *calls) byCallID(id string) (uint64, openCall, bool) {
	var (
		best  uint64
		found openCall
	)
	for s, oc := range c.open {
		if oc.callID == id && (best == 0 || s < best) {
			best, found = s, oc
		}
	}
	return best, found, best != 0
}
