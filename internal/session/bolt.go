package session

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
	"go.uber.org/zap"
)

// Bolt is the durable [Store]: one bbolt file, one group-committing writer goroutine.
//
// Why bbolt: the log is append-heavy with small values and per-session range reads,
// which maps directly onto one bucket per session keyed by big-endian seq. bbolt is a
// single-file copy-on-write B+tree in pure Go with ACID transactions whose durability
// cost is fixed per commit (the dirty pages, then the meta page, each fdatasynced), so
// grouping appends into one transaction shares that cost; there is no write-ahead log,
// compaction or cache to tune and nothing to recover but the file itself. Pebble (an
// LSM) would buy write throughput this workload does not need at the price of
// background compactions, many files and more knobs; SQLite needs cgo or a transpiled
// driver and a SQL layer for what is a key-range scan.
type Bolt struct {
	o    options
	db   *bolt.DB
	path string // db's file, named in damage ([damageIn]); bbolt's Path races with Close
	live *shardMap[boltLive, *boltLive]

	queue      chan *request
	quit       chan struct{} // closed by Close
	stopped    chan struct{} // closed when a failed commit stops the store (see stop)
	writerDone chan struct{} // closed when the writer has exited
	closed     atomic.Bool
	closeOnce  sync.Once
	closeErr   error
	sweeper    *sweeper
	holds      holds
	recovered  int
	// opened is when Open began: the claim time of owners recorded without one.
	opened time.Time
	// commitMu orders the write transactions (see update); fault is the failed
	// commit's error that stopped the store; returned is the id of the last
	// transaction whose commit returned, what readers may see (see view).
	commitMu sync.Mutex
	fault    atomic.Pointer[error]
	returned atomic.Uint64
	// scan loads a session's summary from the log (a seam for tests).
	scan func(sessionID string) (*toolSummary, bool, error)
	// summaryCap bounds the summaries kept in live ([maxCachedSummaries]).
	summaryCap int
	// committing, a test seam, runs in every write transaction update commits, after
	// its work.
	committing func(*bolt.Tx)
}

var (
	_ Store         = (*Bolt)(nil)
	_ AttachWatcher = (*Bolt)(nil)
)

// boltLive is the in-memory state of a session that is watched or summarized.
type boltLive struct {
	live
	// loading counts Summary calls scanning the log; while any does, committed names are
	// kept in pending so that the scan's result misses none.
	loading int
	pending toolNames
}

func (l *boltLive) base() *live { return &l.live }

func (l *boltLive) idle() bool { return l.sum == nil && l.loading == 0 }

// maxCachedSummaries bounds the sessions whose summary Bolt keeps in memory. A summary
// is kept once loaded, so that the next steps' tool sets do not scan the session again;
// past the bound, unheld ones are dropped and scanned again when next asked for.
const maxCachedSummaries = 1 << 16

// Open opens (creating if needed) the session log in dir, closes every call a previous
// run left open with a synthetic ABORTED result, and starts the writer and, with
// [WithRetention], the sweeper. A damaged file fails with [ErrCorrupt].
func Open(dir string, opts ...Option) (*Bolt, error) {
	o := applyOptions(opts)
	if err := makeDataDir(dir); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, FileName)
	_, statErr := os.Stat(path)
	created := errors.Is(statErr, os.ErrNotExist)
	if created {
		if _, err := os.Stat(filepath.Join(dir, JournalFileName)); err == nil {
			return nil, fmt.Errorf("session: %s holds a session journal (%s) and no bbolt log; set session.store: journal to keep using it",
				dir, JournalFileName)
		}
		if err := createDB(dir, path, &o); err != nil {
			return nil, err
		}
	}
	if err := checkFile(path); err != nil {
		return nil, err
	}
	db, err := openDB(path, &o)
	if err != nil {
		return nil, err
	}
	removeCreateLeftovers(dir) // under the lock; a create racing this one finds sessions.db and opens it
	b := &Bolt{
		o:          o,
		db:         db,
		path:       path,
		live:       newShardMap[boltLive](),
		queue:      make(chan *request, o.queueSize),
		quit:       make(chan struct{}),
		stopped:    make(chan struct{}),
		writerDone: make(chan struct{}),
		opened:     o.now(),
		summaryCap: maxCachedSummaries,
	}
	b.scan = b.scanSummary
	if err := guard(func() error { return db.Update(initLayout) }); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("session: open %s: %w", path, err)
	}
	// bbolt syncs the file, not the directory entry that names it; a run that created
	// the file and crashed before syncing the directory left a name that may not
	// survive a power loss, so the directory is synced at every open.
	if err := syncDir(dir); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("session: open %s: %w", path, err)
	}
	if b.recovered, err = b.recoverOpenCalls(); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("session: open %s: recover interrupted calls: %w", path, err)
	}
	if b.recovered > 0 {
		o.logger.Warn("closed calls interrupted by a restart with synthetic ABORTED results", zap.Int("calls", b.recovered))
	}
	if err := guard(func() error { return db.View(b.noteReturned) }); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("session: open %s: %w", path, err)
	}
	w := newWriter(b)
	go w.run()
	b.sweeper = startSweeper(&b.o, b.Sweep)
	return b, nil
}

// createSuffix starts the names of logs being created (see createDB).
const createSuffix = ".new-"

// createDB creates the log at path whole or not at all. bbolt writes a new file's first
// pages after creating it, so a crash in between would leave an empty or partial file,
// which Open refuses as truncated: the log is built under a temporary name, synced, and
// linked into place. A log another toolsd created meanwhile is kept. Where the
// filesystem refuses hard links, nothing is created here and Open lets bbolt create the
// log in place.
func createDB(dir, path string, o *options) error {
	tmp, err := os.CreateTemp(dir, FileName+createSuffix+"*")
	if err != nil {
		return fmt.Errorf("session: create %s: %w", path, err)
	}
	name := tmp.Name()
	_ = tmp.Close()
	defer os.Remove(name) //nolint:errcheck // gone after the link, or a leftover
	db, err := openDB(name, o)
	if err != nil {
		return err
	}
	err = guard(func() error { return db.Update(initLayout) })
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = syncFile(name)
	}
	if err == nil {
		if err = linkFile(name, path); err != nil {
			_, serr := os.Stat(path)
			switch {
			case serr == nil:
				err = nil // created by another toolsd meanwhile: its Open holds or held the lock
			case linksUnsupported(err) && errors.Is(serr, os.ErrNotExist):
				// A filesystem without hard links (SMB/CIFS, vfat, some FUSE): bbolt
				// creates the log in place, as Open did before it was linked, with the
				// crash window that leaves on such a filesystem alone. A rename could
				// replace a log another toolsd has just created and opened.
				return nil
			}
		}
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		return fmt.Errorf("session: create %s: %w", path, err)
	}
	return nil
}

// linksUnsupported reports whether err, from link(2), says the filesystem makes no hard
// links (EPERM on vfat and CIFS, EOPNOTSUPP or ENOSYS on others).
func linksUnsupported(err error) bool {
	return errors.Is(err, os.ErrPermission) || errors.Is(err, errors.ErrUnsupported)
}

func syncFile(name string) error {
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// removeCreateLeftovers removes the logs a crash left half-created (see createDB).
func removeCreateLeftovers(dir string) {
	leftovers, _ := filepath.Glob(filepath.Join(dir, FileName+createSuffix+"*"))
	for _, f := range leftovers {
		_ = os.Remove(f)
	}
}

// linkFile links a new log into place (a seam for tests).
var linkFile = os.Link

// openFile opens the database file for bbolt (a seam for tests).
var openFile = os.OpenFile

func openDB(path string, o *options) (*bolt.DB, error) {
	var (
		db   *bolt.DB
		file *os.File
	)
	err := guard(func() error {
		var err error
		db, err = bolt.Open(path, 0o600, &bolt.Options{
			Timeout: o.lockTimeout,
			NoSync:  o.durability == SyncNone,
			// The freelist is synced on every commit (one more page per commit) rather than
			// rebuilt at open: bbolt rebuilds it on a goroutine of its own, where a damaged
			// page is a panic that nothing can recover.
			NoFreelistSync: false,
			FreelistType:   bolt.FreelistMapType,
			OpenFile: func(name string, flag int, perm os.FileMode) (*os.File, error) {
				f, err := openFile(name, flag, perm)
				file = f
				return f, err
			},
		})
		return err
	})
	if err != nil && db == nil && file != nil && errors.Is(err, ErrCorrupt) {
		_ = file.Close() // bbolt panicked inside Open: release the file and its lock
	}
	switch {
	case err == nil:
		return db, nil
	case errors.Is(err, berrors.ErrTimeout):
		return nil, fmt.Errorf("session: %s is locked by another process (is another toolsd running?): %w", path, err)
	case errors.Is(err, ErrCorrupt):
		return nil, fmt.Errorf("session: open %s: %w", path, err)
	case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrChecksum),
		errors.Is(err, berrors.ErrVersionMismatch), errors.Is(err, berrors.ErrInvalidMapping):
		return nil, fmt.Errorf("%w: open %s: %w", ErrCorrupt, path, err)
	default:
		return nil, fmt.Errorf("session: open %s: %w", path, err)
	}
}

// Recovered returns how many interrupted calls Open closed with a synthetic result.
func (b *Bolt) Recovered() int { return b.recovered }

// Read implements [Store].
func (b *Bolt) Read(_ context.Context, sessionID string, fromSeq uint64, limit int) ([]Event, error) {
	if b.closed.Load() {
		return nil, ErrClosed
	}
	if limit <= 0 {
		limit = DefaultPageSize
	}
	var out []Event
	err := b.view(func(tx *bolt.Tx) error {
		bkt := sessionBucket(tx, sessionID)
		if bkt == nil {
			return nil
		}
		c := bkt.Cursor()
		size := 0
		for k, v := c.Seek(seqKey(max(fromSeq, 1))); k != nil && !pageDone(len(out), size, limit); k, v = c.Next() {
			seq, err := parseSeqKey(k)
			if err != nil {
				return err
			}
			ev, err := decodeEvent(sessionID, seq, v)
			if err != nil {
				return err
			}
			out = append(out, ev)
			size += payloadSize(&out[len(out)-1])
		}
		return nil
	})
	return out, damageIn(b.path, sessionID, err)
}

// ClaimOwner implements [Store]. Every batch claims its session when auth is on, and
// almost every claim finds its owner recorded: that is a read transaction. Recording a
// new owner is rare (once per session), so it commits on its own rather than through the
// append writer.
func (b *Bolt) ClaimOwner(ctx context.Context, sessionID string, o Owner) (Owner, error) {
	if err := b.usable(); err != nil {
		return Owner{}, err
	}
	if err := validateSessionID(sessionID); err != nil {
		return Owner{}, err
	}
	if got, ok, err := b.Owner(ctx, sessionID); err != nil || ok {
		return got, err
	}
	cur := o
	err := b.update(func(tx *bolt.Tx) error {
		owners := tx.Bucket(bucketOwners)
		if owners == nil {
			return fmt.Errorf("%w: a top-level bucket is missing", ErrCorrupt)
		}
		if v := owners.Get([]byte(sessionID)); v != nil {
			var err error
			cur, _, err = parseOwnerValue(v)
			return err
		}
		return owners.Put([]byte(sessionID), ownerValue(o, b.o.now()))
	})
	switch {
	case errors.Is(err, berrors.ErrDatabaseNotOpen), errors.Is(err, ErrClosed):
		return Owner{}, ErrClosed
	case errors.Is(err, ErrStopped):
		return Owner{}, err
	case err != nil:
		return Owner{}, fmt.Errorf("session: claim owner: %w", damageIn(b.path, sessionID, err))
	}
	return cur, nil
}

// Owner implements [Store].
func (b *Bolt) Owner(_ context.Context, sessionID string) (Owner, bool, error) {
	if b.closed.Load() {
		return Owner{}, false, ErrClosed
	}
	var (
		o  Owner
		ok bool
	)
	err := b.view(func(tx *bolt.Tx) error {
		p, err := ownerIn(tx, sessionID)
		if p != nil {
			o, ok = *p, true
		}
		return err
	})
	if err != nil {
		return Owner{}, false, damageIn(b.path, sessionID, err)
	}
	return o, ok, nil
}

// ownerIn is session id's owner record in tx, nil when it has none.
func ownerIn(tx *bolt.Tx, id string) (*Owner, error) {
	owners := tx.Bucket(bucketOwners)
	if owners == nil {
		return nil, nil
	}
	v := owners.Get([]byte(id))
	if v == nil {
		return nil, nil
	}
	o, _, err := parseOwnerValue(v)
	if err != nil {
		return nil, err
	}
	return &o, nil
}

// view runs a read transaction, mapping a closed database to [ErrClosed]. A store that
// a failed commit stopped reads nothing more either (see [Bolt.update]): bbolt may
// already show the failed transaction through its mmap when only the meta page's
// fdatasync failed, and its events, never acknowledged and perhaps not on the disk,
// must not reach a reader. bbolt shows a commit so from the moment its meta page is
// written, before that fdatasync: a read that begins then waits for the commit to
// return (or stop the store) and begins again, so that it is served only durable
// commits.
func (b *Bolt) view(fn func(*bolt.Tx) error) error {
	for {
		if err := b.fault.Load(); err != nil {
			return *err
		}
		early := false
		err := guard(func() error {
			return b.db.View(func(tx *bolt.Tx) error {
				if early = uint64(tx.ID()) > b.returned.Load(); early {
					return nil
				}
				return fn(tx)
			})
		})
		if errors.Is(err, berrors.ErrDatabaseNotOpen) {
			return ErrClosed
		}
		if !early {
			return err
		}
		b.awaitCommit()
	}
}

// awaitCommit waits for the commit running now to return: update holds commitMu until
// it has.
func (b *Bolt) awaitCommit() {
	b.commitMu.Lock()
	defer b.commitMu.Unlock()
}

// noteReturned records tx, a transaction that sees the last commit, as returned.
func (b *Bolt) noteReturned(tx *bolt.Tx) error {
	b.returned.Store(uint64(tx.ID()))
	return nil
}

func sessionBucket(tx *bolt.Tx, sessionID string) *bolt.Bucket {
	s := tx.Bucket(bucketSessions)
	if s == nil {
		return nil
	}
	return s.Bucket([]byte(sessionID))
}

// Watch implements [Store].
func (b *Bolt) Watch(ctx context.Context, sessionID string, fromSeq uint64, fn func(Event) error) error {
	return b.WatchAttached(ctx, sessionID, fromSeq, nil, fn)
}

// WatchAttached implements [AttachWatcher]: the watch is attached once it holds the
// session's live entry, which retention removes (setting gone) after its deletion
// commits.
func (b *Bolt) WatchAttached(ctx context.Context, sessionID string, fromSeq uint64, attached func() error, fn func(Event) error) error {
	if b.closed.Load() {
		return ErrClosed
	}
	l := b.live.acquire(sessionID)
	next := max(fromSeq, 1)
	err := runAttached(attached)
	if err == nil {
		err = b.watch(ctx, sessionID, l, &next, fn)
	}
	b.live.release(sessionID, l, (*boltLive).idle)
	return damageIn(b.path, sessionID, err)
}

// watch delivers the session's events from *next as they are committed. It reads pages
// sized by the events it has seen ([NextPage]): a session of multi-megabyte results must
// not be decoded a thousand events at a time per watcher.
func (b *Bolt) watch(ctx context.Context, sessionID string, l *boltLive, next *uint64, fn func(Event) error) error {
	page := FirstPage
	for {
		// Take the wake-up channel before reading: a commit the read misses closes it.
		l.mu.Lock()
		wake := l.wait()
		l.mu.Unlock()
		evs, err := b.Read(ctx, sessionID, *next, page)
		if err != nil {
			return err
		}
		// A watcher's pin keeps the entry: only retention removes it, and before the
		// writer commits anything after the deletion. Checked after the read, so that
		// events of a session recreated under the same id are never delivered.
		l.mu.Lock()
		gone := l.gone
		l.mu.Unlock()
		if gone {
			return ErrDeleted
		}
		if err := deliver(ctx, evs, next, fn); err != nil {
			return err
		}
		full := More(evs, page)
		if len(evs) > 0 {
			size := 0
			for i := range evs {
				size += payloadSize(&evs[i])
			}
			page = NextPage(len(evs), size, DefaultPageSize)
		}
		if full {
			continue
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		case <-b.quit:
			return ErrClosed
		case <-b.stopped:
			// A failed commit stopped the store: no commit will wake this watch
			// again, and the next read fails with the store's error.
		}
	}
}

// deliver hands evs to fn in order, advancing next past each delivered event.
func deliver(ctx context.Context, evs []Event, next *uint64, fn func(Event) error) error {
	for _, ev := range evs {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(ev); err != nil {
			return err
		}
		*next = ev.Seq + 1
	}
	return nil
}

// Summary implements [Store]. The first call for a session scans its log; later calls
// answer from memory, kept current by the writer, while the session is among the
// [maxCachedSummaries] kept (a dropped one is scanned again).
func (b *Bolt) Summary(_ context.Context, sessionID string) (Summary, error) {
	if b.closed.Load() {
		return nil, ErrClosed
	}
	if l := b.live.get(sessionID); l != nil {
		l.mu.Lock()
		sum := l.sum
		l.mu.Unlock()
		if sum != nil {
			return sum, nil
		}
	}
	l := b.live.acquire(sessionID)
	defer func() {
		b.live.release(sessionID, l, (*boltLive).idle)
		b.live.evict(sessionID, max(b.summaryCap/shardCount, 1))
	}()
	l.mu.Lock()
	if l.sum != nil {
		defer l.mu.Unlock()
		return l.sum, nil
	}
	l.loading++
	l.mu.Unlock()

	sum, exists, err := b.scan(sessionID)

	l.mu.Lock()
	defer l.mu.Unlock()
	l.loading--
	switch {
	case err != nil:
	case l.sum != nil: // another call loaded it meanwhile
		sum = l.sum
	default:
		sum = sum.with(l.pending)
		if exists {
			l.sum = sum
		}
	}
	if l.loading == 0 {
		l.pending = toolNames{}
	}
	return sum, err
}

func (b *Bolt) scanSummary(sessionID string) (*toolSummary, bool, error) {
	sum, exists := emptySummary, false
	err := b.view(func(tx *bolt.Tx) error {
		bkt := sessionBucket(tx, sessionID)
		if bkt == nil {
			return nil
		}
		exists = true
		var (
			cs    calls
			names toolNames
		)
		namer := bucketNamer{sessionID, bkt}
		err := bkt.ForEach(func(k, v []byte) error {
			seq, err := parseSeqKey(k)
			if err != nil {
				return err
			}
			ev, err := decodeEvent(sessionID, seq, v)
			if err != nil {
				return err
			}
			names.add(cs.apply(&ev, namer), nil)
			return nil
		})
		sum = sum.with(names)
		return err
	})
	return sum, exists, damageIn(b.path, sessionID, err)
}

// bucketNamer resolves call names from a session bucket.
type bucketNamer struct {
	sessionID string
	bkt       *bolt.Bucket
}

func (n bucketNamer) callName(seq uint64) string {
	v := n.bkt.Get(seqKey(seq))
	if v == nil {
		return ""
	}
	ev, err := decodeEvent(n.sessionID, seq, v)
	if err != nil || ev.Call == nil {
		return ""
	}
	return ev.Call.Name
}

// Close implements [Store]: queued appends fail with ErrClosed, the commit in flight
// completes, then the writer and the sweeper stop and the file is closed.
func (b *Bolt) Close() error {
	b.closeOnce.Do(func() {
		b.closed.Store(true)
		close(b.quit)
		b.sweeper.close()
		<-b.writerDone
		if err := b.db.Close(); err != nil {
			b.closeErr = fmt.Errorf("session: close: %w", err)
		}
	})
	return b.closeErr
}
