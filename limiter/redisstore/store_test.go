package redisstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/memstore"
	"github.com/costgate/costgate/limiter/redisstore"
	"github.com/costgate/costgate/limiter/storetest"
)

// The conformance suite against Redis standalone and Cluster. After every
// step, every key the store holds must carry a TTL no longer than the
// state needs (the reset of the last write, rounded up to a millisecond), and
// a state back to full must leave no key behind.
func TestConformance(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			client := b.client()
			var prefix string
			var bound time.Duration
			storetest.Run(t, func(t *testing.T, clock func() time.Time) limiter.Store {
				prefix, bound = newPrefix(t), 0
				return newStore(t, client, prefix, clock)
			}, storetest.Options{AfterStep: func(t *testing.T, p *limiter.Policy, key string, d limiter.Decision, wrote bool) {
				if wrote {
					bound = ceilMillis(d.ResetAfter)
				}
				keys := keysUnder(t, client, prefix)
				if wrote && d.ResetAfter == 0 && len(keys) > 0 {
					t.Errorf("state is full again but keys remain: %v", keys)
				}
				for k, ttl := range keys {
					if ttl < 0 || ttl > bound { // PTTL is -1 for a key without TTL
						t.Errorf("key %s: PTTL %s, want in [0, %s]", k, ttl, bound)
					}
				}
			}})
		})
	}
}

// TakeAll against standalone (one script) and Cluster (a script per slot,
// compensation across slots).
func TestBatchConformance(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			client := b.client()
			storetest.RunBatch(t, func(t *testing.T, clock func() time.Time) limiter.BatchStore {
				return newStore(t, client, newPrefix(t), clock)
			})
		})
	}
}

// Requests of one check on the same key, through the Limiter: one script
// on standalone, a script per slot on a Cluster, each request seeing the
// charges of the ones before it.
func TestSameKeyChecks(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			client := b.client()
			storetest.RunChecks(t, func(t *testing.T, clock func() time.Time) limiter.Store {
				return newStore(t, client, newPrefix(t), clock)
			})
		})
	}
}

func TestKeysShareOneHashSlot(t *testing.T) {
	s := newStore(t, cluster.Client(withClusterTimeouts), "rl:", nil)
	p := &limiter.Policy{Name: "login_user", Algorithm: limiter.SlidingLog, Limit: 10, Period: time.Minute}
	for _, key := range []string{"alice", "{odd}key", "}{", ""} {
		keys := s.Keys(p, key)
		if len(keys) != 2 {
			t.Fatalf("sliding_log keys = %v, want 2", keys)
		}
		a, b := redisSlot(keys[0]), redisSlot(keys[1])
		if a != b {
			t.Errorf("key %q: %s in slot %d, %s in slot %d", key, keys[0], a, keys[1], b)
		}
	}
	// And against the cluster itself: a check on a key full of braces works.
	d, err := s.Take(context.Background(), mustValidate(t, p), "}{weird}{", 1)
	if err != nil || !d.Allowed {
		t.Fatalf("Take = %+v, %v", d, err)
	}
}

// redisSlot is Redis Cluster's HASH_SLOT: CRC16 of the hash tag (or key) mod 16384.
func redisSlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % 16384
}

// remaining is exact with today's clock: redis_rate's float arithmetic
// reports one too few here.
func TestRemainingExactWithTodaysClock(t *testing.T) {
	policies := []*limiter.Policy{
		{Name: "ten", Algorithm: limiter.TokenBucket, Limit: 10, Period: time.Second},
		{Name: "api", Algorithm: limiter.TokenBucket, Limit: 1000, Period: time.Minute, Burst: 150},
		{Name: "leaky", Algorithm: limiter.LeakyBucket, Limit: 10, Period: time.Second},
	}
	stores := map[string]limiter.Store{
		"memory":     memstore.New(nil),
		"standalone": newStore(t, standalone.Client(withTimeouts), newPrefix(t), nil),
		"cluster":    newStore(t, cluster.Client(withClusterTimeouts), newPrefix(t), nil),
	}
	for name, store := range stores {
		for _, p := range policies {
			mustValidate(t, p)
			d, err := store.Take(context.Background(), p, "k", 1)
			if err != nil {
				t.Fatal(err)
			}
			if want := p.Capacity() - 1; !d.Allowed || d.Remaining != want {
				t.Errorf("%s %s: allowed %v remaining %d, want true %d", name, p.Name, d.Allowed, d.Remaining, want)
			}
		}
	}
}

// A Redis restart (or failover, or SCRIPT FLUSH) empties the script cache:
// EVALSHA answers NOSCRIPT, and the store sends the script again.
func TestScriptCacheFlushed(t *testing.T) {
	client := standalone.Client(withTimeouts)
	s := newStore(t, client, newPrefix(t), nil)
	p := mustValidate(t, &limiter.Policy{Name: "p", Algorithm: limiter.FixedWindow, Limit: 5, Period: time.Hour})
	ctx := context.Background()
	for i := range 3 {
		if err := client.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		d, err := s.Take(ctx, p, "k", 1)
		if err != nil {
			t.Fatalf("take %d after SCRIPT FLUSH: %v", i, err)
		}
		if want := int64(4 - i); d.Remaining != want {
			t.Fatalf("take %d: remaining %d, want %d", i, d.Remaining, want)
		}
	}
}

func TestClientWithoutContextTimeoutIsRefused(t *testing.T) {
	if _, err := redisstore.New(standalone.Client(), nil); err == nil || !strings.Contains(err.Error(), "ContextTimeoutEnabled") {
		t.Errorf("plain client: err = %v, want one naming ContextTimeoutEnabled", err)
	}
	if _, err := redisstore.New(cluster.Client(), nil); err == nil {
		t.Error("plain cluster client accepted")
	}
	if _, err := redisstore.New(standalone.Client(withTimeouts), nil); err != nil {
		t.Errorf("client with ContextTimeoutEnabled: %v", err)
	}
}

// Nothing lives forever: after the period passes, on the real clock, no key
// of any algorithm remains. The period is a second so that every key lives
// at least 600ms after the takes (3 of 5 tokens at 200ms each; the fixed
// window is started when at least 700ms of it remain): a machine that takes
// longer than that to list them is measured, and excused from seeing them.
func TestKeysExpireOnTheRealClock(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			client := b.client()
			prefix := newPrefix(t)
			s := newStore(t, client, prefix, nil)
			ctx := context.Background()
			const period, shortestLife = time.Second, 600 * time.Millisecond
			var policies []*limiter.Policy
			for _, alg := range limiter.Algorithms() {
				policies = append(policies, mustValidate(t, &limiter.Policy{Name: string(alg), Algorithm: alg, Limit: 5, Period: period}))
			}
			for _, p := range policies {
				if p.Algorithm == limiter.FixedWindow {
					waitForWindowRoom(p, "k", shortestLife+100*time.Millisecond)
				}
			}
			start := time.Now()
			for _, p := range policies {
				for range 3 {
					if d, err := s.Take(ctx, p, "k", 1); err != nil || !d.Allowed {
						t.Fatalf("%s: %+v %v", p.Algorithm, d, err)
					}
				}
			}
			keys := keysUnder(t, client, prefix)
			switch listed := time.Since(start); {
			case len(keys) >= 6: // one per algorithm, two for sliding_log
			case listed >= shortestLife:
				t.Logf("keys listed %s after the takes, when some may have expired: %v", listed, keys)
			default:
				t.Fatalf("keys %s after the takes: %v, want at least 6", listed, keys)
			}
			for k, ttl := range keys {
				// sliding_window keeps its counts for the next window too
				if limit := 2 * period; ttl <= 0 || ttl > limit {
					t.Errorf("key %s: PTTL %s, want in (0, %s]", k, ttl, limit)
				}
			}
			deadline := time.Now().Add(5 * period)
			for len(keys) > 0 && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
				keys = keysUnder(t, client, prefix)
			}
			if len(keys) > 0 {
				t.Errorf("keys still there long after their period: %v", keys)
			}
		})
	}
}

// waitForWindowRoom waits, on the real clock, until key's current fixed
// window of p has at least room left.
func waitForWindowRoom(p *limiter.Policy, key string, room time.Duration) {
	per := p.PeriodMicros()
	now := time.Now().UnixMicro()
	left := per - ((now-p.WindowOffset(key))%per+per)%per
	if time.Duration(left)*time.Microsecond < room {
		time.Sleep(time.Duration(left)*time.Microsecond + time.Millisecond)
	}
}

var _ redis.UniversalClient = (*redis.ClusterClient)(nil)

func TestKeyPrefixWithBracesIsRefused(t *testing.T) {
	_, err := redisstore.New(standalone.Client(withTimeouts), &redisstore.Options{KeyPrefix: "rl{x}:"})
	if err == nil || !strings.Contains(err.Error(), "must not contain") {
		t.Errorf("prefix with braces: err = %v, want a refusal", err)
	}
}

// A token bucket's state is small in Redis: 88 bytes per key (MEMORY USAGE,
// Redis 7), whatever the policy's name and the identity's length, against
// 104 for go-redis/redis_rate's state of a short identity.
func TestTokenBucketStateIsSmall(t *testing.T) {
	client := standalone.Client(withTimeouts)
	s, err := redisstore.New(client, nil) // the default prefix
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	for _, c := range []struct{ name, key string }{
		{"api", "mem-user:1"},
		{"a_rather_long_policy_name", "tenant-3:" + strings.Repeat("h", 22)},
	} {
		p := mustValidate(t, &limiter.Policy{Name: c.name, Algorithm: limiter.TokenBucket, Limit: 1, Period: time.Second, Burst: 1_000_000_000})
		key := c.key + newPrefix(t) // a key no other run of the test wrote
		for range 100 {
			if d, err := s.Take(ctx, p, key, 1); err != nil || !d.Allowed {
				t.Fatalf("Take = %+v, %v", d, err)
			}
		}
		k := s.Keys(p, key)[0]
		n, err := client.MemoryUsage(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n > 88 {
			t.Errorf("policy %s, key %q: MEMORY USAGE %s = %d bytes, want at most 88", c.name, key, k, n)
		}
	}
}
