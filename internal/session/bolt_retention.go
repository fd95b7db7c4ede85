package session

import (
	"bytes"
	"context"
	"errors"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
	"go.uber.org/zap"
)

// Sweep applies the retention limits as of now and returns how many sessions it
// deleted. It runs on the writer, between group commits, so it never races an append.
// The background sweeper calls it; tests call it with an injected time.
func (b *Bolt) Sweep(now time.Time) (int, error) {
	if err := b.usable(); err != nil {
		return 0, err
	}
	if !b.o.retains() {
		return 0, nil
	}
	// Sweep is not on a request path: it waits for queue room until Close.
	resp := b.submit(context.Background(), &request{sweep: true, now: now, done: make(chan response, 1)})
	return resp.removed, resp.err
}

func (w *writer) sweep(r *request) {
	w.b.holds.beginSweep()
	defer w.b.holds.endSweep()
	var removed []string
	err := w.b.update(func(tx *bolt.Tx) error {
		removed = removed[:0]
		rt, err := rootsOf(tx)
		if err != nil {
			return err
		}
		victims, err := w.b.victims(tx, rt, r.now)
		if err != nil {
			return err
		}
		for _, id := range victims {
			if err := rt.sessions.DeleteBucket([]byte(id)); err != nil && !errors.Is(err, berrors.ErrBucketNotFound) {
				return err
			}
			if owners := tx.Bucket(bucketOwners); owners != nil {
				if err := owners.Delete([]byte(id)); err != nil {
					return err
				}
			}
			removed = append(removed, id)
		}
		return nil
	})
	if err != nil {
		r.done <- response{err: err}
		return
	}
	for _, id := range removed {
		delete(w.sessions, id)
		w.b.live.removeIf(id, func(*boltLive) bool { return true })
	}
	r.done <- response{removed: len(removed)}
}

// Hold implements [Store].
func (b *Bolt) Hold(ctx context.Context, sessionID string) (func(), error) {
	if b.closed.Load() {
		return nil, ErrClosed
	}
	return b.holds.hold(ctx, sessionID, b.quit)
}

// victims lists the sessions the retention limits delete as of now (see [pickVictims]),
// doomed ([holds.doom]); one held or with a call open is kept. A session is idle since
// its last append or, with no events, since its owner's claim. A session whose age
// cannot be read (a damaged record) is kept, so that it does not stop retention for
// every other session.
func (b *Bolt) victims(tx *bolt.Tx, rt roots, now time.Time) ([]string, error) {
	var all []sessionAge
	err := rt.sessions.ForEachBucket(func(k []byte) error {
		last, err := lastAppend(rt.sessions.Bucket(k))
		if err != nil {
			b.keepDamaged(k, err)
			return nil
		}
		all = append(all, sessionAge{string(k), last})
		return nil
	})
	if owners := tx.Bucket(bucketOwners); owners != nil && err == nil {
		err = owners.ForEach(func(k, v []byte) error {
			if rt.sessions.Bucket(k) != nil {
				return nil
			}
			_, claimed, err := parseOwnerValue(v)
			if err != nil {
				b.keepDamaged(k, err)
				return nil
			}
			if claimed.IsZero() { // an untimed claim: idle from this start on
				claimed = b.opened
			}
			all = append(all, sessionAge{string(k), claimed})
			return nil
		})
	}
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, s := range pickVictims(all, &b.o, now, func(id string) bool {
		return hasOpenCalls(rt, id) || !b.holds.doom(id)
	}) {
		ids = append(ids, s.id)
	}
	return ids, nil
}

// keepDamaged logs that retention keeps the session id, whose age it could not read.
func (b *Bolt) keepDamaged(id []byte, err error) {
	b.o.logger.Warn("retention keeps a session whose age cannot be read", zap.String("session_id", string(id)), zap.Error(err))
}

func hasOpenCalls(rt roots, id string) bool {
	prefix := openPrefix(id)
	k, _ := rt.open.Cursor().Seek(prefix)
	return k != nil && bytes.HasPrefix(k, prefix)
}
