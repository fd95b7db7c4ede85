package server

import (
	"strings"
	"unicode/utf8"

	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
)

// lenientCodec is gRPC's protobuf codec, except for the messages providers send on
// their streams: when one fails to decode and its string fields hold text that is not
// UTF-8, it is decoded again with that text repaired (each bad byte sequence becomes
// U+FFFD, as the Go SDK repairs it before sending). protobuf refuses such strings, and
// gRPC ends the stream on a message it cannot decode: one bad tool description would
// take every call of the provider with it. The registry then judges the repaired text
// like any other (a tool name with U+FFFD in it is refused on its own). Results and
// progress carry their payloads as bytes, which normalization checks. Every other
// message (agents', operators', hooks') fails as before.
type lenientCodec struct{ encoding.CodecV2 }

func newLenientCodec() lenientCodec {
	return lenientCodec{encoding.GetCodecV2(grpcproto.Name)}
}

// Unmarshal implements [encoding.CodecV2].
func (c lenientCodec) Unmarshal(data mem.BufferSlice, v any) error {
	err := c.CodecV2.Unmarshal(data, v)
	if err == nil {
		return nil
	}
	m, ok := v.(*toolsdv1.ProviderServiceConnectRequest)
	if !ok {
		return err
	}
	fixed, changed, ok := repairUTF8(nil, data.Materialize(), m.ProtoReflect().Descriptor(), 0)
	if !ok || !changed {
		return err
	}
	proto.Reset(m)
	return proto.Unmarshal(fixed, m)
}

// maxRepairDepth bounds the nesting repairUTF8 follows; toolsd's messages are shallow.
const maxRepairDepth = 32

// repairUTF8 appends to out the message b (of type md) with every string field's
// invalid UTF-8 replaced by U+FFFD, nested messages included. It reports whether it
// replaced anything, and false for ok when b is not well-formed.
func repairUTF8(out, b []byte, md protoreflect.MessageDescriptor, depth int) (_ []byte, changed, ok bool) {
	if depth > maxRepairDepth {
		return nil, false, false
	}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, false, false
		}
		fd := md.Fields().ByNumber(num)
		if typ != protowire.BytesType || fd == nil {
			m := protowire.ConsumeFieldValue(num, typ, b[n:])
			if m < 0 {
				return nil, false, false
			}
			out, b = append(out, b[:n+m]...), b[n+m:]
			continue
		}
		v, m := protowire.ConsumeBytes(b[n:])
		if m < 0 {
			return nil, false, false
		}
		b = b[n+m:]
		out = protowire.AppendTag(out, num, typ)
		switch {
		case fd.Kind() == protoreflect.StringKind && !utf8.Valid(v):
			out = protowire.AppendString(out, strings.ToValidUTF8(string(v), "\uFFFD"))
			changed = true
		case fd.Kind() == protoreflect.MessageKind:
			sub, c, ok := repairUTF8(nil, v, fd.Message(), depth+1)
			if !ok {
				return nil, false, false
			}
			out, changed = protowire.AppendBytes(out, sub), changed || c
		default:
			out = protowire.AppendBytes(out, v)
		}
	}
	return out, changed, true
}
