package check_test

import (
	"testing"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// Two descriptors of one call for the same client, hits_addend 100 each, on
// the api bucket of 150: the second sees the first's charge and is over the
// limit, the first is given back, with Redis as with the memory store.
func TestEnvoySameClientTwiceInOneCall(t *testing.T) {
	for _, store := range []struct {
		name   string
		memory bool
	}{{"redis", false}, {"memory", true}} {
		t.Run(store.name, func(t *testing.T) {
			rg := newRig(t, rigOpts{memory: store.memory})
			c, _ := startRLS(t, rg, edgeDomain())
			api := func() *rlcommon.RateLimitDescriptor {
				return withHits(desc("generic_key", "api", "remote_address", "203.0.113.7"), 100)
			}
			resp := c.call(t, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*rlcommon.RateLimitDescriptor{api(), api()}})
			want := []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT}
			if resp.GetOverallCode() != rlsv3.RateLimitResponse_OVER_LIMIT || !equalCodes(codesOf(resp), want) {
				t.Fatalf("100 + 100 on 150: overall %v statuses %v, want OVER_LIMIT %v", resp.GetOverallCode(), codesOf(resp), want)
			}
			if got := resp.GetStatuses()[0].GetLimitRemaining(); got != 150 {
				t.Errorf("the first descriptor reports %d left, want 150 (given back)", got)
			}
			resp = c.call(t, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*rlcommon.RateLimitDescriptor{api()}})
			if resp.GetOverallCode() != rlsv3.RateLimitResponse_OK || resp.GetStatuses()[0].GetLimitRemaining() != 50 {
				t.Errorf("100 alone afterwards: %v with %d left, want OK with 50", resp.GetOverallCode(), resp.GetStatuses()[0].GetLimitRemaining())
			}
		})
	}
}
