package limiter_test

import (
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"testing"
	"time"

	"github.com/costgate/costgate/limiter"
)

func TestPolicyValidate(t *testing.T) {
	valid := limiter.Policy{Name: "api", Algorithm: limiter.TokenBucket, Limit: 1000, Period: time.Minute, Burst: 150}
	tests := []struct {
		name   string
		change func(p *limiter.Policy)
		want   string // "" for valid
	}{
		{"valid", func(p *limiter.Policy) {}, ""},
		{"no name", func(p *limiter.Policy) { p.Name = "" }, "name: is empty"},
		{"name with a space", func(p *limiter.Policy) { p.Name = "my api" }, "letters, digits"},
		{"repeated key part", func(p *limiter.Policy) { p.Key = []string{"ip", "ip"} }, `key[1]: key part "ip" repeated`},
		{"no algorithm", func(p *limiter.Policy) { p.Algorithm = "" }, `algorithm: missing`},
		{"unknown algorithm", func(p *limiter.Policy) { p.Algorithm = "gcra" }, `unknown algorithm "gcra"`},
		{"zero limit", func(p *limiter.Policy) { p.Limit = 0 }, "limit: must be at least 1, got 0"},
		{"negative limit", func(p *limiter.Policy) { p.Limit = -5 }, "limit: must be at least 1"},
		{"zero period", func(p *limiter.Policy) { p.Period = 0 }, "period: must be positive"},
		{"negative period", func(p *limiter.Policy) { p.Period = -time.Second }, "period: must be positive, got -1s"},
		{"sub-microsecond period", func(p *limiter.Policy) { p.Period = 1500 * time.Nanosecond }, "whole number of microseconds"},
		{"period over a year", func(p *limiter.Policy) { p.Period = 400 * 24 * time.Hour }, "at most 366 days"},
		{"negative burst", func(p *limiter.Policy) { p.Burst = -1 }, "burst: must not be negative"},
		{"burst on a window", func(p *limiter.Policy) { p.Algorithm = limiter.SlidingLog }, "only token_bucket and leaky_bucket take a burst"},
		{"unknown mode", func(p *limiter.Policy) { p.Mode = "dry" }, `unknown mode "dry"`},
		{"unknown fail mode", func(p *limiter.Policy) { p.OnStoreError = "retry" }, `unknown value "retry"`},
		// 150 × 60 days in µs = 7.8e14: fine; 1e6 × 1 day in µs = 8.64e16 > 2^53
		{"scaled state past 2^53", func(p *limiter.Policy) { p.Burst = 1_000_000; p.Period = 24 * time.Hour }, "exceeds 2^53"},
		{"long but exact", func(p *limiter.Policy) { p.Period = 60 * 24 * time.Hour }, ""},
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
			case tc.want != "" && p.Name != "" && !strings.Contains(err.Error(), `"`+p.Name+`"`):
				t.Errorf("Validate() = %v, want the policy name in it", err)
			}
		})
	}
}

func TestCapacityDefaults(t *testing.T) {
	tests := []struct {
		p    limiter.Policy
		want int64
	}{
		{limiter.Policy{Algorithm: limiter.TokenBucket, Limit: 50}, 50},
		{limiter.Policy{Algorithm: limiter.TokenBucket, Limit: 50, Burst: 1000}, 1000},
		{limiter.Policy{Algorithm: limiter.LeakyBucket, Limit: 10, Burst: 3}, 3},
		{limiter.Policy{Algorithm: limiter.SlidingLog, Limit: 10}, 10},
		{limiter.Policy{Algorithm: limiter.FixedWindow, Limit: 7}, 7},
	}
	for _, tc := range tests {
		if got := tc.p.Capacity(); got != tc.want {
			t.Errorf("%s limit %d burst %d: Capacity() = %d, want %d", tc.p.Algorithm, tc.p.Limit, tc.p.Burst, got, tc.want)
		}
	}
}

// Fixed windows start at a per-key offset so that clients do not all reset
// at once: over many keys the offsets spread across the period.
func TestWindowOffsetsSpread(t *testing.T) {
	p := limiter.Policy{Name: "fw", Algorithm: limiter.FixedWindow, Limit: 10, Period: time.Minute}
	const buckets = 10
	var counts [buckets]int
	for i := range 10000 {
		off := p.WindowOffset(fmt.Sprint("client-", i))
		if off < 0 || off >= p.PeriodMicros() {
			t.Fatalf("offset %d outside [0, %d)", off, p.PeriodMicros())
		}
		if again := p.WindowOffset(fmt.Sprint("client-", i)); again != off {
			t.Fatalf("offset not stable: %d then %d", off, again)
		}
		counts[off*buckets/p.PeriodMicros()]++
	}
	for i, c := range counts {
		if c < 800 || c > 1200 { // 1000 expected in each tenth
			t.Errorf("tenth %d of the period holds %d of 10000 offsets, want about 1000", i, c)
		}
	}
}

// Callers map a refused field onto their own names (the config onto
// policies.NAME.FIELD) through the typed error, never its text.
func TestPolicyErrorIsTyped(t *testing.T) {
	p := limiter.Policy{Name: "api", Algorithm: limiter.TokenBucket, Limit: 0, Period: time.Minute}
	var pe *limiter.PolicyError
	if err := p.Validate(); !errors.As(err, &pe) {
		t.Fatalf("Validate() = %v, want a *PolicyError", err)
	}
	if pe.Policy != "api" || pe.Field != "limit" {
		t.Errorf("PolicyError = %+v, want policy api, field limit", pe)
	}
}

// The window offset is FNV-1a of name NUL key, and costs no allocation.
func TestWindowOffsetIsFNV(t *testing.T) {
	p := limiter.Policy{Name: "fw", Algorithm: limiter.FixedWindow, Limit: 10, Period: time.Minute}
	for _, key := range []string{"", "client-1", "a:b:c"} {
		h := fnv.New64a()
		h.Write([]byte(p.Name + "\x00" + key))
		if got, want := p.WindowOffset(key), int64(h.Sum64()%uint64(p.PeriodMicros())); got != want {
			t.Errorf("WindowOffset(%q) = %d, want %d", key, got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { p.WindowOffset("client-1") }); n != 0 {
		t.Errorf("WindowOffset allocates %v times", n)
	}
}

// Sync is refused, with its reason, where local decisions cannot keep the
// algorithm's meaning, and outside (0, period].
func TestPolicyValidateSync(t *testing.T) {
	base := func(alg limiter.Algorithm, sync time.Duration) *limiter.Policy {
		return &limiter.Policy{Name: "p", Algorithm: alg, Limit: 10, Period: time.Second, Sync: sync}
	}
	for _, tc := range []struct {
		name string
		p    *limiter.Policy
		want string // "" for valid
	}{
		{"token_bucket", base(limiter.TokenBucket, 100*time.Millisecond), ""},
		{"fixed_window", base(limiter.FixedWindow, time.Second), ""},
		{"sliding_window", base(limiter.SlidingWindow, time.Millisecond), ""},
		{"sliding_log", base(limiter.SlidingLog, 100*time.Millisecond), "sliding_log stays exact"},
		{"leaky_bucket", base(limiter.LeakyBucket, 100*time.Millisecond), "leaky_bucket shapes traffic"},
		{"negative", base(limiter.TokenBucket, -time.Second), "must be positive"},
		{"under a millisecond", base(limiter.TokenBucket, time.Microsecond), "at least 1ms"},
		{"over the period", base(limiter.TokenBucket, 2*time.Second), "at most the period"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			var pe *limiter.PolicyError
			if !errors.As(err, &pe) || pe.Field != "sync" || !strings.Contains(pe.Reason, tc.want) {
				t.Fatalf("Validate() = %v, want a sync error saying %q", err, tc.want)
			}
		})
	}
}
