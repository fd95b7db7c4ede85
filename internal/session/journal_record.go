package session

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"time"
)

// The journal file is a header, then groups of records, one group per commit:
//
//	file    "TOOLSDJ" 0x02                         8 bytes, once
//	        file id                                8 random bytes, new for each file
//	        CRC-32C of the 16 bytes above          uint32, big-endian
//	group   body length                            uint32, big-endian
//	        CRC-32C of the body, continuing the    uint32, big-endian
//	        header's
//	body    'G'                                    byte (a record body starts with its kind)
//	        group seq                              uint64, big-endian: 1, 2, 3, ... per file
//	        records, at least one
//	record  body length                            uint32, big-endian, >= 1
//	        CRC-32C of the body                    uint32, big-endian
//	body    kind                                   byte
//	        session id                             uvarint length + bytes
//	events  first seq                              uint64, big-endian
//	        count                                  uvarint
//	        count x (value length uint32 BE, value) values in the stored form of codec.go,
//	                                               seqs first, first+1, ...
//	owner   identity, scope                        strings; then scope known (byte 0 or 1)
//	        claim time                             int64 BE, Unix ns; absent in files
//	                                               written before claims were timed
//	delete  nothing more: the session is gone (retention)
//
// A group is written by one write(2) and fdatasynced before the next one starts, so a
// crash can damage only the last group, in any of its pages. Its CRC tells a whole group
// from a torn one; a whole group after a damaged one means the damage is not a torn
// write. The group seq tells a real later group from a copy of an earlier one that a
// tool's output might carry inside the torn group. The file id in a group's checksum
// binds the group to its file: a rewrite starts a new file whose seqs start again at 1,
// and a group of the file it replaced (in a tool's output, or in blocks the new file
// reused) does not pass for one of the new file, whatever its seq. The header's own
// checksum tells a damaged id, which would fail every group's checksum, from a torn
// first group.
//
// A file written before groups were bound to their file has the header "TOOLSDJ" 0x01
// alone (8 bytes) and checksums its groups' bodies alone; such a file is read, and
// appended to, as it is until a rewrite replaces it.
const (
	journalMagic   = "TOOLSDJ\x02"
	journalMagicV1 = "TOOLSDJ\x01"
	fileIDLen      = 8
	journalHeadLen = len(journalMagic) + fileIDLen + 4
	groupMarker    = 'G'
	groupHeadLen   = recHeaderLen + 1 + 8
	recHeaderLen   = 8
	recKindEvents  = 1
	recKindOwner   = 2
	recKindDelete  = 3
	valueLenBytes  = 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func crcOf(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// newJournalHeader returns the header of a new journal file, with a fresh file id, and
// its groups' checksum seed.
func newJournalHeader() ([]byte, uint32) {
	h := make([]byte, journalHeadLen-4, journalHeadLen)
	copy(h, journalMagic)
	_, _ = rand.Read(h[len(journalMagic):]) // never fails
	seed := crcOf(h)
	return binary.BigEndian.AppendUint32(h, seed), seed
}

// headerSeed checks a header of the current format and returns its groups' checksum
// seed.
func headerSeed(h []byte) (uint32, bool) {
	seed := crcOf(h[:journalHeadLen-4])
	return seed, seed == binary.BigEndian.Uint32(h[journalHeadLen-4:])
}

// groupCRC is the checksum of a group body in a file whose groups' checksums start
// from seed (its header's checksum; 0 in a file of the first format).
func groupCRC(seed uint32, body []byte) uint32 { return crc32.Update(seed, castagnoli, body) }

// beginRecord appends a record header placeholder, kind and session id to dst; it
// returns dst and the record's offset in it. sealRecord completes the header.
func beginRecord(dst []byte, kind byte, sessionID string) ([]byte, int) {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0, kind)
	return appendString(dst, sessionID), start
}

// sealRecord writes the length and checksum of rec's body into its header.
func sealRecord(rec []byte) {
	body := rec[recHeaderLen:]
	binary.BigEndian.PutUint32(rec[0:], uint32(len(body)))
	binary.BigEndian.PutUint32(rec[4:], crcOf(body))
}

// eventsRecord is an events record under construction: the writer fills in the seq of
// its first event and the time of all of them once it orders the append.
type eventsRecord struct {
	buf    []byte
	seqOff int
	vals   []int // offsets of the values (each one's codec header)
}

// encodeEventsRecord encodes events (their Seq and Time are not read) as a record for
// sessionID whose first seq and times are stamped later; size is eventsRecordSize's.
func encodeEventsRecord(sessionID string, events []Event, size int) eventsRecord {
	buf, _ := beginRecord(make([]byte, 0, size), recKindEvents, sessionID)
	r := eventsRecord{seqOff: len(buf), vals: make([]int, len(events))}
	buf = append(buf, 0, 0, 0, 0, 0, 0, 0, 0)
	buf = binary.AppendUvarint(buf, uint64(len(events)))
	for i := range events {
		lenAt := len(buf)
		buf = append(buf, 0, 0, 0, 0)
		r.vals[i] = len(buf)
		buf = encodeEvent(buf, &events[i])
		binary.BigEndian.PutUint32(buf[lenAt:], uint32(len(buf)-r.vals[i]))
	}
	r.buf = buf
	return r
}

// eventsRecordSize is an upper bound of the size of events' record.
func eventsRecordSize(sessionID string, events []Event) int {
	size := recHeaderLen + 1 + binary.MaxVarintLen64 + len(sessionID) + 8 + binary.MaxVarintLen64
	for i := range events {
		size += valueLenBytes + payloadSize(&events[i]) + 64 + 10*len(events[i].SourceSeqs)
	}
	return size
}

// appendStoredEvents appends a sealed events record of stored events (seqs dense from
// events[0].Seq, times kept) to dst.
func appendStoredEvents(dst []byte, sessionID string, events []Event) []byte {
	dst, start := beginRecord(dst, recKindEvents, sessionID)
	dst = binary.BigEndian.AppendUint64(dst, events[0].Seq)
	dst = binary.AppendUvarint(dst, uint64(len(events)))
	for i := range events {
		lenAt := len(dst)
		dst = append(dst, 0, 0, 0, 0)
		val := len(dst)
		dst = encodeEvent(dst, &events[i])
		stampTime(dst[val:], events[i].Time)
		binary.BigEndian.PutUint32(dst[lenAt:], uint32(len(dst)-val))
	}
	sealRecord(dst[start:])
	return dst
}

// appendOwnerRecord appends a sealed owner record, claimed at the given time, to dst.
func appendOwnerRecord(dst []byte, sessionID string, o Owner, claimed time.Time) []byte {
	dst, start := beginRecord(dst, recKindOwner, sessionID)
	dst = appendString(dst, o.Identity)
	dst = appendString(dst, o.Scope)
	known := byte(0)
	if o.ScopeKnown {
		known = 1
	}
	dst = append(dst, known)
	dst = binary.BigEndian.AppendUint64(dst, uint64(claimed.UnixNano()))
	sealRecord(dst[start:])
	return dst
}

// ownerRecordSize is an upper bound of the size of an owner record.
func ownerRecordSize(sessionID string, o Owner) int {
	return recHeaderLen + 1 + 3*binary.MaxVarintLen64 + len(sessionID) + len(o.Identity) + len(o.Scope) + 1 + 8
}

// appendDeleteRecord appends a sealed delete record to dst.
func appendDeleteRecord(dst []byte, sessionID string) []byte {
	dst, start := beginRecord(dst, recKindDelete, sessionID)
	sealRecord(dst[start:])
	return dst
}

// record is one decoded journal record.
type record struct {
	kind      byte
	sessionID string
	events    []Event
	owner     Owner
	// claimed is the owner's claim time; zero in a record written before claims were
	// timed.
	claimed time.Time
}

var errUnknownKind = errors.New("unknown record kind")

// decodeRecord parses a record body whose checksum matched, its events in full. Damage
// is ErrCorrupt.
func decodeRecord(body []byte) (record, error) { return parseRecord(body, decodeEvent) }

// skimRecord parses a record body as decodeRecord does, but its events only as far as
// a cold session needs them ([skimEvent]): what replay reads.
func skimRecord(body []byte) (record, error) { return parseRecord(body, skimEvent) }

func parseRecord(body []byte, event func(sessionID string, seq uint64, b []byte) (Event, error)) (record, error) {
	k := reader{b: body}
	r := record{kind: k.byte()}
	r.sessionID = string(k.str())
	switch r.kind {
	case recKindEvents:
		first := k.fixed64()
		n := k.uvarint()
		if k.err == nil && (n == 0 || n > uint64(len(k.b)-k.off)/(valueLenBytes+headerLen)) {
			k.fail(fmt.Errorf("implausible event count %d", n))
		}
		for i := uint64(0); i < n && k.err == nil; i++ {
			v := k.span(uint64(k.fixed32()))
			if k.err != nil {
				break
			}
			ev, err := event(r.sessionID, first+i, v)
			if err != nil {
				return record{}, err
			}
			r.events = append(r.events, ev)
		}
	case recKindOwner:
		r.owner = Owner{Identity: string(k.str()), Scope: string(k.str())}
		switch k.byte() {
		case 0:
		case 1:
			r.owner.ScopeKnown = true
		default:
			k.fail(errors.New("bad scope-known flag"))
		}
		if k.err == nil && k.off < len(k.b) {
			r.claimed = time.Unix(0, int64(k.fixed64())).UTC()
		}
	case recKindDelete:
	default:
		k.fail(fmt.Errorf("%w %d", errUnknownKind, r.kind))
	}
	if k.err == nil && k.off != len(k.b) {
		k.fail(fmt.Errorf("%d trailing bytes", len(k.b)-k.off))
	}
	if k.err == nil && validateSessionID(r.sessionID) != nil {
		k.fail(errors.New("bad session id"))
	}
	if k.err != nil {
		return record{}, fmt.Errorf("%w: journal record: %w", ErrCorrupt, k.err)
	}
	return r, nil
}

// skimEvent parses the stored form of an event (see codec.go) keeping only what a cold
// session's state is built from: type, time, turn, step, cited seqs, a call's id and
// name, a result's call id and error flag. Payloads are skipped, not copied. Damage is
// ErrCorrupt, as with decodeEvent.
func skimEvent(sessionID string, seq uint64, b []byte) (Event, error) {
	if len(b) < headerLen || b[0] != codecV1 {
		return decodeEvent(sessionID, seq, b) // for its error
	}
	k := reader{b: b, off: headerLen}
	ev := Event{
		SessionID: sessionID,
		Seq:       seq,
		Time:      time.Unix(0, int64(binary.BigEndian.Uint64(b[timeOffset:]))).UTC(),
		Type:      eventType(k.str()),
	}
	k.str() // batch id
	ev.Turn, ev.Step = k.uvarint(), k.uvarint()
	if n := k.uvarint(); n > 0 && k.err == nil {
		if n > uint64(len(k.b)-k.off) {
			k.fail(errShort)
		} else {
			ev.SourceSeqs = make([]uint64, n)
			for i := range ev.SourceSeqs {
				ev.SourceSeqs[i] = k.uvarint()
			}
		}
	}
	flags := k.byte()
	if flags&flagCall != 0 {
		ev.Call = &CallRecord{CallID: string(k.str()), Name: string(k.str())}
		k.bytes()
	}
	if flags&flagResult != 0 {
		ev.Result = &ResultRecord{CallID: string(k.str())}
		k.str() // content
		rf := k.byte()
		ev.Result.IsError = rf&resIsError != 0
		if rf&resHasError != 0 {
			k.str()
			k.str()
			k.str()
			k.str()
		}
		k.bytes() // meta
	}
	if flags&flagMessage != 0 {
		ev.Message = &MessageRecord{}
		k.str()
	}
	if k.err == nil && k.off != len(k.b) {
		k.fail(fmt.Errorf("%d trailing bytes", len(k.b)-k.off))
	}
	if k.err != nil {
		return Event{}, fmt.Errorf("%w: event %d of session %q: %w", ErrCorrupt, seq, sessionID, k.err)
	}
	return ev, nil
}

// eventType returns the type named by b without allocating for the known ones.
func eventType(b []byte) EventType {
	for _, t := range []EventType{TypeToolCall, TypeToolResult, TypeUserMessage} {
		if string(b) == string(t) {
			return t
		}
	}
	return EventType(b)
}

// reader reads the journal's encodings in place. After an error every read returns a
// zero value.
type reader struct {
	b   []byte
	off int
	err error
}

func (k *reader) fail(err error) {
	if k.err == nil {
		k.err = err
	}
	k.off = len(k.b)
}

func (k *reader) span(n uint64) []byte {
	if k.err != nil {
		return nil
	}
	if n > uint64(len(k.b)-k.off) {
		k.fail(errShort)
		return nil
	}
	start := k.off
	k.off += int(n)
	return k.b[start:k.off:k.off]
}

func (k *reader) byte() byte {
	if b := k.span(1); len(b) == 1 {
		return b[0]
	}
	return 0
}

func (k *reader) uvarint() uint64 {
	if k.err != nil {
		return 0
	}
	v, n := binary.Uvarint(k.b[k.off:])
	if n <= 0 {
		if n == 0 {
			k.fail(errShort)
		} else {
			k.fail(errors.New("uvarint overflows 64 bits"))
		}
		return 0
	}
	k.off += n
	return v
}

func (k *reader) str() []byte { return k.span(k.uvarint()) }

// bytes skips a byte field (uvarint length+1; 0 = nil).
func (k *reader) bytes() {
	if n := k.uvarint(); n > 0 {
		k.span(n - 1)
	}
}

func (k *reader) fixed32() uint32 {
	if b := k.span(4); len(b) == 4 {
		return binary.BigEndian.Uint32(b)
	}
	return 0
}

func (k *reader) fixed64() uint64 {
	if b := k.span(8); len(b) == 8 {
		return binary.BigEndian.Uint64(b)
	}
	return 0
}

// beginGroup appends a group header placeholder for group seq to dst.
func beginGroup(dst []byte, seq uint64) []byte {
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0, groupMarker)
	return binary.BigEndian.AppendUint64(dst, seq)
}

// sealGroup completes the header of group, which starts with it, for a file whose
// checksum seed is seed.
func sealGroup(group []byte, seed uint32) {
	body := group[recHeaderLen:]
	binary.BigEndian.PutUint32(group[0:], uint32(len(body)))
	binary.BigEndian.PutUint32(group[4:], groupCRC(seed, body))
}

// groupAt reports whether buf[off:] starts with a whole group of the file whose
// checksum seed is seed, and returns its seq.
func groupAt(buf []byte, off int, seed uint32) (uint64, bool) {
	if len(buf)-off < groupHeadLen {
		return 0, false
	}
	n := int(binary.BigEndian.Uint32(buf[off:]))
	if n < groupHeadLen-recHeaderLen || n > len(buf)-off-recHeaderLen {
		return 0, false
	}
	body := buf[off+recHeaderLen : off+recHeaderLen+n]
	if body[0] != groupMarker || groupCRC(seed, body) != binary.BigEndian.Uint32(buf[off+4:]) {
		return 0, false
	}
	return binary.BigEndian.Uint64(body[1:]), true
}

// splitGroup returns the seq of a group body whose checksum matched and the offsets in
// it of its records (of their headers; each ends where the next begins, the last at
// the end). Damage is ErrCorrupt.
func splitGroup(body []byte) (uint64, []int, error) {
	if len(body) < 1+8 || body[0] != groupMarker {
		return 0, nil, fmt.Errorf("%w: journal group without its marker", ErrCorrupt)
	}
	seq := binary.BigEndian.Uint64(body[1:])
	var offs []int
	for off := 9; off < len(body); {
		rest := body[off:]
		if len(rest) < recHeaderLen+1 {
			return 0, nil, fmt.Errorf("%w: journal group %d ends inside a record", ErrCorrupt, seq)
		}
		n := int(binary.BigEndian.Uint32(rest))
		if n < 1 || n > len(rest)-recHeaderLen {
			return 0, nil, fmt.Errorf("%w: journal group %d has a record of %d bytes with %d left", ErrCorrupt, seq, n, len(rest)-recHeaderLen)
		}
		if crcOf(rest[recHeaderLen:recHeaderLen+n]) != binary.BigEndian.Uint32(rest[4:]) {
			return 0, nil, fmt.Errorf("%w: journal group %d has a record with a bad checksum", ErrCorrupt, seq)
		}
		offs = append(offs, off)
		off += recHeaderLen + n
	}
	if len(offs) == 0 {
		return 0, nil, fmt.Errorf("%w: journal group %d is empty", ErrCorrupt, seq)
	}
	return seq, offs, nil
}
