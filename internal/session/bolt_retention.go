package session

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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
	skip := make(map[string]struct{})
	for {
		removed, err := w.sweepOnce(r.now, skip)
		var d *damagedSession
		if errors.As(err, &d) {
			if _, seen := skip[d.id]; !seen {
				w.b.keepDamaged([]byte(d.id), err)
				skip[d.id] = struct{}{}
				continue // its transaction rolled back: sweep again without it
			}
		}
		if err != nil {
			r.done <- response{err: err}
			return
		}
		w.forget(removed)
		for _, id := range removed {
			w.b.o.runThen(id, w.b.o.sweptThen(id))
		}
		r.done <- response{removed: len(removed)}
		return
	}
}

// sweepOnce deletes, in one transaction, the sessions the retention limits select as
// of now, but none in skip, and returns their ids. A panic inside bbolt as it reads or
// deletes one session fails it with a [*damagedSession] naming that session; the
// transaction rolls back, as bbolt's state after a panic in a write is unknown.
func (w *writer) sweepOnce(now time.Time, skip map[string]struct{}) ([]string, error) {
	var removed []string
	err := w.b.update(func(tx *bolt.Tx) error {
		removed = removed[:0]
		rt, err := rootsOf(tx)
		if err != nil {
			return err
		}
		victims, err := w.b.victims(tx, rt, now, skip)
		if err != nil {
			return err
		}
		for _, id := range victims {
			if err := perSession(id, func() error { return deleteSession(tx, rt, id) }); err != nil {
				return err
			}
			removed = append(removed, id)
		}
		return nil
	})
	return removed, err
}

// deleteSession deletes session id's events and owner record in tx. Retention's sweep
// and [Bolt.Delete] share it.
func deleteSession(tx *bolt.Tx, rt roots, id string) error {
	if err := rt.sessions.DeleteBucket([]byte(id)); err != nil && !errors.Is(err, berrors.ErrBucketNotFound) {
		return err
	}
	if owners := tx.Bucket(bucketOwners); owners != nil {
		return owners.Delete([]byte(id))
	}
	return nil
}

// forget drops the deleted sessions ids from the writer's state and ends their
// watches with ErrDeleted.
func (w *writer) forget(ids []string) {
	for _, id := range ids {
		delete(w.sessions, id)
		w.b.live.removeIf(id, func(*boltLive) bool { return true })
	}
}

// Delete implements [Store] through the writer, as a sweep of one session: in one
// transaction, between group commits.
func (b *Bolt) Delete(ctx context.Context, sessionID string, seen *Owner, then func()) (int, error) {
	if err := b.usable(); err != nil {
		return 0, err
	}
	if err := validateSessionID(sessionID); err != nil {
		return 0, err
	}
	resp := b.submit(ctx, &request{sessionID: sessionID, drop: true, seen: seen, then: then, done: make(chan response, 1)})
	return resp.removed, damageIn(b.path, sessionID, resp.err)
}

// drop deletes the session r names, unless it is in use (see [Bolt.deletable]).
func (w *writer) drop(r *request) {
	w.b.holds.beginSweep()
	defer w.b.holds.endSweep()
	events := 0
	err := w.b.update(func(tx *bolt.Tx) error {
		rt, err := rootsOf(tx)
		if err != nil {
			return err
		}
		if events, err = w.b.deletable(tx, rt, r.sessionID, r.seen); err != nil {
			return err
		}
		return perSession(r.sessionID, func() error { return deleteSession(tx, rt, r.sessionID) })
	})
	if err != nil {
		r.done <- response{err: err}
		return
	}
	w.forget([]string{r.sessionID})
	w.b.o.runThen(r.sessionID, r.then)
	r.done <- response{removed: events}
}

// deletable checks that session id may be deleted now, as [Bolt.victims] does for
// retention, dooms it ([holds.doom]) and returns how many events it has: it has events
// or an owner, its owner is seen (see [Store.Delete]), no call of it is open, and
// nothing holds it. A sweep must be running.
func (b *Bolt) deletable(tx *bolt.Tx, rt roots, id string, seen *Owner) (int, error) {
	bkt := rt.sessions.Bucket([]byte(id))
	now, err := ownerIn(tx, id)
	if err != nil {
		return 0, err
	}
	if bkt == nil && now == nil {
		return 0, notFound(id)
	}
	if err := checkOwner(now, seen); err != nil {
		return 0, err
	}
	if hasOpenCalls(rt, id) {
		return 0, fmt.Errorf("%w: a call of it has no result yet", ErrInUse)
	}
	if !b.holds.doom(id) {
		return 0, fmt.Errorf("%w: a batch is running in it", ErrInUse)
	}
	if bkt == nil {
		return 0, nil
	}
	k, _ := bkt.Cursor().Last()
	if k == nil {
		return 0, nil
	}
	last, err := parseSeqKey(k)
	return int(last), err
}

// damagedSession is a panic inside bbolt as the sweep read or deleted one session.
type damagedSession struct {
	id    string
	cause any
}

func (e *damagedSession) Error() string {
	return fmt.Sprintf("%v: session %q: %v", ErrCorrupt, e.id, e.cause)
}

func (e *damagedSession) Unwrap() error { return ErrCorrupt }

// perSession runs fn, the sweep's work on session id, and turns a panic inside it into
// a [*damagedSession].
func perSession(id string, fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &damagedSession{id: id, cause: r}
		}
	}()
	return fn()
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
// every other session; one whose read panics fails victims with a [*damagedSession].
// The sessions in skip are kept too.
func (b *Bolt) victims(tx *bolt.Tx, rt roots, now time.Time, skip map[string]struct{}) ([]string, error) {
	var all []sessionAge
	err := rt.sessions.ForEachBucket(func(k []byte) error {
		if _, ok := skip[string(k)]; ok {
			return nil
		}
		var last time.Time
		err := perSession(string(k), func() (err error) {
			last, err = lastAppend(rt.sessions.Bucket(k))
			return err
		})
		var d *damagedSession
		if errors.As(err, &d) {
			return err
		}
		if err != nil {
			b.keepDamaged(k, err)
			return nil
		}
		all = append(all, sessionAge{string(k), last})
		return nil
	})
	if owners := tx.Bucket(bucketOwners); owners != nil && err == nil {
		err = owners.ForEach(func(k, v []byte) error {
			if _, ok := skip[string(k)]; ok || rt.sessions.Bucket(k) != nil {
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

// keepDamaged logs that retention keeps the session id, which it could not read or
// delete.
func (b *Bolt) keepDamaged(id []byte, err error) {
	b.o.logger.Warn("retention keeps a damaged session", zap.String("session_id", string(id)), zap.Error(err))
}

func hasOpenCalls(rt roots, id string) bool {
	prefix := openPrefix(id)
	k, _ := rt.open.Cursor().Seek(prefix)
	return k != nil && bytes.HasPrefix(k, prefix)
}
