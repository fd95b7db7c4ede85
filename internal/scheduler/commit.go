package scheduler

import (
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/toolsd/toolsd/internal/textcut"
	"github.com/toolsd/toolsd/internal/tool"
)

// commitLoop is the committer of a multi-call batch: it receives indices in model order
// and commits each run of consecutive ready results with one append. It ends when ready
// is closed and drained.
func (r *run) commitLoop(ready <-chan int) {
	for lo := range ready {
		hi := lo + 1
	drain:
		for {
			select {
			case i, ok := <-ready:
				if !ok {
					break drain
				}
				hi = i + 1
			default:
				break drain
			}
		}
		r.commit(lo, hi)
	}
}

// commit makes results lo..hi-1 durable with one append, then hands them to the sink in
// order. After a log failure nothing more is appended or delivered: the batch is
// cancelled and Execute reports the failure.
func (r *run) commit(lo, hi int) {
	if r.logErr != nil {
		return
	}
	buf := r.pending[:0]
	for i := lo; i < hi; i++ {
		buf = append(buf, Committed{Index: i, CallSeq: r.callSeqs[i], Result: r.slots[i].result})
	}
	seqs, err := r.appendResults(buf)
	if errors.Is(err, ErrResultTooLarge) {
		seqs, err = r.appendEach(buf)
	}
	if err != nil {
		r.deliverAll(lo, seqs) // appended one by one before the failure
		r.logErr = err
		if r.cancel != nil {
			r.cancel()
		}
		r.s.logger.Error("tool results not recorded; batch cancelled",
			zap.String("session_id", r.b.SessionID), zap.String("batch_id", r.b.BatchID),
			zap.Int("first_index", lo), zap.Int("results", hi-lo), zap.Error(err))
		return
	}
	r.deliverAll(lo, seqs)
}

// deliverAll records the seqs of results lo, lo+1, … and hands them to the sink.
func (r *run) deliverAll(lo int, seqs []uint64) {
	for k, seq := range seqs {
		i := lo + k
		r.slots[i].resultSeq = seq
		r.committed++
		if !r.sinkGone.Load() {
			r.deliver(i, seq)
		}
	}
}

// appendEach appends buf's results one at a time, after the log refused them together
// for an event's size. A result the log refuses on its own becomes RESULT_TOO_LARGE. It
// returns the seqs of the results appended before any other failure.
//
//go:noinline
func (r *run) appendEach(buf []Committed) ([]uint64, error) {
	seqs := make([]uint64, 0, len(buf))
	for k := range buf {
		one := buf[k : k+1]
		s, err := r.appendResults(one)
		if errors.Is(err, ErrResultTooLarge) {
			res := &r.slots[one[0].Index].result
			r.s.logger.Warn("tool result over the session log's event limit; recorded as RESULT_TOO_LARGE",
				zap.String("session_id", r.b.SessionID), zap.String("call_id", textcut.Ellipsis(r.b.Calls[one[0].Index].CallID, textcut.MaxLoggedID)),
				zap.Int("content_bytes", len(res.Content)), zap.Int("value_bytes", len(res.Value)), zap.Int("meta_bytes", len(res.Meta)))
			tooLarge := tool.Failure(tool.CodeResultTooLarge, fmt.Sprintf(
				"the tool's result (%d bytes) is over the session log's limit for one event", len(res.Content)+len(res.Value)+len(res.Meta)))
			// What the result asked of the turn is not part of its event: it stays.
			tooLarge.ConcludesTurn, tooLarge.AdditionalContexts = res.ConcludesTurn, res.AdditionalContexts
			*res = tooLarge
			one[0].Result = *res
			s, err = r.appendResults(one)
		}
		if err != nil {
			return seqs, err
		}
		seqs = append(seqs, s...)
	}
	return seqs, nil
}

// appendResults appends buf to the log, turning a panicking log into an error so that
// the batch still settles.
func (r *run) appendResults(buf []Committed) (seqs []uint64, err error) {
	defer r.s.logPanicked("append results", &err)
	seqs, err = r.s.log.AppendResults(r.logCtx, r.b, buf)
	if err != nil {
		return nil, &LogError{Op: "append results", Err: err}
	}
	if len(seqs) != len(buf) {
		return nil, fmt.Errorf("%w: %d result seqs for %d results", ErrSeqCount, len(seqs), len(buf))
	}
	return seqs, nil
}

// logPanicked, deferred around a call of the session log, turns its panic into *err
// (what is being appended says what) so that the batch fails as on a log error: a
// panicking store must not take down the handler with the batch's goroutines running.
func (s *Scheduler) logPanicked(what string, err *error) {
	if p := recover(); p != nil {
		s.logger.Error("session log panicked", zap.String("append", what), zap.Any("panic", p), zap.Stack("stack"))
		s.obs.Panicked()
		*err = &LogError{Op: what, Err: fmt.Errorf("log panicked: %v", p)}
	}
}

// deliver hands durable result i to the sink. A failing (or panicking) sink means the
// client is gone: it is not called again, and the batch carries on.
func (r *run) deliver(i int, seq uint64) {
	defer func() {
		if p := recover(); p != nil {
			r.sinkGone.Store(true)
			r.s.logger.Error("result sink panicked", zap.Any("panic", p), zap.Stack("stack"))
			r.s.obs.Panicked()
		}
	}()
	if err := r.sink.Result(i, r.callSeqs[i], seq, r.slots[i].result); err != nil {
		r.sinkGone.Store(true)
		r.s.logger.Debug("client gone; results are still recorded",
			zap.String("session_id", r.b.SessionID), zap.String("batch_id", r.b.BatchID),
			zap.Int("index", i), zap.Error(err))
	}
}
