package session

import (
	"errors"
	"sync"
	"testing"

	bolt "go.etcd.io/bbolt"
	"go.uber.org/zap"
)

// A read is served only what a commit that returned wrote. bbolt shows a commit through
// its mmap once it has written the meta page, before the fdatasync that makes the commit
// durable; that fdatasync may fail and stop the store, and a reader must not have been
// served the failed append's events meanwhile. bbolt has no hook between the two: a
// panic in an OnCommit handler, which runs after the meta page is written and before
// the commit returns, fails the commit at the same point for update.
func TestBoltReadWaitsForTheCommitToReturn(t *testing.T) {
	b, err := Open(t.TempDir(), WithLogger(zap.NewNop()))
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore(t, b)
	ctx := t.Context()
	if _, err := b.Append(ctx, "s", msg("kept")); err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	b.committing = func(tx *bolt.Tx) {
		once.Do(func() {
			tx.OnCommit(func() {
				close(entered)
				<-release
				panic("the meta page's fdatasync failed")
			})
		})
	}
	appended := make(chan error, 1)
	go func() {
		_, err := b.Append(ctx, "s", msg("lost"))
		appended <- err
	}()
	<-entered
	type result struct {
		evs []Event
		err error
	}
	began := b.db.Stats().TxN
	read := make(chan result, 1)
	go func() {
		evs, err := b.Read(ctx, "s", 1, 0)
		read <- result{evs, err}
	}()
	waitFor(t, "the read to begin its transaction", func() bool { return b.db.Stats().TxN > began })
	close(release)
	if err := <-appended; !errors.Is(err, ErrStopped) {
		t.Fatalf("Append() whose commit failed = %v, want ErrStopped", err)
	}
	r := <-read
	for _, ev := range r.evs {
		if ev.Message.Content == "lost" {
			t.Errorf("Read() during the failing commit = %d events with the failed append's, %v; want ErrStopped", len(r.evs), r.err)
		}
	}
	if !errors.Is(r.err, ErrStopped) {
		t.Errorf("Read() during the failing commit = %v, want ErrStopped", r.err)
	}
}
