package session

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// FileName is the database file Open keeps in its directory.
const FileName = "sessions.db"

// The database layout. Event keys are big-endian seqs, so a session's bucket iterates in
// seq order, its last key is its last seq and its last value carries its last append
// time; appends land at the right edge of the B+tree, which is why the session buckets
// are filled to 100%. A commit touches the session buckets, the open-call index (only
// when calls open or close), the root, the freelist and the meta page.
var (
	bucketMeta     = []byte("meta")     // format version
	bucketSessions = []byte("sessions") // one nested bucket per session: seq → event
	bucketOpen     = []byte("open")     // open-call key → call id and tool name
	bucketOwners   = []byte("owners")   // session id → owner (identity, scope, claim time)
	keyFormat      = []byte("format")
)

const layoutVersion = 1

// roots are the top-level buckets of one transaction.
type roots struct {
	sessions, open *bolt.Bucket
}

func rootsOf(tx *bolt.Tx) (roots, error) {
	r := roots{tx.Bucket(bucketSessions), tx.Bucket(bucketOpen)}
	if r.sessions == nil || r.open == nil {
		return roots{}, fmt.Errorf("%w: a top-level bucket is missing", ErrCorrupt)
	}
	return r, nil
}

// initLayout creates the buckets of a new database and checks an existing one.
func initLayout(tx *bolt.Tx) error {
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		if k, _ := tx.Cursor().First(); k != nil {
			return fmt.Errorf("%w: not a toolsd session log (bucket %q)", ErrCorrupt, k)
		}
		return createLayout(tx)
	}
	if v := meta.Get(keyFormat); len(v) != 1 || v[0] != layoutVersion {
		return fmt.Errorf("%w: unsupported layout version %v", ErrCorrupt, v)
	}
	if _, err := rootsOf(tx); err != nil {
		return err
	}
	// Files written before session owners were recorded lack the bucket; it is an
	// addition that older readers ignore, so the layout version stays.
	if _, err := tx.CreateBucketIfNotExists(bucketOwners); err != nil {
		return fmt.Errorf("session: create bucket %q: %w", bucketOwners, err)
	}
	return nil
}

func createLayout(tx *bolt.Tx) error {
	for _, name := range [][]byte{bucketMeta, bucketSessions, bucketOpen, bucketOwners} {
		if _, err := tx.CreateBucket(name); err != nil {
			return fmt.Errorf("session: create bucket %q: %w", name, err)
		}
	}
	return tx.Bucket(bucketMeta).Put(keyFormat, []byte{layoutVersion})
}

func seqKey(seq uint64) []byte { return binary.BigEndian.AppendUint64(make([]byte, 0, 8), seq) }

func parseSeqKey(k []byte) (uint64, error) {
	if len(k) != 8 {
		return 0, fmt.Errorf("%w: event key of %d bytes", ErrCorrupt, len(k))
	}
	return binary.BigEndian.Uint64(k), nil
}

// openKey is the session id (length-prefixed, so that no id is a prefix of another
// key's id) followed by the call's big-endian seq: one session's open calls are
// adjacent and in seq order.
func openKey(sessionID string, seq uint64) []byte {
	k := make([]byte, 0, 2+len(sessionID)+8)
	k = binary.BigEndian.AppendUint16(k, uint16(len(sessionID)))
	k = append(k, sessionID...)
	return binary.BigEndian.AppendUint64(k, seq)
}

func openPrefix(sessionID string) []byte {
	k := openKey(sessionID, 0)
	return k[:len(k)-8]
}

func parseOpenKey(k []byte) (string, uint64, error) {
	if len(k) < 10 || int(binary.BigEndian.Uint16(k))+10 != len(k) {
		return "", 0, fmt.Errorf("%w: malformed open-call key", ErrCorrupt)
	}
	return string(k[2 : len(k)-8]), binary.BigEndian.Uint64(k[len(k)-8:]), nil
}

func openValue(oc openCall) []byte {
	return appendString(appendString(nil, oc.callID), oc.name)
}

func parseOpenValue(v []byte) (openCall, error) {
	d := decoder{s: string(v)}
	oc := openCall{callID: d.str(), name: d.str()}
	if d.err == nil && d.off != len(d.s) {
		d.err = errors.New("trailing bytes")
	}
	if d.err != nil {
		return openCall{}, fmt.Errorf("%w: open-call record: %w", ErrCorrupt, d.err)
	}
	return oc, nil
}

// ownerValue is the owner record of a session claimed at the given time: a session
// with no events is idle since its claim.
func ownerValue(o Owner, claimed time.Time) []byte {
	known := byte(0)
	if o.ScopeKnown {
		known = 1
	}
	v := append(appendString(appendString(nil, o.Identity), o.Scope), known)
	return binary.BigEndian.AppendUint64(v, uint64(claimed.UnixNano()))
}

// parseOwnerValue returns the owner and claim time of an owner record; the time is
// zero in a record written before claims were timed.
func parseOwnerValue(v []byte) (Owner, time.Time, error) {
	d := decoder{s: string(v)}
	o := Owner{Identity: d.str(), Scope: d.str(), ScopeKnown: d.byte() == 1}
	var claimed time.Time
	switch rest := len(d.s) - d.off; {
	case d.err != nil || rest == 0:
	case rest == 8:
		claimed = time.Unix(0, int64(binary.BigEndian.Uint64(v[d.off:]))).UTC()
	default:
		d.err = errors.New("trailing bytes")
	}
	if d.err != nil {
		return Owner{}, time.Time{}, fmt.Errorf("%w: session owner record: %w", ErrCorrupt, d.err)
	}
	return o, claimed, nil
}

// lastAppend returns when a session was last appended to: the time stamped in its last
// event, so that no per-session record has to be rewritten on every commit.
func lastAppend(bkt *bolt.Bucket) (time.Time, error) {
	k, v := bkt.Cursor().Last()
	if k == nil {
		return time.Time{}, nil // no events: as old as can be
	}
	if len(v) < headerLen || v[0] != codecV1 {
		return time.Time{}, fmt.Errorf("%w: malformed last event", ErrCorrupt)
	}
	return time.Unix(0, int64(binary.BigEndian.Uint64(v[timeOffset:]))).UTC(), nil
}
