package check_test

import (
	"bytes"
	"testing"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/costgate/costgate/internal/check"
)

// The codec reads every field protobuf would, strings that are not UTF-8
// as their bytes, and still refuses what is not protobuf at all.
func TestCodecReadsNonUTF8Strings(t *testing.T) {
	build := func(value string) *rlsv3.RateLimitRequest {
		return &rlsv3.RateLimitRequest{Domain: "edge", HitsAddend: 3, Descriptors: []*rlcommon.RateLimitDescriptor{
			{Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "203.0.113.7"}, {Key: "api_key", Value: value}},
				HitsAddend: wrapperspb.UInt64(5),
				Limit:      &rlcommon.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 7}},
			{Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: "generic_key", Value: "login"}}},
		}}
	}
	wire, err := proto.Marshal(build("PLACE"))
	if err != nil {
		t.Fatal(err)
	}
	wire = bytes.Replace(wire, []byte("PLACE"), []byte("\xff\xfeab\x80"), 1)
	got := &rlsv3.RateLimitRequest{}
	if err := check.Codec().Unmarshal(mem.BufferSlice{mem.SliceBuffer(wire)}, got); err != nil {
		t.Fatal(err)
	}
	if want := build("\xff\xfeab\x80"); !proto.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	// A valid message takes protobuf's own path, and comes out the same.
	wire, _ = proto.Marshal(build("demo-free"))
	got = &rlsv3.RateLimitRequest{}
	if err := check.Codec().Unmarshal(mem.BufferSlice{mem.SliceBuffer(wire)}, got); err != nil || !proto.Equal(got, build("demo-free")) {
		t.Errorf("a valid message: %v, %v", got, err)
	}
	if err := check.Codec().Unmarshal(mem.BufferSlice{mem.SliceBuffer(wire[:len(wire)-3])}, &rlsv3.RateLimitRequest{}); err == nil {
		t.Error("a truncated message was read")
	}
}
