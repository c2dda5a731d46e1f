package server

import (
	"context"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// rawCodec sends a request's bytes as they are: Envoy's encoder sends a
// header that is not UTF-8 as it came, protobuf-go's refuses to.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }
func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(v.([]byte))}, nil
}
func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	return proto.Unmarshal(data.Materialize(), v.(proto.Message))
}

// The gRPC server reads a descriptor value that is not UTF-8 as a value:
// an error would let Envoy (failure_mode_deny off) pass the request unlimited.
func TestGRPCServerTakesNonUTF8Values(t *testing.T) {
	srv, _ := newServer(t, limits+`graphql: {path: ""}
grpc_listen: "127.0.0.1:0"
envoy: {domains: {edge: [{key: remote_address, part: ip, policies: [api], descriptors: [{key: api_key, part: api_key, policies: [api]}]}]}}
`)
	conn := dialGRPC(t, srv)
	entry := func(k, v string) []byte {
		var e []byte
		e = protowire.AppendTag(e, 1, protowire.BytesType)
		e = protowire.AppendString(e, k)
		e = protowire.AppendTag(e, 2, protowire.BytesType)
		return protowire.AppendString(e, v)
	}
	var d, req []byte
	d = protowire.AppendTag(d, 1, protowire.BytesType)
	d = protowire.AppendBytes(d, entry("remote_address", "203.0.113.7"))
	d = protowire.AppendTag(d, 1, protowire.BytesType)
	d = protowire.AppendBytes(d, entry("api_key", "\xff\xfe"))
	req = protowire.AppendTag(req, 1, protowire.BytesType)
	req = protowire.AppendString(req, "edge")
	req = protowire.AppendTag(req, 2, protowire.BytesType)
	req = protowire.AppendBytes(req, d)
	for i, want := range []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		resp := &rlsv3.RateLimitResponse{}
		err := conn.Invoke(ctx, rlsv3.RateLimitService_ShouldRateLimit_FullMethodName, req, resp, grpc.ForceCodecV2(rawCodec{}))
		cancel()
		if err != nil || resp.GetOverallCode() != want {
			t.Fatalf("call %d: %v %v, want %v (the address's limit of 2)", i, resp.GetOverallCode(), err, want)
		}
	}
}
