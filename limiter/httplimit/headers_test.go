package httplimit_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/header"
)

// The headers of real responses, allowed and denied, with one and two
// policies, parse with a strict RFC 8941 list parser and carry one item per
// applied policy, in the same order, with integer parameters.
func TestHeadersAreStructuredFields(t *testing.T) {
	s := newTestServer(t, serverOpts{})
	var responses []*http.Response
	for range 152 {
		responses = append(responses, s.do(request{path: "/api/products"}).Result())
	}
	for range 11 {
		responses = append(responses, s.do(request{method: "POST", path: "/login", body: `{"username":"erin"}`}).Result())
	}
	for i, res := range responses {
		pol, err := parseSFList(res.Header.Get("RateLimit-Policy"))
		if err != nil {
			t.Fatalf("response %d: RateLimit-Policy %q: %v", i, res.Header.Get("RateLimit-Policy"), err)
		}
		state, err := parseSFList(res.Header.Get("RateLimit"))
		if err != nil {
			t.Fatalf("response %d: RateLimit %q: %v", i, res.Header.Get("RateLimit"), err)
		}
		if len(pol) == 0 || len(pol) != len(state) {
			t.Fatalf("response %d: %d policy items, %d state items", i, len(pol), len(state))
		}
		for j := range pol {
			if pol[j].value != state[j].value {
				t.Errorf("response %d item %d: policy %v, state %v: not the same order", i, j, pol[j].value, state[j].value)
			}
			if _, ok := pol[j].value.(string); !ok {
				t.Errorf("response %d item %d: %v is not an sf-string", i, j, pol[j].value)
			}
			checkIntParams(t, pol[j], "q", "w")
			checkIntParams(t, state[j], "r", "t")
		}
		// X-RateLimit-Reset is a Unix time in whole seconds, not in the past.
		reset, err := strconv.ParseInt(res.Header.Get("X-RateLimit-Reset"), 10, 64)
		if err != nil || reset < s.clock.Now().Unix() {
			t.Errorf("response %d: X-RateLimit-Reset %q", i, res.Header.Get("X-RateLimit-Reset"))
		}
	}
	// The first API response: 149 left, full again in 60ms → t=1, reset now+1s.
	first := responses[0]
	if got := first.Header.Get("RateLimit"); got != `"api";r=149;t=1` {
		t.Errorf("first RateLimit = %q", got)
	}
	full := s.clock.Now().Add(60 * time.Millisecond)
	wantReset := full.Unix()
	if full.Nanosecond() > 0 {
		wantReset++ // rounded up: the quota is full again by then
	}
	if got, want := first.Header.Get("X-RateLimit-Reset"), strconv.FormatInt(wantReset, 10); got != want {
		t.Errorf("first X-RateLimit-Reset = %s, want %s", got, want)
	}
	// Login denied at the 11th: the smallest remaining of the two policies.
	last := responses[len(responses)-1]
	if last.StatusCode != http.StatusTooManyRequests || last.Header.Get("X-RateLimit-Remaining") != "0" || last.Header.Get("X-RateLimit-Limit") != "10" {
		t.Errorf("11th login: %d, X-RateLimit-Remaining %q, Limit %q", last.StatusCode, last.Header.Get("X-RateLimit-Remaining"), last.Header.Get("X-RateLimit-Limit"))
	}
}

func checkIntParams(t *testing.T, it sfItem, keys ...string) {
	t.Helper()
	if len(it.params) != len(keys) {
		t.Errorf("item %v: params %v, want %v", it.value, it.params, keys)
		return
	}
	for i, k := range keys {
		if it.params[i].key != k {
			t.Errorf("item %v: param %d is %q, want %q", it.value, i, it.params[i].key, k)
		}
		if n, ok := it.params[i].value.(int64); !ok || n < 0 {
			t.Errorf("item %v: %s=%v, want a non-negative integer", it.value, k, it.params[i].value)
		}
	}
}

func TestSFParserIsStrict(t *testing.T) {
	for _, bad := range []string{`;q=1`, `"api";=1`, `"api";q=1,`, `"api";Q=1`, `"api";q=1.5`, `"api";q=1234567890123456`, `"api`, `"a\x"`, `"api" "b"`} {
		if _, err := parseSFList(bad); err == nil {
			t.Errorf("parseSFList(%q) accepted", bad)
		}
	}
	if _, err := parseSFList(`"a";q=1;w=2, "b\"c";r=0;t=9`); err != nil {
		t.Errorf("valid list refused: %v", err)
	}
}

// A policy name that needs escaping still makes valid structured fields.
func TestHeadersEscapePolicyNames(t *testing.T) {
	p := &limiter.Policy{Name: `we"ird\name`, Algorithm: limiter.FixedWindow, Limit: 5, Period: time.Minute}
	h := http.Header{}
	header.Set(h, time.Unix(1000, 0), []limiter.Decision{{Allowed: true, Limit: 5, Remaining: 4, ResetAfter: 30 * time.Second, Policy: p}})
	items, err := parseSFList(h.Get("RateLimit-Policy"))
	if err != nil || len(items) != 1 || items[0].value != p.Name {
		t.Fatalf("RateLimit-Policy %q: %v %+v", h.Get("RateLimit-Policy"), err, items)
	}
	if got := h.Get("X-RateLimit-Reset"); got != "1030" {
		t.Errorf("X-RateLimit-Reset = %q, want 1030", got)
	}
}
