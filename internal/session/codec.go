package session

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/toolsd/toolsd/internal/tool"
)

// The stored form of an event (the value under its big-endian seq key), version 1:
//
//	[0]     version (1)
//	[1:9]   time, Unix nanoseconds, big-endian: fixed so the writer can stamp it last
//	type, batch id                    uvarint length + bytes
//	turn, step                        uvarint
//	source seqs                       uvarint count, then uvarints
//	payload flags                     byte: 1 call, 2 result, 4 message
//	call    call id, name             strings
//	        arguments                 bytes (uvarint length+1; 0 = nil)
//	result  call id, content          strings
//	        result flags              byte: 1 is error, 2 concludes turn, 4 recovered, 8 has error
//	        error code, message, reason, tool (when flag 8)
//	        meta                      bytes (as arguments)
//	message content                   string
//
// A hand-rolled encoding rather than JSON: it keeps Arguments and Meta byte-exact without
// escaping them as strings, and it is several times faster and smaller (see
// BenchmarkCodec). The session id and seq are the keys, not part of the value.
const (
	codecV1       = 1
	timeOffset    = 1
	headerLen     = 9
	maxValueBytes = 1 << 30 // below bbolt's MaxValueSize with room for the encoding
)

const (
	flagCall = 1 << iota
	flagResult
	flagMessage
)

const (
	resIsError = 1 << iota
	resConcludesTurn
	resRecovered
	resHasError
)

// encodeEvent appends ev's stored form, with a zero time, to dst.
func encodeEvent(dst []byte, ev *Event) []byte {
	dst = append(dst, codecV1, 0, 0, 0, 0, 0, 0, 0, 0)
	dst = appendString(dst, string(ev.Type))
	dst = appendString(dst, ev.BatchID)
	dst = binary.AppendUvarint(dst, ev.Turn)
	dst = binary.AppendUvarint(dst, ev.Step)
	dst = binary.AppendUvarint(dst, uint64(len(ev.SourceSeqs)))
	for _, s := range ev.SourceSeqs {
		dst = binary.AppendUvarint(dst, s)
	}
	var flags byte
	if ev.Call != nil {
		flags |= flagCall
	}
	if ev.Result != nil {
		flags |= flagResult
	}
	if ev.Message != nil {
		flags |= flagMessage
	}
	dst = append(dst, flags)
	if c := ev.Call; c != nil {
		dst = appendString(dst, c.CallID)
		dst = appendString(dst, c.Name)
		dst = appendPresent(dst, c.Arguments)
	}
	if r := ev.Result; r != nil {
		dst = appendResult(dst, r)
	}
	if m := ev.Message; m != nil {
		dst = appendString(dst, m.Content)
	}
	return dst
}

func appendResult(dst []byte, r *ResultRecord) []byte {
	dst = appendString(dst, r.CallID)
	dst = appendString(dst, r.Content)
	var flags byte
	if r.IsError {
		flags |= resIsError
	}
	if r.ConcludesTurn {
		flags |= resConcludesTurn
	}
	if r.Recovered {
		flags |= resRecovered
	}
	if r.Error != nil {
		flags |= resHasError
	}
	dst = append(dst, flags)
	if e := r.Error; e != nil {
		dst = appendString(dst, string(e.Code))
		dst = appendString(dst, e.Message)
		dst = appendString(dst, e.Reason)
		dst = appendString(dst, e.Tool)
	}
	return appendBytes(dst, r.Meta)
}

// stampTime writes the append time into an encoded event.
func stampTime(b []byte, t time.Time) {
	binary.BigEndian.PutUint64(b[timeOffset:], uint64(t.UnixNano()))
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendBytes(dst, b []byte) []byte {
	if b == nil {
		return append(dst, 0)
	}
	dst = binary.AppendUvarint(dst, uint64(len(b))+1)
	return append(dst, b...)
}

// appendPresent writes s as [appendBytes] writes a non-nil slice: arguments were
// written as bytes before they were held as a string, and records keep that form.
func appendPresent(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s))+1)
	return append(dst, s...)
}

var errShort = errors.New("truncated value")

// decoder reads a stored event. The value is copied once into a string; every string
// field is a substring of it and byte fields are copied out.
type decoder struct {
	s   string
	off int
	err error
}

// decodeEvent parses the stored form of the event seq of sessionID. Damage is reported
// as [ErrCorrupt], never as a panic.
func decodeEvent(sessionID string, seq uint64, b []byte) (Event, error) {
	if len(b) < headerLen {
		return Event{}, fmt.Errorf("%w: event %d of session %q: %w", ErrCorrupt, seq, sessionID, errShort)
	}
	if b[0] != codecV1 {
		return Event{}, fmt.Errorf("%w: event %d of session %q: unsupported encoding version %d",
			ErrCorrupt, seq, sessionID, b[0])
	}
	d := decoder{s: string(b), off: headerLen}
	ev := Event{
		SessionID: sessionID,
		Seq:       seq,
		Time:      time.Unix(0, int64(binary.BigEndian.Uint64(b[timeOffset:]))).UTC(),
		Type:      EventType(d.str()),
		BatchID:   d.str(),
		Turn:      d.uvarint(),
		Step:      d.uvarint(),
	}
	if n := d.uvarint(); n > 0 {
		if n > uint64(len(d.s)-d.off) { // every seq takes at least one byte
			d.fail(errShort)
		} else {
			ev.SourceSeqs = make([]uint64, n)
			for i := range ev.SourceSeqs {
				ev.SourceSeqs[i] = d.uvarint()
			}
		}
	}
	flags := d.byte()
	if flags&flagCall != 0 {
		ev.Call = &CallRecord{CallID: d.str(), Name: d.str(), Arguments: d.present()}
	}
	if flags&flagResult != 0 {
		ev.Result = d.result()
	}
	if flags&flagMessage != 0 {
		ev.Message = &MessageRecord{Content: d.str()}
	}
	if d.err == nil && d.off != len(d.s) {
		d.fail(fmt.Errorf("%d trailing bytes", len(d.s)-d.off))
	}
	if d.err != nil {
		return Event{}, fmt.Errorf("%w: event %d of session %q: %w", ErrCorrupt, seq, sessionID, d.err)
	}
	return ev, nil
}

func (d *decoder) result() *ResultRecord {
	r := &ResultRecord{CallID: d.str(), Content: d.str()}
	flags := d.byte()
	r.IsError = flags&resIsError != 0
	r.ConcludesTurn = flags&resConcludesTurn != 0
	r.Recovered = flags&resRecovered != 0
	if flags&resHasError != 0 {
		r.Error = &tool.Error{Code: tool.Code(d.str()), Message: d.str(), Reason: d.str(), Tool: d.str()}
	}
	r.Meta = d.bytes()
	return r
}

func (d *decoder) fail(err error) {
	if d.err == nil {
		d.err = err
	}
	d.off = len(d.s)
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	var v uint64
	for shift := uint(0); shift < 64; shift += 7 {
		if d.off >= len(d.s) {
			d.fail(errShort)
			return 0
		}
		c := d.s[d.off]
		d.off++
		if c < 0x80 {
			if shift == 63 && c > 1 {
				break
			}
			return v | uint64(c)<<shift
		}
		v |= uint64(c&0x7f) << shift
	}
	d.fail(errors.New("uvarint overflows 64 bits"))
	return 0
}

func (d *decoder) byte() byte {
	if d.err != nil {
		return 0
	}
	if d.off >= len(d.s) {
		d.fail(errShort)
		return 0
	}
	c := d.s[d.off]
	d.off++
	return c
}

// span returns the next n bytes' bounds.
func (d *decoder) span(n uint64) (int, int, bool) {
	if d.err != nil {
		return 0, 0, false
	}
	if n > uint64(len(d.s)-d.off) {
		d.fail(errShort)
		return 0, 0, false
	}
	start := d.off
	d.off += int(n)
	return start, d.off, true
}

func (d *decoder) str() string {
	start, end, ok := d.span(d.uvarint())
	if !ok {
		return ""
	}
	return d.s[start:end]
}

// present reads what [appendPresent] or [appendBytes] wrote as a string (nil as "").
func (d *decoder) present() string {
	n := d.uvarint()
	if n == 0 || d.err != nil {
		return ""
	}
	start, end, ok := d.span(n - 1)
	if !ok {
		return ""
	}
	return d.s[start:end]
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if n == 0 || d.err != nil {
		return nil
	}
	start, end, ok := d.span(n - 1)
	if !ok {
		return nil
	}
	return []byte(d.s[start:end])
}
