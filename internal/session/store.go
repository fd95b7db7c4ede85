package session

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/toolsd/toolsd/internal/textcut"
)

// Store is a session log. All methods are safe for concurrent use.
type Store interface {
	// Append assigns dense seqs and one time to events (all for sessionID), stores them
	// atomically (all or nothing) and returns them. On return they are as durable as the
	// store's [Mode] promises. An event's SessionID, if set, must equal sessionID; its Seq
	// and Time are overwritten.
	Append(ctx context.Context, sessionID string, events ...Event) ([]Event, error)
	// Read returns up to limit events with Seq >= fromSeq, in seq order (limit <= 0 → a
	// page of [DefaultPageSize]), and fewer once they hold [PageBytes]: the page ends
	// with the event that takes it there, or past, but holds two events at least. [More]
	// tells such a page from the session's last one. An unknown session reads as empty.
	Read(ctx context.Context, sessionID string, fromSeq uint64, limit int) ([]Event, error)
	// Watch calls fn for every event with Seq >= fromSeq: first the stored ones, then live
	// ones as they are appended, in order, with no gap or duplicate, until ctx ends
	// (returns ctx.Err()), fn fails (returns its error), retention deletes the session
	// (ErrDeleted: a session appended to under the same id afterwards starts again at
	// seq 1) or the store closes (ErrClosed).
	Watch(ctx context.Context, sessionID string, fromSeq uint64, fn func(Event) error) error
	// Summary answers history questions for conditional tools.
	Summary(ctx context.Context, sessionID string) (Summary, error)
	// ClaimOwner records o as the session's owner unless one is recorded, and returns
	// the owner now recorded. The record is as durable as the store's [Mode] promises
	// and is removed with the session by retention.
	ClaimOwner(ctx context.Context, sessionID string, o Owner) (Owner, error)
	// Owner returns the session's recorded owner; ok is false when it has none.
	Owner(ctx context.Context, sessionID string) (o Owner, ok bool, err error)
	// Hold keeps retention from deleting the session until release is called (release
	// is idempotent); when a sweep is deleting the session right then, Hold waits for
	// the deletion to finish. A batch holds its session from before it claims the
	// session to after its last append: a session deleted in between, with its owner
	// record, would be recreated by the batch's next append with no owner (or under the
	// owner another identity claimed meanwhile), and results or contexts would cite
	// seqs of the deleted life. Holds are not durable (a restart ends every batch).
	Hold(ctx context.Context, sessionID string) (release func(), err error)
	// Delete removes the session now as retention does: its events and its owner
	// record, as durably as the store's [Mode] promises; its watches end with
	// ErrDeleted and the id is free again (its next append starts at seq 1). It
	// returns how many events it removed. A session that is held or has a call open
	// is kept (ErrInUse), as retention keeps it; one with neither events nor an owner
	// is ErrNotFound. seen is the session's owner as the caller saw it when it decided
	// the caller may delete it (nil: it had none): a session whose owner is now
	// another, as when the session was deleted and its id claimed again meanwhile, is
	// kept (ErrOwnerChanged). then, unless nil, runs once the session is deleted and
	// before a batch may hold its id again (even if ctx is done by then): what must
	// not outlive the session, such as tool sets that judged its history, ends there.
	// It may run on the store's writer; a panic in it is recovered, logged and reported
	// to a [PanicObserver], and the deletion stands.
	Delete(ctx context.Context, sessionID string, seen *Owner, then func()) (removed int, err error)
	// Close stops the store's goroutines and releases its resources. Appends still
	// waiting fail with ErrClosed.
	Close() error
}

// AttachWatcher is a [Store] whose watch says when it is attached: from then on a
// deletion of the session by retention ends it with ErrDeleted. Before, the watch may
// attach to the id's next session, which a reader that checked the session first (for
// its epoch, say) could not tell from the one it checked: it checks again in attached.
// A wrapper that embeds a store and replaces its Watch must replace WatchAttached too,
// or hide it: [WatchAttached] would go round its Watch.
type AttachWatcher interface {
	// WatchAttached is [Store.Watch], calling attached (if not nil) once the watch is
	// attached, before it sends or waits for any event; an error from attached ends
	// the watch with that error.
	WatchAttached(ctx context.Context, sessionID string, fromSeq uint64, attached func() error, fn func(Event) error) error
}

// WatchAttached watches st as [AttachWatcher.WatchAttached] does when st is one, and
// with [Store.Watch] when attached is nil; a store that is not cannot say when its
// watch attaches, and attached runs just before the watch begins.
func WatchAttached(ctx context.Context, st Store, sessionID string, fromSeq uint64, attached func() error, fn func(Event) error) error {
	if w, ok := st.(AttachWatcher); ok && attached != nil {
		return w.WatchAttached(ctx, sessionID, fromSeq, attached, fn)
	}
	if err := runAttached(attached); err != nil {
		return err
	}
	return st.Watch(ctx, sessionID, fromSeq, fn)
}

// runAttached runs attached, if set.
func runAttached(attached func() error) error {
	if attached == nil {
		return nil
	}
	return attached()
}

// Owner is the identity that owns a session: the first to execute a batch in it. The
// auth layer keeps it here so that ownership survives a restart.
type Owner struct {
	Identity string
	// Scope is the scope the session was claimed in, when ScopeKnown.
	Scope      string
	ScopeKnown bool
}

// runThen runs then, a [Store.Delete]'s then or the [WithSwept] hook for session id,
// unless nil, while the deleted session is still doomed. It is the caller's code run
// on the store's own goroutine (bbolt's and the journal's writer, memory's sweeper), so
// a panic in it is recovered ([options.recoverThen]): the deletion stands and the store
// serves on.
func (o *options) runThen(id string, then func()) {
	if then == nil {
		return
	}
	defer o.recoverThen(id)
	then()
}

// recoverThen logs a panic of a then run for session id, with its stack, and reports it
// to a [PanicObserver].
func (o *options) recoverThen(id string) {
	p := recover()
	if p == nil {
		return
	}
	o.logger.Error("session deletion callback panicked",
		zap.String("session_id", textcut.Ellipsis(id, textcut.MaxLoggedID)), zap.Any("panic", p), zap.Stack("stack"))
	if po, ok := o.observer.(PanicObserver); ok {
		po.Panicked()
	}
}

// checkOwner fails with ErrOwnerChanged unless the owner recorded now (nil: none) is
// seen, the one a caller of [Store.Delete] saw. Its message names neither owner: the
// caller was authorized for the one it saw, not for the one the id has now.
func checkOwner(now, seen *Owner) error {
	if (now == nil) != (seen == nil) || (now != nil && *now != *seen) {
		return fmt.Errorf("%w since the caller was authorized to delete it", ErrOwnerChanged)
	}
	return nil
}

// Summary is a snapshot of which tools a session called and which succeeded.
type Summary interface {
	// Called reports whether the session has a tool/call for name.
	Called(name string) bool
	// Succeeded reports whether the session has a tool/result with IsError false for a
	// call of name.
	Succeeded(name string) bool
}

// Observer receives store metrics; the server wires it to Prometheus. Methods must be
// fast and must not call back into the store.
type Observer interface {
	// AppendDone reports one successful Append of events events that took d.
	AppendDone(events int, d time.Duration)
	// SyncDone reports one group commit (write and, with SyncAlways, fsync) that took d.
	SyncDone(d time.Duration)
}

// JournalObserver is what a [Journal] also reports when its [Observer] implements it.
// Methods must be fast and must not call back into the store.
type JournalObserver interface {
	// JournalBytes reports the journal file's length after a commit, a rewrite or Open.
	JournalBytes(n int64)
	// JournalRewritten reports one finished rewrite of the file that took d.
	JournalRewritten(d time.Duration)
}

// PanicObserver is what a store also reports when its [Observer] implements it.
// Methods must be fast and must not call back into the store.
type PanicObserver interface {
	// Panicked counts a panic recovered in a callback the store ran: a [Store.Delete]'s
	// then or the [WithSwept] hook.
	Panicked()
}

// DefaultPageSize is the page [Store.Read] returns when limit <= 0.
const DefaultPageSize = 1000

// Readers that page through a log whose events may be megabytes each start with
// FirstPage events and size each next page with [NextPage], so that a page holds about
// PageBytes however large the session's events are.
const (
	FirstPage = 4
	PageBytes = 8 << 20
)

// pageDone reports whether a page of n events that hold size payload bytes is complete
// for limit (> 0): see [Store.Read]. Two events at least, so that a reader that reads
// its previous page's last event again (to check that the session is still the same)
// advances however large that event is.
func pageDone(n, size, limit int) bool {
	return n >= limit || (n >= 2 && size >= PageBytes)
}

// More reports whether page, which [Store.Read] returned for limit, may have stopped
// short of the session's last event: it is full, in events or in bytes. Reading on
// from after it then returns the rest, or nothing.
func More(page []Event, limit int) bool {
	if limit <= 0 {
		limit = DefaultPageSize
	}
	size := 0
	for i := range page {
		size += payloadSize(&page[i])
	}
	return pageDone(len(page), size, limit)
}

// NextPage sizes the page after one of n events that took size bytes: as many events
// of that average size as PageBytes holds, between 1 and most.
func NextPage(n, size, most int) int {
	if n == 0 || size <= 0 {
		return most
	}
	return max(1, min(most, PageBytes/max(1, size/n)))
}

// Stopper is a store that can stop after a failed write (see [ErrStopped]) in its own
// background work too (retention's deletes, the journal's rewrite), where no caller is
// told: Stopped is closed once the store stopped, and StopCause then says why.
type Stopper interface {
	Stopped() <-chan struct{}
	StopCause() error
}

// MaxSessionIDBytes bounds a session id (it is a database key).
const MaxSessionIDBytes = 1024

// Errors of this package; match them with errors.Is.
var (
	// ErrClosed: the store is closed.
	ErrClosed = errors.New("session: store closed")
	// ErrStopped: a failed write or commit stopped the durable store; changes fail until
	// toolsd restarts (the journal's reads go on; bbolt's fail too, see [Bolt.update]).
	ErrStopped = errors.New("session: the session store stopped after a failed write (restart toolsd)")
	// ErrDeleted: retention or [Store.Delete] deleted the watched session.
	ErrDeleted = errors.New("session: session deleted (by retention or DeleteSession)")
	// ErrNotFound: [Store.Delete] found no session of the id (no events, no owner).
	ErrNotFound = errors.New("session: no such session")
	// ErrInUse: [Store.Delete] kept a session that a batch holds or that has a call
	// without its result.
	ErrInUse = errors.New("session: the session is in use")
	// ErrOwnerChanged: [Store.Delete] kept a session whose owner is not the one its
	// caller saw.
	ErrOwnerChanged = errors.New("session: the session's owner changed")
	// ErrTooLarge: an event is over the configured size cap.
	ErrTooLarge = errors.New("session: event too large")
	// ErrCorrupt: the database file is damaged, truncated or not a session log.
	ErrCorrupt = errors.New("session: database corrupt")
	// ErrInvalid: the request is malformed (empty session id, an event of another
	// session, a payload that does not match its type).
	ErrInvalid = errors.New("session: invalid request")
)

// validate checks an Append request before anything is assigned or stored.
func validate(sessionID string, events []Event, maxBytes int) error {
	if err := validateSessionID(sessionID); err != nil {
		return err
	}
	for i := range events {
		ev := &events[i]
		if ev.SessionID != "" && ev.SessionID != sessionID {
			return fmt.Errorf("%w: event %d belongs to session %q", ErrInvalid, i, ev.SessionID)
		}
		if err := validateType(ev); err != nil {
			return fmt.Errorf("%w: event %d: %w", ErrInvalid, i, err)
		}
		if n := payloadSize(ev); n > maxBytes {
			return fmt.Errorf("%w: event %d has %d bytes, limit %d", ErrTooLarge, i, n, maxBytes)
		}
	}
	return nil
}

// damageIn names the store's file and session id in err when it is damage found in
// the session's records ([ErrCorrupt]), which names the record: the line toolsd logs
// for it must say where to look. A store that damage stopped ([ErrStopped]) logged it
// when it stopped.
func damageIn(file, id string, err error) error {
	if err == nil || !errors.Is(err, ErrCorrupt) || errors.Is(err, ErrStopped) {
		return err
	}
	return fmt.Errorf("%w (file %s, session %q)", err, file, textcut.Ellipsis(id, textcut.MaxLoggedID))
}

// notFound is [ErrNotFound] for session id, quoted cut to [textcut.MaxLoggedID] as
// other refusals quote a client's ids: it reaches the caller's status, and only the
// request's size bounds the id.
func notFound(id string) error {
	return fmt.Errorf("%w: %q", ErrNotFound, textcut.Ellipsis(id, textcut.MaxLoggedID))
}

func validateSessionID(id string) error {
	if id == "" || len(id) > MaxSessionIDBytes {
		return fmt.Errorf("%w: session id must have 1 to %d bytes", ErrInvalid, MaxSessionIDBytes)
	}
	return nil
}

func validateType(ev *Event) error {
	switch {
	case ev.Type == "":
		return errors.New("type is empty")
	case ev.Type == TypeToolCall && ev.Call == nil:
		return errors.New("tool/call without a call record")
	case ev.Type == TypeToolResult && ev.Result == nil:
		return errors.New("tool/result without a result record")
	case ev.Type == TypeUserMessage && ev.Message == nil:
		return errors.New("user/message without a message record")
	}
	return nil
}
