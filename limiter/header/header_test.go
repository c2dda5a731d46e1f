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

// A concurrency policy counts requests in flight: its RateLimit-Policy
// item names the draft's quota unit instead of a window, its RateLimit item
// has a t only on a denial, and X-RateLimit-* describe it only when it
// denies or stands alone, never in place of a rate policy's budget.
func TestSetConcurrency(t *testing.T) {
	api := &limiter.Policy{Name: "api", Algorithm: limiter.TokenBucket, Limit: 1000, Period: time.Minute, Burst: 150}
	streams := &limiter.Policy{Name: "streams", Algorithm: limiter.Concurrency, Limit: 5}
	now := time.Unix(1000, 0)
	for _, tc := range []struct {
		name      string
		decisions []limiter.Decision
		want      map[string]string
	}{
		{"granted beside a rate", []limiter.Decision{
			{Allowed: true, Limit: 150, Remaining: 149, ResetAfter: 60 * time.Millisecond, Policy: api},
			{Allowed: true, Limit: 5, Remaining: 4, ResetAfter: 30 * time.Second, Policy: streams},
		}, map[string]string{
			"X-Ratelimit-Limit": "150", "X-Ratelimit-Remaining": "149", "X-Ratelimit-Reset": "1001",
			"Ratelimit-Policy": `"api";q=150;w=9, "streams";q=5;qu="concurrent-requests"`,
			"Ratelimit":        `"api";r=149;t=1, "streams";r=4`,
		}},
		{"denying beside a rate", []limiter.Decision{
			{Allowed: true, Limit: 150, Remaining: 149, ResetAfter: 60 * time.Millisecond, Policy: api},
			{Allowed: false, Limit: 5, Remaining: 0, RetryAfter: time.Second, ResetAfter: 20 * time.Second, Policy: streams},
		}, map[string]string{
			"X-Ratelimit-Limit": "5", "X-Ratelimit-Remaining": "0", "X-Ratelimit-Reset": "1020",
			"Ratelimit": `"api";r=149;t=1, "streams";r=0;t=1`,
		}},
		{"alone", []limiter.Decision{
			{Allowed: true, Limit: 5, Remaining: 0, ResetAfter: 30 * time.Second, Policy: streams},
		}, map[string]string{
			"X-Ratelimit-Limit": "5", "X-Ratelimit-Remaining": "0",
			"Ratelimit-Policy": `"streams";q=5;qu="concurrent-requests"`, "Ratelimit": `"streams";r=0`,
		}},
	} {
		h := http.Header{}
		header.Set(h, now, tc.decisions)
		for k, v := range tc.want {
			if got := h.Get(k); got != v {
				t.Errorf("%s: %s = %q, want %q", tc.name, k, got, v)
			}
		}
	}
}
