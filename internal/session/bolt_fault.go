package session

import (
	"fmt"

	bolt "go.etcd.io/bbolt"
	"go.uber.org/zap"
)

// usable fails when the store is closed or stopped by a failed commit.
func (b *Bolt) usable() error {
	if b.closed.Load() {
		return ErrClosed
	}
	if err := b.fault.Load(); err != nil {
		return *err
	}
	return nil
}

// update runs fn in a write transaction, unless a failed commit stopped the store.
//
// A commit that fails in bbolt itself (a failed write, fdatasync or growth of the file,
// after fn returned nil) stops the store: every later change fails with the error
// update returns, because the disk's contents after a failed write or fdatasync are
// unknown, and bbolt may already show the failed transaction's meta page through its
// mmap, so that a later transaction would build on pages that never reached the disk
// and be acknowledged. An error of fn's own rolls back only its transaction.
//
// Commits run one at a time under commitMu, so that none starts between a commit's
// failure and the fault being recorded, and readers that see a commit before it
// returned wait on it for its outcome (see [Bolt.view]).
func (b *Bolt) update(fn func(*bolt.Tx) error) error {
	b.commitMu.Lock()
	defer b.commitMu.Unlock()
	if err := b.usable(); err != nil {
		return err
	}
	applied := false
	var id int
	err := guard(func() error {
		return b.db.Update(func(tx *bolt.Tx) error {
			applied = false
			if err := fn(tx); err != nil {
				return err
			}
			if b.committing != nil {
				b.committing(tx)
			}
			applied, id = true, tx.ID()
			return nil
		})
	})
	if err != nil && applied {
		return b.stop(err)
	}
	if err == nil {
		b.returned.Store(uint64(id))
	}
	return err
}

// stop records the failed commit's error; every later change and read fails with it,
// and watches waiting for commits wake to read it. It runs under commitMu, once: every
// later update finds the fault first.
func (b *Bolt) stop(cause error) error {
	err := fmt.Errorf("%w: %w", ErrStopped, cause)
	b.fault.Store(&err)
	close(b.stopped)
	b.o.logger.Error("session store stopped; appends fail until toolsd restarts", zap.Error(cause))
	return err
}

var _ Stopper = (*Bolt)(nil)

// Stopped implements [Stopper].
func (b *Bolt) Stopped() <-chan struct{} { return b.stopped }

// StopCause implements [Stopper]: the failed commit's error, wrapping [ErrStopped]
// (nil while the store runs).
func (b *Bolt) StopCause() error {
	if err := b.fault.Load(); err != nil {
		return *err
	}
	return nil
}
