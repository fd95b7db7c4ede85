package tool

// Call is one tool-call block of a batch, as the model emitted it, plus where it sits.
type Call struct {
	SessionID string
	Scope     string
	BatchID   string
	ToolSetID string
	Turn      uint64
	Step      uint64
	// Index is the call's position in the batch (model order).
	Index  int
	CallID string
	Name   string
	// Arguments is the raw JSON text exactly as the model emitted it (may be malformed).
	// A string, so that the one copy made when the request was decoded is shared by
	// validation, policy, the session log and the provider's request, none of which can
	// change it.
	Arguments string
}

// Progress is an intermediate update a provider reports for a running call.
type Progress struct {
	CallID   string
	Index    int
	Message  string
	Progress float64
	Total    float64
}
