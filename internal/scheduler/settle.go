package scheduler

import (
	"fmt"

	"go.uber.org/zap"
)

// settle gathers what the committed results leave for the loop and records their
// additional contexts as user/message events, in FIFO order, citing each result.
func (r *run) settle(cancelled bool) (Settled, error) {
	st := Settled{Cancelled: cancelled, Results: r.committed}
	err := r.logErr
	for i := range r.committed {
		res := &r.slots[i].result
		st.ConcludesTurn = st.ConcludesTurn || res.ConcludesTurn
		if len(res.AdditionalContexts) == 0 {
			continue
		}
		st.AdditionalContexts = append(st.AdditionalContexts, res.AdditionalContexts...)
		if err != nil {
			continue
		}
		if e := r.appendContexts(i, res.AdditionalContexts); e != nil {
			err = e
			r.s.logger.Error("additional contexts not recorded",
				zap.String("session_id", r.b.SessionID), zap.String("batch_id", r.b.BatchID),
				zap.Int("index", i), zap.Error(e))
		}
	}
	return st, err
}

// appendContexts logs result i's additional contexts, turning a panicking log into an
// error.
func (r *run) appendContexts(i int, contexts []string) (err error) {
	defer r.s.logPanicked("append contexts", &err)
	if err := r.s.log.AppendContexts(r.logCtx, r.b, r.slots[i].resultSeq, contexts); err != nil {
		return fmt.Errorf("scheduler: append contexts: %w", err)
	}
	return nil
}
