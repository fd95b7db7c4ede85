package session

import (
	"bytes"
	"context"
	"errors"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
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
			if hasOpenCalls(rt, id) || !w.b.holds.doom(id) {
				continue
			}
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

// victims lists the sessions past the age limit, then the oldest beyond the count limit.
// A session is idle since its last append or, with no events, since its owner's claim.
func (b *Bolt) victims(tx *bolt.Tx, rt roots, now time.Time) ([]string, error) {
	var expired, kept []sessionAge
	cutoff := now.Add(-b.o.maxAge)
	add := func(id string, idle time.Time) {
		if b.o.maxAge > 0 && idle.Before(cutoff) {
			expired = append(expired, sessionAge{id, idle})
		} else {
			kept = append(kept, sessionAge{id, idle})
		}
	}
	err := rt.sessions.ForEachBucket(func(k []byte) error {
		last, err := lastAppend(rt.sessions.Bucket(k))
		add(string(k), last)
		return err
	})
	if owners := tx.Bucket(bucketOwners); owners != nil && err == nil {
		err = owners.ForEach(func(k, v []byte) error {
			if rt.sessions.Bucket(k) != nil {
				return nil
			}
			_, claimed, err := parseOwnerValue(v)
			if claimed.IsZero() { // an untimed claim: idle from this start on
				claimed = b.opened
			}
			add(string(k), claimed)
			return err
		})
	}
	ids := make([]string, 0, len(expired))
	for _, s := range append(expired, overflow(kept, b.o.maxSessions)...) {
		ids = append(ids, s.id)
	}
	return ids, err
}

func hasOpenCalls(rt roots, id string) bool {
	prefix := openPrefix(id)
	k, _ := rt.open.Cursor().Seek(prefix)
	return k != nil && bytes.HasPrefix(k, prefix)
}
