package session

import (
	"bytes"

	bolt "go.etcd.io/bbolt"
	"go.uber.org/zap"

	"github.com/toolsd/toolsd/internal/tool"
)

// InterruptedMessage is the model-facing message of the synthetic result Open writes for
// a call that a crash or kill interrupted.
const InterruptedMessage = "call interrupted by a toolsd restart; it was not re-run"

// interruptedResult is the synthetic tool/result that closes an interrupted call. It
// names the tool as every failure of a call does ([tool.NamedInResult]): a call may name
// a tool that does not exist with megabytes of text, which its tool/call holds already.
func interruptedResult(call *Event) Event {
	return Event{
		Type:       TypeToolResult,
		BatchID:    call.BatchID,
		Turn:       call.Turn,
		Step:       call.Step,
		SourceSeqs: []uint64{call.Seq},
		Result: &ResultRecord{
			CallID:    call.Call.CallID,
			Content:   tool.ErrorContentPrefix + InterruptedMessage,
			IsError:   true,
			Error:     &tool.Error{Code: tool.CodeAborted, Message: InterruptedMessage, Tool: tool.NamedInResult(call.Call.Name)},
			Recovered: true,
		},
	}
}

type orphan struct {
	key       []byte
	sessionID string
	seq       uint64
}

// recoverOpenCalls appends a synthetic result for every call left open by the previous
// run, in one transaction that also empties the open-call index, so a second Open finds
// nothing to do. Its cost is proportional to the open calls, not to the log.
func (b *Bolt) recoverOpenCalls() (int, error) {
	n := 0
	err := guard(func() error {
		return b.db.Update(func(tx *bolt.Tx) error {
			n = 0
			rt, err := rootsOf(tx)
			if err != nil {
				return err
			}
			var orphans []orphan
			err = rt.open.ForEach(func(k, _ []byte) error {
				id, seq, err := parseOpenKey(k)
				orphans = append(orphans, orphan{bytes.Clone(k), id, seq})
				return err
			})
			if err != nil || len(orphans) == 0 {
				return err
			}
			n, err = b.closeOrphans(rt, orphans)
			return err
		})
	})
	return n, err
}

// closeOrphans writes the synthetic results. orphans are in key order: grouped by
// session, in seq order.
func (b *Bolt) closeOrphans(rt roots, orphans []orphan) (int, error) {
	now := b.o.now()
	next := make(map[string]uint64)
	n := 0
	for _, o := range orphans {
		if err := rt.open.Delete(o.key); err != nil {
			return n, err
		}
		bkt := rt.sessions.Bucket([]byte(o.sessionID))
		var v []byte
		if bkt != nil {
			v = bkt.Get(seqKey(o.seq))
		}
		if v == nil {
			b.o.logger.Warn("dropped an open-call entry without its call",
				zap.String("session_id", o.sessionID), zap.Uint64("seq", o.seq))
			continue
		}
		call, err := decodeEvent(o.sessionID, o.seq, v)
		if err != nil {
			return n, err
		}
		if call.Call == nil {
			b.o.logger.Warn("dropped an open-call entry that is not a tool/call",
				zap.String("session_id", o.sessionID), zap.Uint64("seq", o.seq))
			continue
		}
		seq, ok := next[o.sessionID]
		if !ok {
			k, _ := bkt.Cursor().Last()
			last, err := parseSeqKey(k)
			if err != nil {
				return n, err
			}
			seq = last + 1
		}
		res := interruptedResult(&call)
		val := encodeEvent(nil, &res)
		stampTime(val, now)
		bkt.FillPercent = 1
		if err := bkt.Put(seqKey(seq), val); err != nil {
			return n, err
		}
		next[o.sessionID] = seq + 1
		n++
	}
	return n, nil
}
