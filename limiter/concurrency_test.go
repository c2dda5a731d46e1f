package limiter_test

import (
	"strings"
	"testing"
	"time"

	"github.com/costgate/costgate/limiter"
)

func TestConcurrencyPolicyValidate(t *testing.T) {
	valid := limiter.Policy{Name: "streams", Algorithm: limiter.Concurrency, Limit: 5, Key: []string{"api_key"}}
	tests := []struct {
		name   string
		change func(p *limiter.Policy)
		want   string // "" for valid
	}{
		{"valid, lease defaulted", func(p *limiter.Policy) {}, ""},
		{"lease of a minute", func(p *limiter.Policy) { p.Lease = time.Minute }, ""},
		{"zero limit", func(p *limiter.Policy) { p.Limit = 0 }, "limit: must be at least 1"},
		{"a period", func(p *limiter.Policy) { p.Period = time.Minute }, "period: concurrency has no period"},
		{"a burst", func(p *limiter.Policy) { p.Burst = 10 }, "burst: only token_bucket and leaky_bucket"},
		{"negative lease", func(p *limiter.Policy) { p.Lease = -time.Second }, "lease: must not be negative"},
		{"lease under a second", func(p *limiter.Policy) { p.Lease = 500 * time.Millisecond }, "lease: must be at least 1s"},
		{"lease over a day", func(p *limiter.Policy) { p.Lease = 25 * time.Hour }, "lease: must be at most 24h"},
		{"lease in µs", func(p *limiter.Policy) { p.Lease = time.Second + time.Microsecond }, "whole number of milliseconds"},
		{"sync", func(p *limiter.Policy) { p.Sync = 100 * time.Millisecond }, "sync: concurrency stays exact"},
		{"local_cache", func(p *limiter.Policy) { p.LocalCache = true }, "local_cache: a concurrency place frees"},
		{"refund_status", func(p *limiter.Policy) { p.RefundStatus = []string{"2xx"} }, "refund_status: a concurrency hold is released"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := valid
			tc.change(&p)
			err := p.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Validate() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if got := valid.EffectiveLease(); got != limiter.DefaultLease {
		t.Errorf("EffectiveLease() = %s, want %s", got, limiter.DefaultLease)
	}
	rate := limiter.Policy{Name: "api", Algorithm: limiter.TokenBucket, Limit: 10, Period: time.Second, Lease: time.Minute}
	if err := rate.Validate(); err == nil || !strings.Contains(err.Error(), "lease: only concurrency takes a lease") {
		t.Errorf("a token bucket with a lease: Validate() = %v", err)
	}
}

func TestRefundStatus(t *testing.T) {
	p := limiter.Policy{Name: "login", Algorithm: limiter.SlidingLog, Limit: 10, Period: time.Minute}
	for _, tc := range []struct {
		statuses []string
		want     string
	}{
		{[]string{"2xx"}, ""},
		{[]string{"2xx", "404", "5XX"}, ""},
		{[]string{"1xx"}, `refund_status[0]: want a status class such as 2xx`},
		{[]string{"2xx", "600"}, `refund_status[1]: want a status class`},
		{[]string{"20"}, "want a status class"},
		{[]string{"2x0"}, "want a status class"},
		{[]string{"+20"}, "want a status class"},
		{[]string{"2xx", "2XX"}, `refund_status[1]: "2XX" listed twice`},
	} {
		q := p
		q.RefundStatus = tc.statuses
		err := q.Validate()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%v: Validate() = %v, want %q", tc.statuses, err, tc.want)
		}
	}
	q := p
	q.RefundStatus = []string{"2xx", "404"}
	for status, want := range map[int]bool{200: true, 204: true, 299: true, 300: false, 199: false, 404: true, 401: false, 0: false, 500: false} {
		if got := q.RefundsStatus(status); got != want {
			t.Errorf("RefundsStatus(%d) = %v, want %v", status, got, want)
		}
	}
	if !q.EndsWithResponse() || p.EndsWithResponse() {
		t.Error("EndsWithResponse: a policy with refund_status ends with its response, one without does not")
	}
}
