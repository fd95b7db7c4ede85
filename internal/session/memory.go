package session

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Memory is an in-process [Store] for tests and --ephemeral runs: nothing survives the
// process. Sessions are sharded, so concurrent appends to different sessions rarely
// share a lock.
type Memory struct {
	o         options
	sessions  *shardMap[memSession, *memSession]
	closed    atomic.Bool
	done      chan struct{}
	closeOnce sync.Once
	sweeper   *sweeper
	holds     holds
	// stopped, closed when the durable store holding this state stops after a failed
	// write, ends watches with stopErr once they have sent what was committed (nil for
	// a Memory store of its own, which never stops).
	stopped <-chan struct{}
	stopErr func() error
}

var (
	_ Store         = (*Memory)(nil)
	_ AttachWatcher = (*Memory)(nil)
)

// memSession is one session's log. Stored events are never modified, so a reader may
// keep a slice of them after unlocking.
type memSession struct {
	live
	events eventLog
	calls  calls
	last   time.Time
	owner  *Owner
	// claimed is when the owner was claimed: a session with no events is idle since.
	claimed time.Time
	// bytes is the size of the session's journal records (the Journal's writer only).
	bytes int64
	// disk is where the Journal wrote the session's events: what a cold log is read
	// back from. Guarded by mu.
	disk diskLog
	// watchers counts the Watch calls following the session (they keep it hot).
	watchers int
}

func (s *memSession) base() *live { return &s.live }

// idleSince is when the session was last appended to or, with no events, claimed; ok
// is false for an entry that holds neither (a watch of an unknown session). s.mu must
// be held.
func (s *memSession) idleSince() (t time.Time, ok bool) {
	switch {
	case s.events.n > 0:
		return s.last, true
	case s.owner != nil:
		return s.claimed, true
	}
	return time.Time{}, false
}

func (s *memSession) callName(seq uint64) string {
	if seq == 0 || seq > uint64(s.events.n) {
		return ""
	}
	ev, err := s.eventAt(seq)
	if err != nil || ev.Call == nil {
		return ""
	}
	if s.events.cold { // the summary keeps it: do not keep the decoded event with it
		return strings.Clone(ev.Call.Name)
	}
	return ev.Call.Name
}

// eventAt returns event seq (1..n), reading it back from the journal when the log is
// cold. s.mu must be held.
func (s *memSession) eventAt(seq uint64) (Event, error) {
	if s.events.cold {
		return s.disk.event(seq)
	}
	return *s.events.at(int(seq - 1)), nil
}

// warmHook runs as a cold log starts being read back, without the session's lock
// (tests block it there).
var warmHook = func() {}

// warm reads a cold log back from the journal. s.mu must be held; it is released while
// the file is read, and held again when warm returns. The journal's writer takes the
// lock to apply each commit to the session: held for the whole session's read, it
// would stop the writer, and every other session's appends, until the read ended.
// What was appended meanwhile is read after, under the lock; a rewrite of the file
// meanwhile (which moves every record, and closes the file read) starts it over. A
// session deleted meanwhile fails with ErrDeleted.
func (s *memSession) warm() error {
	for s.events.cold {
		n := len(s.disk.locs)
		d := diskLog{file: s.disk.file, locs: s.disk.locs[:n:n]}
		count := s.events.n
		s.mu.Unlock()
		warmHook()
		l, err := d.load(count)
		s.mu.Lock()
		switch {
		case s.gone:
			return ErrDeleted
		case !s.events.cold: // another watch read it back meanwhile
			return nil
		case s.disk.file != d.file: // rewritten meanwhile
			continue
		case err != nil:
			return err
		}
		rest := diskLog{file: s.disk.file, locs: s.disk.locs[n:]}
		for _, loc := range rest.locs {
			err := rest.read(loc, loc.first, func(ev Event) bool {
				l.append(ev)
				return true
			})
			if err != nil {
				return err
			}
		}
		if l.n != s.events.n {
			return fmt.Errorf("%w: the journal holds %d events of a session that has %d", ErrCorrupt, l.n, s.events.n)
		}
		s.events = l
	}
	return nil
}

// NewMemory returns an empty in-memory store. It starts a retention sweeper when
// [WithRetention] is set; Close stops it.
func NewMemory(opts ...Option) *Memory {
	m := &Memory{
		o:        applyOptions(opts),
		sessions: newShardMap[memSession](),
		done:     make(chan struct{}),
	}
	m.sweeper = startSweeper(&m.o, m.Sweep)
	return m
}

// Append implements [Store]. ctx is not consulted: an in-memory append never waits.
func (m *Memory) Append(_ context.Context, sessionID string, events ...Event) ([]Event, error) {
	start := time.Now()
	if m.closed.Load() {
		return nil, ErrClosed
	}
	if len(events) == 0 {
		return nil, nil
	}
	if err := validate(sessionID, events, m.o.maxEventBytes); err != nil {
		return nil, err
	}
	out := cloneAll(events)
	s := m.lockSession(sessionID)
	now := m.o.now()
	for i := range out {
		out[i].SessionID, out[i].Seq, out[i].Time = sessionID, uint64(s.events.n+i)+1, now
	}
	s.add(out)
	s.mu.Unlock()
	m.o.observer.AppendDone(len(out), time.Since(start))
	return out, nil
}

// add stores events whose SessionID, Seq (the next ones) and Time are assigned, updates
// the session's open calls and summary and wakes its watchers. s.mu must be held.
func (s *memSession) add(events []Event) {
	var names toolNames
	for i := range events {
		ev := &events[i]
		s.events.append(*ev)
		names.add(s.calls.apply(ev, s), s.sum)
	}
	if !names.empty() {
		s.sum = s.summary().with(names)
	}
	s.last = events[len(events)-1].Time
	s.broadcast()
}

// lockSession returns the session's entry, created if needed, with its lock held.
func (m *Memory) lockSession(id string) *memSession {
	for {
		s := m.sessions.getOrCreate(id)
		s.mu.Lock()
		if !s.gone {
			return s
		}
		s.mu.Unlock() // swept or released meanwhile: look it up again
	}
}

func (s *memSession) summary() *toolSummary {
	if s.sum == nil {
		return emptySummary
	}
	return s.sum
}

// Read implements [Store]. A cold session's page is read from the journal file
// without bringing the whole session back into memory.
func (m *Memory) Read(_ context.Context, sessionID string, fromSeq uint64, limit int) ([]Event, error) {
	if m.closed.Load() {
		return nil, ErrClosed
	}
	s := m.sessions.get(sessionID)
	if s == nil {
		return nil, nil
	}
	return m.read(s, fromSeq, limit)
}

// read pages the events of s, which was looked up without its lock.
func (m *Memory) read(s *memSession, fromSeq uint64, limit int) ([]Event, error) {
	s.mu.Lock()
	if s.gone { // deleted meanwhile; its file may be gone too
		s.mu.Unlock()
		return nil, nil
	}
	if s.events.cold {
		defer s.mu.Unlock()
		evs, err := s.disk.page(fromSeq, limit, s.events.n)
		return evs, m.closedOr(err)
	}
	v := s.events.view()
	s.mu.Unlock()
	return v.page(fromSeq, limit), nil
}

// closedOr is err, or ErrClosed when the store closed under it (a file read that Close
// overtook).
func (m *Memory) closedOr(err error) error {
	if err != nil && m.closed.Load() {
		return ErrClosed
	}
	return err
}

// Watch implements [Store].
func (m *Memory) Watch(ctx context.Context, sessionID string, fromSeq uint64, fn func(Event) error) error {
	return m.WatchAttached(ctx, sessionID, fromSeq, nil, fn)
}

// WatchAttached implements [AttachWatcher]: the watch is attached once it holds the
// session's entry, which only retention's deletion removes (setting gone).
func (m *Memory) WatchAttached(ctx context.Context, sessionID string, fromSeq uint64, attached func() error, fn func(Event) error) error {
	if m.closed.Load() {
		return ErrClosed
	}
	s := m.sessions.acquire(sessionID)
	err := runAttached(attached)
	if err == nil {
		err = m.watch(ctx, s, max(fromSeq, 1), fn)
	}
	m.sessions.release(sessionID, s, func(s *memSession) bool { return s.events.n == 0 && s.owner == nil })
	return err
}

func (m *Memory) watch(ctx context.Context, s *memSession, next uint64, fn func(Event) error) error {
	s.mu.Lock()
	s.watchers++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.watchers--
		// A journal that keeps no session hot (hot_for 0) evicts after each append
		// that no watch holds, and runs no periodic eviction: a session the watch
		// loaded is made cold again here, or it would stay in memory until its next
		// append.
		if s.watchers == 0 && m.o.hotFor < 0 && !s.events.cold && s.events.n > 0 && len(s.disk.locs) > 0 {
			s.events.evict()
		}
		s.mu.Unlock()
	}()
	stopping := false
	for {
		s.mu.Lock()
		if s.gone { // a watcher's pin keeps the entry: only retention removes it
			s.mu.Unlock()
			return ErrDeleted
		}
		if err := s.warm(); err != nil {
			s.mu.Unlock()
			return m.closedOr(err)
		}
		evs := s.events.view()
		var wake <-chan struct{}
		if uint64(evs.len()) < next {
			wake = s.wait()
		}
		s.mu.Unlock()
		if wake != nil && stopping {
			return m.stopErr()
		}
		if wake == nil {
			for i := int(next - 1); i < evs.len(); i++ {
				if err := ctx.Err(); err != nil {
					return err
				}
				if err := fn(*evs.at(i)); err != nil {
					return err
				}
				next++
			}
			continue
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		case <-m.done:
			return ErrClosed
		case <-m.stopped:
			stopping = true // no commit will wake this watch again
		}
	}
}

// Summary implements [Store].
func (m *Memory) Summary(_ context.Context, sessionID string) (Summary, error) {
	if m.closed.Load() {
		return nil, ErrClosed
	}
	s := m.sessions.get(sessionID)
	if s == nil {
		return emptySummary, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.summary(), nil
}

// ClaimOwner implements [Store].
func (m *Memory) ClaimOwner(_ context.Context, sessionID string, o Owner) (Owner, error) {
	if m.closed.Load() {
		return Owner{}, ErrClosed
	}
	if err := validateSessionID(sessionID); err != nil {
		return Owner{}, err
	}
	s := m.lockSession(sessionID)
	defer s.mu.Unlock()
	if s.owner == nil {
		s.owner, s.claimed = &o, m.o.now()
	}
	return *s.owner, nil
}

// Owner implements [Store].
func (m *Memory) Owner(_ context.Context, sessionID string) (Owner, bool, error) {
	if m.closed.Load() {
		return Owner{}, false, ErrClosed
	}
	s := m.sessions.get(sessionID)
	if s == nil {
		return Owner{}, false, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.owner == nil {
		return Owner{}, false, nil
	}
	return *s.owner, true, nil
}

// Hold implements [Store].
func (m *Memory) Hold(ctx context.Context, sessionID string) (func(), error) {
	if m.closed.Load() {
		return nil, ErrClosed
	}
	return m.holds.hold(ctx, sessionID, m.done)
}

// Sweep applies the retention limits as of now and returns how many sessions it
// deleted. The background sweeper calls it; tests call it with an injected time.
func (m *Memory) Sweep(now time.Time) (int, error) {
	if m.closed.Load() {
		return 0, ErrClosed
	}
	m.holds.beginSweep()
	defer m.holds.endSweep()
	removed := 0
	for _, c := range m.victims(now) {
		if _, ok := m.remove(c.id, c.last.Equal); ok {
			m.o.runThen(c.id, m.o.sweptThen(c.id))
			removed++
		}
	}
	return removed, nil
}

// Delete implements [Store]. It runs as a sweep of one session does, so a batch's Hold
// waits for it to finish, and it never deletes a session a batch holds.
func (m *Memory) Delete(_ context.Context, sessionID string, seen *Owner, then func()) (int, error) {
	if m.closed.Load() {
		return 0, ErrClosed
	}
	if err := validateSessionID(sessionID); err != nil {
		return 0, err
	}
	m.holds.beginSweep()
	defer m.holds.endSweep()
	if err := m.doomOne(sessionID, seen); err != nil {
		return 0, err
	}
	n, ok := m.remove(sessionID, func(time.Time) bool { return true })
	if !ok {
		return 0, fmt.Errorf("%w: a call of it opened as it was deleted", ErrInUse)
	}
	m.o.runThen(sessionID, then)
	return n, nil
}

// doomOne checks that session id may be deleted now, as [Memory.victims] does for
// retention, and dooms it ([holds.doom]): it has events or an owner, its owner is
// seen (see [Store.Delete]), no call of it is open, and nothing holds it. A sweep must
// be running ([holds.beginSweep]); a batch claims its session only once it holds it,
// so the owner stays seen until the session is removed.
func (m *Memory) doomOne(id string, seen *Owner) error {
	s := m.sessions.get(id)
	if s == nil {
		return notFound(id)
	}
	s.mu.Lock()
	_, exists := s.idleSince()
	open := len(s.calls.open)
	changed := checkOwner(s.owner, seen)
	s.mu.Unlock()
	switch {
	case !exists:
		return notFound(id)
	case changed != nil:
		return changed
	case open > 0:
		return fmt.Errorf("%w: %d of its calls have no result yet", ErrInUse, open)
	case !m.holds.doom(id):
		return fmt.Errorf("%w: a batch is running in it", ErrInUse)
	}
	return nil
}

// remove drops session id, with its owner, unless a call of it is open or since
// reports false for the time it has been idle since (an append came after it was
// chosen), and wakes its watchers to end with ErrDeleted. It returns how many events
// the session had. Retention's sweep and [Memory.Delete] share it.
func (m *Memory) remove(id string, since func(time.Time) bool) (events int, ok bool) {
	ok = m.sessions.removeIf(id, func(s *memSession) bool {
		idle, ok := s.idleSince()
		events = s.events.n
		return ok && since(idle) && len(s.calls.open) == 0
	})
	return events, ok
}

// victims returns the sessions the retention limits delete as of now (see
// [pickVictims]), each aged by [memSession.idleSince] and doomed ([holds.doom]); one
// held or with a call open is kept. Sweep checks again as it removes each, since an
// append may come in between.
func (m *Memory) victims(now time.Time) []sessionAge {
	var all []sessionAge
	m.sessions.each(func(id string, s *memSession) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if idle, ok := s.idleSince(); ok {
			all = append(all, sessionAge{id, idle})
		}
	})
	return pickVictims(all, &m.o, now, func(id string) bool {
		if s := m.sessions.get(id); s != nil {
			s.mu.Lock()
			open := len(s.calls.open) > 0
			s.mu.Unlock()
			if open {
				return true
			}
		}
		return !m.holds.doom(id)
	})
}

// Close implements [Store]: later calls fail with ErrClosed and watchers return it.
func (m *Memory) Close() error {
	m.closeOnce.Do(func() {
		m.closed.Store(true)
		close(m.done)
		m.sweeper.close()
	})
	return nil
}
