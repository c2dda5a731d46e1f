package limiter_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/costgate/costgate/internal/syncbuf"
	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/memstore"
)

// failing is a store that fails every call, as a Redis outage would.
type failing struct{}

var errDown = errors.New("store down")

func (failing) Take(context.Context, *limiter.Policy, string, int64) (limiter.Decision, error) {
	return limiter.Decision{}, errDown
}
func (failing) Undo(context.Context, *limiter.Policy, string, limiter.Receipt) (limiter.Decision, error) {
	return limiter.Decision{}, errDown
}

// counting counts the calls that reach a store.
type counting struct {
	limiter.Store
	takes atomic.Int64
}

func (c *counting) Take(ctx context.Context, p *limiter.Policy, key string, cost int64) (limiter.Decision, error) {
	c.takes.Add(1)
	return c.Store.Take(ctx, p, key, cost)
}

// With on_store_error: local the decision carries the policy that decided
// (limit/N, burst/N, the same name), so that X-RateLimit-Limit and
// RateLimit-Policy, both built from it, agree.
func TestLocalFallbackDecisionNamesTheLocalPolicy(t *testing.T) {
	lim := newLimiter(t, failing{}, limiter.WithLocalFallback(memstore.New(nil), 3))
	p := policy(t, limiter.Policy{Name: "api", Algorithm: limiter.TokenBucket, Limit: 1000, Period: time.Minute, Burst: 150, OnStoreError: limiter.FailLocal})
	d := lim.Allow(context.Background(), p, "k", 1)
	if d.Outcome != limiter.ErrorLocal || !d.Allowed {
		t.Fatalf("decision %+v, want error_local, allowed", d)
	}
	if got, want := d.Limit, int64(50); got != want {
		t.Errorf("Limit %d, want %d (burst 150 / 3 gateways)", got, want)
	}
	if d.Policy.Name != "api" || d.Policy.Capacity() != d.Limit || d.Policy.Limit != 333 {
		t.Errorf("Policy %+v: want name api, burst %d, limit 333", d.Policy, d.Limit)
	}
	if d2 := lim.Allow(context.Background(), p, "k", 1); d2.Policy != d.Policy {
		t.Error("a new local policy for every check: want one per shared policy")
	}
	if p.Burst != 150 || p.Limit != 1000 {
		t.Errorf("the shared policy changed: %+v", p)
	}
}

// on_store_error: local decides a check's requests in order on the local
// store too: a key named twice sees its own charges, and a denial undoes
// them all, each report telling the state that stays.
func TestLocalFallbackSameKeyInOrder(t *testing.T) {
	lim := newLimiter(t, failing{}, limiter.WithLocalFallback(memstore.New(nil), 1))
	p := policy(t, limiter.Policy{Name: "api", Algorithm: limiter.TokenBucket, Limit: 150, Period: time.Hour, OnStoreError: limiter.FailLocal})
	tight := policy(t, limiter.Policy{Name: "tight", Algorithm: limiter.TokenBucket, Limit: 1, Period: time.Hour, OnStoreError: limiter.FailLocal})
	ctx := context.Background()
	ds, ok := lim.AllowAll(ctx, []limiter.Request{{Policy: p, Key: "k", Cost: 50}, {Policy: p, Key: "k", Cost: 50}, {Policy: tight, Key: "k", Cost: 5}})
	if ok || len(ds) != 3 || ds[2].Allowed || ds[2].Outcome != limiter.ErrorLocal {
		t.Fatalf("50 + 50 + a cost over capacity: %v %+v, want the third denied locally", ok, ds)
	}
	for i, d := range ds[:2] {
		if !d.Allowed || d.Outcome != limiter.ErrorLocal || d.Remaining != 150 || d.Receipt.Cost != 0 {
			t.Errorf("decision %d: %+v, want allowed locally, undone, 150 left", i, d)
		}
	}
	ds, ok = lim.AllowAll(ctx, []limiter.Request{{Policy: p, Key: "k", Cost: 100}, {Policy: p, Key: "k", Cost: 100}})
	if ok || len(ds) != 2 || ds[1].Allowed || ds[1].Remaining != 50 || ds[0].Remaining != 150 {
		t.Fatalf("100 + 100 on 150: %v %+v, want the second denied with 50 left, the first undone", ok, ds)
	}
	if d := lim.Allow(ctx, p, "k", 150); !d.Allowed {
		t.Errorf("150 alone afterwards: %+v, want allowed (nothing stayed charged)", d)
	}
}

// A store outage at a high request rate writes at most one line per policy
// per second, and each line says how many it stands for.
func TestStoreErrorLogsAreRateLimited(t *testing.T) {
	var buf syncbuf.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, nil))
	lim := newLimiter(t, failing{}, limiter.WithLogger(logger))
	a := policy(t, limiter.Policy{Name: "a", Algorithm: limiter.TokenBucket, Limit: 10, Period: time.Second})
	b := policy(t, limiter.Policy{Name: "b", Algorithm: limiter.TokenBucket, Limit: 10, Period: time.Second, OnStoreError: limiter.FailDeny})
	start := time.Now()
	requests := 0
	for time.Since(start) < 2500*time.Millisecond {
		lim.Allow(context.Background(), a, "k", 1)
		lim.Allow(context.Background(), b, "k", 1)
		requests++
		time.Sleep(200 * time.Microsecond)
	}
	elapsed := time.Since(start)
	per := map[string]int{}
	var suppressed int
	for _, line := range buf.Lines() {
		for _, name := range []string{"a", "b"} {
			if strings.Contains(line, "policy="+name+" ") {
				per[name]++
			}
		}
		if !strings.Contains(line, "suppressed=") {
			t.Errorf("line without the suppressed count: %s", line)
		}
		var n int
		if i := strings.Index(line, "suppressed="); i >= 0 {
			for _, c := range line[i+len("suppressed="):] {
				if c < '0' || c > '9' {
					break
				}
				n = n*10 + int(c-'0')
			}
		}
		suppressed += n
	}
	maxLines := int(elapsed/time.Second) + 1
	for _, name := range []string{"a", "b"} {
		if per[name] < 1 || per[name] > maxLines {
			t.Errorf("policy %s: %d lines in %s, want 1..%d", name, per[name], elapsed, maxLines)
		}
	}
	// Every check but those on the lines was counted as suppressed, except
	// the ones after the last line (counted on the next one).
	if logged := per["a"] + per["b"]; suppressed+logged > 2*requests || suppressed < requests/2 {
		t.Errorf("%d suppressed + %d lines for %d failed checks", suppressed, logged, 2*requests)
	}
	t.Logf("%d failed checks in %s: %d lines, %d suppressed", 2*requests, elapsed.Round(time.Millisecond), per["a"]+per["b"], suppressed)
}

// local_cache: a denied key is denied again without a round trip while the
// store would deny it, only for a cost at least the denied one, and
// forgotten on a refund.
func TestLocalCacheDeniesWithoutARoundTrip(t *testing.T) {
	store := &counting{Store: remoteMem{memstore.New(nil)}}
	lim := newLimiter(t, store)
	p := policy(t, limiter.Policy{Name: "hot", Algorithm: limiter.TokenBucket, Limit: 10, Period: time.Hour, LocalCache: true})
	ctx := context.Background()
	for range 10 {
		if d := lim.Allow(ctx, p, "k", 1); !d.Allowed {
			t.Fatalf("denied within the limit: %+v", d)
		}
	}
	first := lim.Allow(ctx, p, "k", 2)
	if first.Allowed || first.Outcome != limiter.Denied || first.RetryAfter <= 0 {
		t.Fatalf("over the limit: %+v, want denied with a retry-after", first)
	}
	before := store.takes.Load()
	for range 1000 {
		d := lim.Allow(ctx, p, "k", 2)
		if d.Allowed || d.Outcome != limiter.Denied || d.RetryAfter <= 0 || d.RetryAfter > first.RetryAfter || d.Policy != p || d.Limit != 10 {
			t.Fatalf("cached denial %+v", d)
		}
	}
	if n := store.takes.Load() - before; n != 0 {
		t.Errorf("%d of 1000 denials reached the store, want 0", n)
	}
	// A smaller cost is not known to be denied: it asks the store.
	lim.Allow(ctx, p, "k", 1)
	if n := store.takes.Load() - before; n != 1 {
		t.Errorf("a cost of 1 after a denial of 2: %d store calls, want 1", n)
	}
	// Another key is not affected.
	if d := lim.Allow(ctx, p, "other", 1); !d.Allowed {
		t.Errorf("another key denied: %+v", d)
	}
	// A refund gives quota back: the cache forgets the key.
	if _, err := lim.Refund(ctx, p, "k", 5); err != nil {
		t.Fatal(err)
	}
	if d := lim.Allow(ctx, p, "k", 2); !d.Allowed {
		t.Errorf("after a refund of 5: %+v, want allowed", d)
	}
}

// remoteMem is a memstore that does not say it is local, as a Redis store
// would not: the local cache only serves stores that cost a round trip.
type remoteMem struct{ *memstore.Store }

func (remoteMem) Local() bool { return false }
