package scheduler

import (
	"go.uber.org/zap"
)

// settle gathers what the committed results leave for the loop and records their
// additional contexts as user/message events, in FIFO order, citing each result. The
// contexts are held to the scheduler's maxContextBytes: one that does not fit is
// dropped from the log and from Settled alike.
func (r *run) settle(cancelled bool) (Settled, error) {
	st := Settled{Cancelled: cancelled, Results: r.committed}
	err := r.logErr
	room := r.s.maxContextBytes
	dropped, droppedBytes := 0, 0
	for i := range r.committed {
		res := &r.slots[i].result
		st.ConcludesTurn = st.ConcludesTurn || res.ConcludesTurn
		if len(res.AdditionalContexts) == 0 {
			continue
		}
		contexts := fitContexts(res.AdditionalContexts, &room)
		if n := len(res.AdditionalContexts) - len(contexts); n > 0 {
			dropped += n
			droppedBytes += contextsBytes(res.AdditionalContexts) - contextsBytes(contexts)
		}
		if len(contexts) == 0 {
			continue
		}
		st.AdditionalContexts = append(st.AdditionalContexts, contexts...)
		if err != nil {
			continue
		}
		if e := r.appendContexts(i, contexts); e != nil {
			err = e
			r.s.logger.Error("additional contexts not recorded",
				zap.String("session_id", r.b.SessionID), zap.String("batch_id", r.b.BatchID),
				zap.Int("index", i), zap.Error(e))
		}
	}
	if dropped > 0 {
		r.s.obs.ContextsDropped(dropped)
		r.s.logger.Warn("additional contexts dropped",
			zap.String("session_id", r.b.SessionID), zap.String("batch_id", r.b.BatchID),
			zap.Int("dropped", dropped), zap.Int("dropped_bytes", droppedBytes),
			zap.Int("max_context_bytes", r.s.maxContextBytes))
	}
	return st, err
}

// fitContexts returns the contexts that fit in *room bytes, taking each one's room as
// it goes, in order; contexts itself when all of them fit.
func fitContexts(contexts []string, room *int) []string {
	var kept []string
	for i, c := range contexts {
		if n := settledSize(c); n <= *room {
			*room -= n
			if kept != nil {
				kept = append(kept, c)
			}
			continue
		}
		if kept == nil {
			kept = append(make([]string, 0, len(contexts)-1), contexts[:i]...)
		}
	}
	if kept == nil {
		return contexts
	}
	return kept
}

// settledSize is the bytes c takes in the settled message: a one-byte field tag, its
// length as a varint, and its text.
func settledSize(c string) int {
	varint := 1
	for l := len(c); l >= 0x80; l >>= 7 {
		varint++
	}
	return 1 + varint + len(c)
}

func contextsBytes(contexts []string) int {
	n := 0
	for _, c := range contexts {
		n += len(c)
	}
	return n
}

// appendContexts logs result i's additional contexts, turning a panicking log into an
// error.
func (r *run) appendContexts(i int, contexts []string) (err error) {
	defer r.s.logPanicked("append contexts", &err)
	if err := r.s.log.AppendContexts(r.logCtx, r.b, r.slots[i].resultSeq, contexts); err != nil {
		return &LogError{Op: "append contexts", Err: err}
	}
	return nil
}
