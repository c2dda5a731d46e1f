package header_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/header"
)

// Two policies: one item each in the IETF headers, in order; X-RateLimit-*
// from the one with the least left; a shadow policy and a store error left
// out; nothing at all when nothing is left.
func TestSet(t *testing.T) {
	api := &limiter.Policy{Name: "api", Algorithm: limiter.TokenBucket, Limit: 1000, Period: time.Minute, Burst: 150}
	login := &limiter.Policy{Name: "login", Algorithm: limiter.SlidingLog, Limit: 10, Period: 5 * time.Minute}
	shadow := &limiter.Policy{Name: "shadow", Algorithm: limiter.FixedWindow, Limit: 5, Period: time.Minute, Mode: limiter.Shadow}
	now := time.Unix(1000, 0)
	h := http.Header{}
	header.Set(h, now, []limiter.Decision{
		{Allowed: true, Limit: 150, Remaining: 149, ResetAfter: 60 * time.Millisecond, Policy: api},
		{Allowed: true, Limit: 5, Remaining: 0, Policy: shadow},
		{Allowed: false, Limit: 10, Remaining: 0, RetryAfter: 1500 * time.Millisecond, ResetAfter: 5 * time.Minute, Policy: login},
	})
	want := map[string]string{
		"X-Ratelimit-Limit":     "10",
		"X-Ratelimit-Remaining": "0",
		"X-Ratelimit-Reset":     "1300",
		"Ratelimit-Policy":      `"api";q=150;w=9, "login";q=10;w=300`,
		"Ratelimit":             `"api";r=149;t=1, "login";r=0;t=2`,
	}
	for k, v := range want {
		if got := h.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	empty := http.Header{}
	header.Set(empty, now, []limiter.Decision{{Allowed: true, Policy: shadow}, {Allowed: true, Policy: api, Err: http.ErrAbortHandler, Outcome: limiter.ErrorAllowed}})
	if len(empty) != 0 {
		t.Errorf("headers for shadow and failed decisions: %v", empty)
	}
	if allocs := testing.AllocsPerRun(100, func() {
		header.Set(http.Header{}, now, []limiter.Decision{{Allowed: true, Limit: 150, Remaining: 149, Policy: api}})
	}); allocs > 3 {
		t.Errorf("Set allocates %v times, want at most 3 (the header map, one string, one slice)", allocs)
	}
}
