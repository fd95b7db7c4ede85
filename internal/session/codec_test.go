package session

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolsd/toolsd/internal/tool"
)

func codecCases() map[string]Event {
	return map[string]Event{
		"call with malformed arguments": {Type: TypeToolCall, BatchID: "b", Turn: 1, Step: 2,
			Call: &CallRecord{CallID: "c", Name: "n", Arguments: `{"a": [1, 2`}},
		"call with no arguments": {Type: TypeToolCall, Call: &CallRecord{CallID: "c"}},
		"full error result": {Type: TypeToolResult, SourceSeqs: []uint64{1, 300, 1 << 63},
			Result: &ResultRecord{CallID: "c", Content: "Error: x", IsError: true, ConcludesTurn: true, Recovered: true,
				Error: &tool.Error{Code: tool.CodeAborted, Message: "x", Reason: "r", Tool: "t"},
				Meta:  json.RawMessage(`{"m":1}`)}},
		"plain result":     {Type: TypeToolResult, Result: &ResultRecord{Content: "\xff\x00 binary"}},
		"message":          {Type: TypeUserMessage, SourceSeqs: []uint64{9}, Message: &MessageRecord{Content: "ctx"}},
		"no payload":       {Type: "other/kind", Turn: 1 << 40},
		"every payload":    {Type: "mixed", Call: &CallRecord{}, Result: &ResultRecord{}, Message: &MessageRecord{}},
		"empty source seq": {Type: TypeUserMessage, SourceSeqs: []uint64{}, Message: &MessageRecord{}},
	}
}

func TestCodecRoundTrip(t *testing.T) {
	at := time.Date(2026, 5, 6, 7, 8, 9, 10, time.UTC)
	for name, ev := range codecCases() {
		t.Run(name, func(t *testing.T) {
			b := encodeEvent(nil, &ev)
			stampTime(b, at)
			got, err := decodeEvent("sess", 42, b)
			if err != nil {
				t.Fatalf("decodeEvent() = %v", err)
			}
			want := ev
			want.SessionID, want.Seq, want.Time = "sess", 42, at
			if len(want.SourceSeqs) == 0 {
				want.SourceSeqs = nil // an empty list reads back as none
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("decodeEvent(encodeEvent()) (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCodecRejectsDamage(t *testing.T) {
	ev := codecCases()["full error result"]
	good := encodeEvent(nil, &ev)
	tests := map[string][]byte{
		"empty":           nil,
		"short header":    good[:5],
		"unknown version": append([]byte{9}, good[1:]...),
		"truncated":       good[:len(good)-1],
		"trailing bytes":  append(bytes.Clone(good), 0),
		"huge length":     append(bytes.Clone(good[:headerLen]), 0xff, 0xff, 0xff, 0xff, 0x0f),
		"varint overflow": append(bytes.Clone(good[:headerLen]), 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f),
		"huge seq count":  append(bytes.Clone(good[:headerLen]), 0, 0, 0, 0, 0xff, 0xff, 0x03),
	}
	for name, b := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := decodeEvent("s", 1, b); !errors.Is(err, ErrCorrupt) {
				t.Errorf("decodeEvent() = %v, want ErrCorrupt", err)
			}
		})
	}
}

// FuzzDecodeEvent: stored values come from a file that may be damaged; decoding must
// fail cleanly, and whatever decodes must survive a re-encode unchanged.
func FuzzDecodeEvent(f *testing.F) {
	for _, ev := range codecCases() {
		f.Add(encodeEvent(nil, &ev))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ev, err := decodeEvent("s", 1, b)
		sk, skErr := skimEvent("s", 1, b)
		if (err == nil) != (skErr == nil) {
			t.Fatalf("decodeEvent() = %v but skimEvent() = %v", err, skErr)
		}
		if err != nil {
			if !errors.Is(err, ErrCorrupt) || !errors.Is(skErr, ErrCorrupt) {
				t.Fatalf("decodeEvent() = %v, skimEvent() = %v, want ErrCorrupt", err, skErr)
			}
			return
		}
		if diff := cmp.Diff(skimmed(ev), sk); diff != "" {
			t.Fatalf("skimEvent() differs from decodeEvent() (-decoded +skimmed):\n%s", diff)
		}
		again, err := decodeEvent("s", 1, encodeEventAt(&ev))
		if err != nil {
			t.Fatalf("decodeEvent(re-encoded) = %v", err)
		}
		if diff := cmp.Diff(ev, again); diff != "" {
			t.Fatalf("re-encoding changed the event (-first +second):\n%s", diff)
		}
	})
}

func encodeEventAt(ev *Event) []byte {
	b := encodeEvent(nil, ev)
	stampTime(b, ev.Time)
	return b
}

// BenchmarkCodec compares the stored encoding with encoding/json for a typical call.
func BenchmarkCodec(b *testing.B) {
	ev := Event{Type: TypeToolCall, BatchID: "batch-0001", Turn: 3, Step: 7,
		Call: &CallRecord{CallID: "call_01HZX3K9Q", Name: "grep",
			Arguments: `{"path":"/src/internal/session/bolt.go","pattern":"func \\(b \\*Bolt\\)","context_lines":3,"max_results":50}`},
		Time: time.Unix(1, 2).UTC()}
	b.Run("Binary", func(b *testing.B) {
		var buf []byte
		for b.Loop() {
			buf = encodeEvent(buf[:0], &ev)
			if _, err := decodeEvent("s", 1, buf); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(buf)), "bytes/event")
	})
	b.Run("JSON", func(b *testing.B) {
		var buf []byte
		for b.Loop() {
			var err error
			if buf, err = json.Marshal(&ev); err != nil {
				b.Fatal(err)
			}
			var out Event
			if err := json.Unmarshal(buf, &out); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(buf)), "bytes/event")
	})
}

// skimmed is what skimEvent keeps of ev.
func skimmed(ev Event) Event {
	out := Event{SessionID: ev.SessionID, Seq: ev.Seq, Time: ev.Time, Type: ev.Type, Turn: ev.Turn, Step: ev.Step, SourceSeqs: ev.SourceSeqs}
	if c := ev.Call; c != nil {
		out.Call = &CallRecord{CallID: c.CallID, Name: c.Name}
	}
	if r := ev.Result; r != nil {
		out.Result = &ResultRecord{CallID: r.CallID, IsError: r.IsError}
	}
	if ev.Message != nil {
		out.Message = &MessageRecord{}
	}
	return out
}

func TestSkimEventKeepsWhatColdSessionsNeed(t *testing.T) {
	for name, ev := range codecCases() {
		b := encodeEvent(nil, &ev)
		stampTime(b, time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC))
		full, err := decodeEvent("s", 7, b)
		if err != nil {
			t.Fatalf("%s: decodeEvent() = %v", name, err)
		}
		got, err := skimEvent("s", 7, b)
		if err != nil {
			t.Fatalf("%s: skimEvent() = %v", name, err)
		}
		if diff := cmp.Diff(skimmed(full), got); diff != "" {
			t.Errorf("%s: skimEvent() (-want +got):\n%s", name, diff)
		}
	}
}

// TestCodecArgumentsKeepTheirEncoding pins the stored form of a call's arguments to the
// one written when they were held as bytes, so files written before still read: text
// as a non-nil byte slice, and a nil slice (0) reads back as no arguments.
func TestCodecArgumentsKeepTheirEncoding(t *testing.T) {
	for _, args := range []string{"", "{}", `{"a": [1, 2`, strings.Repeat("x", 300)} {
		if got, want := appendPresent(nil, args), appendBytes(nil, []byte(args)); !bytes.Equal(got, want) {
			t.Errorf("appendPresent(%.20q) = %x, want appendBytes' %x", args, got[:min(len(got), 8)], want[:min(len(want), 8)])
		}
		d := decoder{s: string(appendBytes(nil, []byte(args)))}
		if got := d.present(); got != args || d.err != nil {
			t.Errorf("present() of bytes %.20q = %.20q, %v", args, got, d.err)
		}
	}
	d := decoder{s: string(appendBytes(nil, nil))}
	if got := d.present(); got != "" || d.err != nil || d.off != 1 {
		t.Errorf("present() of nil bytes = %q, %v at %d, want \"\" after one byte", got, d.err, d.off)
	}
}
