package session

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// The journal file is a header, then groups of records, one group per commit:
//
//	file    "TOOLSDJ" 0x01                         8 bytes, once
//	group   body length                            uint32, big-endian
//	        CRC-32C of the body                    uint32, big-endian
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
//	delete  nothing more: the session is gone (retention)
//
// A group is written by one write(2) and fdatasynced before the next one starts, so a
// crash can damage only the last group, in any of its pages. Its CRC tells a whole group
// from a torn one; a whole group after a damaged one means the damage is not a torn
// write. The group seq tells a real later group from a copy of an earlier one that a
// tool's output might carry inside the torn group.
const (
	journalMagic  = "TOOLSDJ\x01"
	groupMarker   = 'G'
	groupHeadLen  = recHeaderLen + 1 + 8
	recHeaderLen  = 8
	recKindEvents = 1
	recKindOwner  = 2
	recKindDelete = 3
	valueLenBytes = 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func crcOf(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

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
// sessionID whose first seq and times are stamped later.
func encodeEventsRecord(sessionID string, events []Event) eventsRecord {
	buf, _ := beginRecord(make([]byte, 0, eventsRecordSize(sessionID, events)), recKindEvents, sessionID)
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

// appendOwnerRecord appends a sealed owner record to dst.
func appendOwnerRecord(dst []byte, sessionID string, o Owner) []byte {
	dst, start := beginRecord(dst, recKindOwner, sessionID)
	dst = appendString(dst, o.Identity)
	dst = appendString(dst, o.Scope)
	known := byte(0)
	if o.ScopeKnown {
		known = 1
	}
	dst = append(dst, known)
	sealRecord(dst[start:])
	return dst
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
}

var errUnknownKind = errors.New("unknown record kind")

// decodeRecord parses a record body whose checksum matched. Damage is ErrCorrupt.
func decodeRecord(body []byte) (record, error) {
	d := decoder{s: string(body)}
	r := record{kind: d.byte()}
	r.sessionID = d.str()
	switch r.kind {
	case recKindEvents:
		first := d.fixed64()
		n := d.uvarint()
		if n == 0 || n > uint64(len(d.s)-d.off)/(valueLenBytes+headerLen) {
			d.fail(fmt.Errorf("implausible event count %d", n))
		}
		for i := uint64(0); i < n && d.err == nil; i++ {
			start, end, ok := d.span(uint64(d.fixed32()))
			if !ok {
				break
			}
			ev, err := decodeEvent(r.sessionID, first+i, body[start:end])
			if err != nil {
				return record{}, err
			}
			r.events = append(r.events, ev)
		}
	case recKindOwner:
		r.owner = Owner{Identity: d.str(), Scope: d.str()}
		switch d.byte() {
		case 0:
		case 1:
			r.owner.ScopeKnown = true
		default:
			d.fail(errors.New("bad scope-known flag"))
		}
	case recKindDelete:
	default:
		d.fail(fmt.Errorf("%w %d", errUnknownKind, r.kind))
	}
	if d.err == nil && d.off != len(d.s) {
		d.fail(fmt.Errorf("%d trailing bytes", len(d.s)-d.off))
	}
	if d.err == nil && validateSessionID(r.sessionID) != nil {
		d.fail(errors.New("bad session id"))
	}
	if d.err != nil {
		return record{}, fmt.Errorf("%w: journal record: %w", ErrCorrupt, d.err)
	}
	return r, nil
}

func (d *decoder) fixed32() uint32 {
	start, _, ok := d.span(4)
	if !ok {
		return 0
	}
	b := d.s[start : start+4]
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

func (d *decoder) fixed64() uint64 {
	hi := d.fixed32()
	return uint64(hi)<<32 | uint64(d.fixed32())
}

// beginGroup appends a group header placeholder for group seq to dst.
func beginGroup(dst []byte, seq uint64) []byte {
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0, groupMarker)
	return binary.BigEndian.AppendUint64(dst, seq)
}

// sealGroup completes the header of group, which starts with it.
func sealGroup(group []byte) { sealRecord(group) }

// groupAt reports whether buf[off:] starts with a whole group whose checksum matches,
// and returns its seq.
func groupAt(buf []byte, off int) (uint64, bool) {
	if len(buf)-off < groupHeadLen {
		return 0, false
	}
	n := int(binary.BigEndian.Uint32(buf[off:]))
	if n < groupHeadLen-recHeaderLen || n > len(buf)-off-recHeaderLen {
		return 0, false
	}
	body := buf[off+recHeaderLen : off+recHeaderLen+n]
	if body[0] != groupMarker || crcOf(body) != binary.BigEndian.Uint32(buf[off+4:]) {
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
