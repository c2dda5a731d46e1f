package check

import (
	"errors"

	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Codec returns the gRPC codec the rate-limit service must be served with
// (grpc.ForceServerCodecV2): protobuf, except that a string field that is
// not UTF-8 is read as the bytes it holds instead of failing the call.
//
// Envoy copies a request header into a descriptor entry as it came (HTTP
// allows the bytes 0x80-0xFF), and protobuf-go refuses such a string: the
// call would fail, and Envoy with failure_mode_deny off would let the
// request through unlimited. Read as bytes, the value is judged as the HTTP
// doors judge it: not an API key, not a username, a header hashed as any.
func Codec() encoding.CodecV2 {
	return lenientCodec{encoding.GetCodecV2(grpcproto.Name)}
}

type lenientCodec struct{ strict encoding.CodecV2 }

func (c lenientCodec) Name() string { return grpcproto.Name }

func (c lenientCodec) Marshal(v any) (mem.BufferSlice, error) { return c.strict.Marshal(v) }

func (c lenientCodec) Unmarshal(data mem.BufferSlice, v any) error {
	err := c.strict.Unmarshal(data, v)
	m, ok := v.(proto.Message)
	if err == nil || !ok {
		return err
	}
	proto.Reset(m)
	if unmarshalLenient(data.Materialize(), m.ProtoReflect(), 0) != nil {
		proto.Reset(m)
		return err // malformed for another reason: protobuf's own error says why
	}
	return nil
}

// maxNesting bounds the messages within messages read leniently.
const maxNesting = 100

var merge = proto.UnmarshalOptions{Merge: true}

// unmarshalLenient decodes b into m as proto.Unmarshal does, but sets
// string fields from their bytes unchecked. Every other field is decoded
// by protobuf itself, one at a time.
func unmarshalLenient(b []byte, m protoreflect.Message, depth int) error {
	if depth > maxNesting {
		return errors.New("messages nested too deep")
	}
	fields := m.Descriptor().Fields()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		size := protowire.ConsumeFieldValue(num, typ, b[n:])
		if size < 0 {
			return protowire.ParseError(size)
		}
		field := b[:n+size]
		b = b[n+size:]
		fd := fields.ByNumber(num)
		if fd == nil || typ != protowire.BytesType || fd.IsMap() ||
			(fd.Kind() != protoreflect.StringKind && fd.Kind() != protoreflect.MessageKind) {
			if err := merge.Unmarshal(field, m.Interface()); err != nil {
				return err
			}
			continue
		}
		raw, _ := protowire.ConsumeBytes(field[n:])
		if fd.Kind() == protoreflect.StringKind {
			v := protoreflect.ValueOfString(string(raw))
			if fd.IsList() {
				m.Mutable(fd).List().Append(v)
			} else {
				m.Set(fd, v)
			}
			continue
		}
		if !fd.IsList() {
			if err := unmarshalLenient(raw, m.Mutable(fd).Message(), depth+1); err != nil {
				return err
			}
			continue
		}
		list := m.Mutable(fd).List()
		elem := list.NewElement()
		if err := unmarshalLenient(raw, elem.Message(), depth+1); err != nil {
			return err
		}
		list.Append(elem)
	}
	return nil
}
