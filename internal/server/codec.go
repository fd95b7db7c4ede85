package server

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/textcut"
)

// lenientCodec is gRPC's protobuf codec, except for messages whose string fields hold
// text that is not UTF-8. protobuf refuses to decode such a message, and gRPC then ends
// the RPC with INTERNAL, a status that blames toolsd for the client's bytes. When a
// message fails to decode and its text is the reason, it is decoded again with each bad
// byte sequence replaced by U+FFFD:
//   - a provider's stream message is kept so repaired (as the Go SDK repairs it before
//     sending): gRPC would end the stream, and one bad tool description would take every
//     call of the provider with it. The registry then judges the repaired text like any
//     other (a tool name with U+FFFD in it is refused on its own). Results and progress
//     carry their payloads as bytes, which normalization checks.
//   - every other message (agents', operators', hooks') is marked with the path of its
//     first bad field, and the interceptors ([refuseBadText]) refuse it with
//     INVALID_ARGUMENT naming that field before any handler sees it.
//
// A message that is not protobuf at all (or not of its type), anyone's, is emptied and
// marked the same way, and refused with INVALID_ARGUMENT (BAD_REQUEST).
type lenientCodec struct{ encoding.CodecV2 }

func newLenientCodec() lenientCodec {
	return lenientCodec{encoding.GetCodecV2(grpcproto.Name)}
}

// badTextField is the unknown field that marks a repaired message for refusal; its
// value is the path of the first field that was not UTF-8. malformedField marks an
// emptied message that was not protobuf at all; its value is the decode error. A client
// that sends either itself only has its own message refused.
const (
	badTextField   = protowire.MaxValidNumber
	malformedField = protowire.MaxValidNumber - 1
)

// Unmarshal implements [encoding.CodecV2].
func (c lenientCodec) Unmarshal(data mem.BufferSlice, v any) error {
	err := c.CodecV2.Unmarshal(data, v)
	if err == nil {
		return nil
	}
	m, ok := v.(proto.Message)
	if !ok {
		return err
	}
	fixed, bad, ok := repairUTF8(nil, data.Materialize(), m.ProtoReflect().Descriptor(), "", 0)
	if !ok || bad == "" {
		return markMalformed(m, err)
	}
	proto.Reset(m)
	if uerr := proto.Unmarshal(fixed, m); uerr != nil {
		return markMalformed(m, uerr)
	}
	if _, provider := v.(*toolsdv1.ProviderServiceConnectRequest); !provider {
		markWith(m, badTextField, bad)
	}
	return nil
}

// markMalformed empties m, which could not be decoded for err (not protobuf, or not
// this message's), and marks it for refusal: gRPC would end the RPC with INTERNAL, a
// status that blames toolsd for the client's bytes, and toolsd would log it as its own
// error.
func markMalformed(m proto.Message, err error) error {
	proto.Reset(m)
	markWith(m, malformedField, textcut.Ellipsis(err.Error(), textcut.MaxLoggedID))
	return nil
}

// markWith adds the unknown field num with value to m.
func markWith(m proto.Message, num protowire.Number, value string) {
	r := m.ProtoReflect()
	r.SetUnknown(protowire.AppendString(protowire.AppendTag(r.GetUnknown(), num, protowire.BytesType), value))
}

// refused returns why the codec marked m for refusal (bad text or not protobuf), nil
// when it did not. Every received message is checked, in one pass over its unknown
// fields (none, for a message the codec decoded as is).
func refused(m any) error {
	num, v := codecMark(m)
	switch num {
	case badTextField:
		return badTextCause(v)
	case malformedField:
		return fmt.Errorf("%w: the message could not be decoded (%s)", errBadRequest, v)
	}
	return nil
}

// codecMark returns the codec's mark on m (its field number and value), or 0 when m has none.
func codecMark(m any) (protowire.Number, string) {
	pm, ok := m.(proto.Message)
	if !ok {
		return 0, ""
	}
	u := pm.ProtoReflect().GetUnknown()
	for len(u) > 0 {
		n, typ, l := protowire.ConsumeTag(u)
		if l < 0 {
			return 0, ""
		}
		if (n == badTextField || n == malformedField) && typ == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(u[l:])
			return n, string(v)
		}
		k := protowire.ConsumeFieldValue(n, typ, u[l:])
		if k < 0 {
			return 0, ""
		}
		u = u[l+k:]
	}
	return 0, ""
}

// badTextCause is why a message the codec marked at path is refused. The path is cut: a
// client may mark a message itself, with a path of any size the request allows, and the
// cause reaches providers as their calls' cancel reason (see [onRefusal]).
func badTextCause(path string) error {
	return badField(textcut.Ellipsis(path, textcut.MaxLoggedID), "is not valid UTF-8 (protobuf strings must be)")
}

// refuseBadText returns the interceptors that refuse every message the codec marked:
// a unary request, and each message a stream receives.
func refuseBadText(log *zap.Logger) (grpc.UnaryServerInterceptor, grpc.StreamServerInterceptor) {
	unary := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if cause := refused(req); cause != nil {
			return nil, toStatus(log, cause)
		}
		return handler(ctx, req)
	}
	stream := func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		r := &refusal{}
		return handler(srv, textCheckedStream{ss, log, context.WithValue(ss.Context(), refusalKey{}, r), r})
	}
	return unary, stream
}

// refusalKey is the context key of a checked stream's [refusal].
type refusalKey struct{}

// refusal is what a stream's handler asked to be told of a refused message (see
// [onRefusal]).
type refusal struct{ before func(cause error) }

// onRefusal has fn called with the cause when a message that ctx's stream receives is
// refused for its text, before the refusal ends the stream: ending it ends the stream's
// context, so a handler that cancels work under that context with a cause records the
// cause first, as it does for a message it refuses itself. Call it before the stream's
// reader starts; on a stream that is not checked it does nothing.
func onRefusal(ctx context.Context, fn func(cause error)) {
	if r, ok := ctx.Value(refusalKey{}).(*refusal); ok {
		r.before = fn
	}
}

// textCheckedStream refuses each received message the codec marked. As gRPC does for a
// message it cannot decode, the refusal ends the stream with its status at once: a
// handler that reads on its own goroutine (ExecuteBatch's reader, whose Recv error
// cancels the batch) would otherwise end the stream with a status of its own, and the
// client would not learn that its message was refused.
type textCheckedStream struct {
	grpc.ServerStream
	log     *zap.Logger
	ctx     context.Context // the stream's, carrying refusal
	refusal *refusal
}

func (s textCheckedStream) Context() context.Context { return s.ctx }

func (s textCheckedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	cause := refused(m)
	if cause == nil {
		return nil
	}
	if s.refusal.before != nil {
		s.refusal.before(cause)
	}
	err := toStatus(s.log, cause)
	if w, ok := grpc.ServerTransportStreamFromContext(s.Context()).(statusWriter); ok {
		_ = w.WriteStatus(status.Convert(err))
	}
	return err
}

// maxRepairDepth bounds the nesting repairUTF8 follows; toolsd's messages are shallow.
const maxRepairDepth = 32

// repairUTF8 appends to out the message b (of type md) with every string field's
// invalid UTF-8 replaced by U+FFFD, nested messages included. It returns the path of
// the first field it repaired (under prefix, e.g. "batch.calls[1].call_id"; "" when it
// repaired nothing), and false for ok when b is not well-formed.
func repairUTF8(out, b []byte, md protoreflect.MessageDescriptor, prefix string, depth int) (_ []byte, bad string, ok bool) {
	if depth > maxRepairDepth {
		return nil, "", false
	}
	var seen map[protowire.Number]int // occurrences of repeated fields, for their index
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, "", false
		}
		fd := md.Fields().ByNumber(num)
		if typ != protowire.BytesType || fd == nil {
			m := protowire.ConsumeFieldValue(num, typ, b[n:])
			if m < 0 {
				return nil, "", false
			}
			out, b = append(out, b[:n+m]...), b[n+m:]
			continue
		}
		v, m := protowire.ConsumeBytes(b[n:])
		if m < 0 {
			return nil, "", false
		}
		b = b[n+m:]
		out = protowire.AppendTag(out, num, typ)
		path := func() string {
			p := prefix + string(fd.Name())
			if fd.IsList() {
				p += "[" + strconv.Itoa(seen[num]) + "]"
			}
			return p
		}
		switch {
		case fd.Kind() == protoreflect.StringKind && !utf8.Valid(v):
			out = protowire.AppendString(out, strings.ToValidUTF8(string(v), "\uFFFD"))
			if bad == "" {
				bad = path()
			}
		case fd.Kind() == protoreflect.MessageKind:
			sub, subBad, ok := repairUTF8(nil, v, fd.Message(), path()+".", depth+1)
			if !ok {
				return nil, "", false
			}
			out = protowire.AppendBytes(out, sub)
			if bad == "" {
				bad = subBad
			}
		default:
			out = protowire.AppendBytes(out, v)
		}
		if fd.IsList() {
			if seen == nil {
				seen = make(map[protowire.Number]int)
			}
			seen[num]++
		}
	}
	return out, bad, true
}
