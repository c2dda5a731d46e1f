package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/storetest"
)

// A check whose second request on a key is denied leaves that key exactly
// as it was, although the script wrote the first request's charge so that
// the second could see it: the same value, a TTL no longer than before and
// not none, and a key that did not exist still does not.
func TestDeniedSameKeyCheckLeavesKeysAsTheyWere(t *testing.T) {
	ctx := context.Background()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			client := b.client()
			clock := storetest.NewClock(storetest.Base)
			store := newStore(t, client, newPrefix(t), clock.Now)
			lim := newLimiterWith(t, store, 5*time.Second)
			for _, alg := range limiter.Algorithms() {
				p := mustValidate(t, &limiter.Policy{Name: string(alg), Algorithm: alg, Limit: 150, Period: time.Hour})
				twice := []limiter.Request{{Policy: p, Key: "held", Cost: 100}, {Policy: p, Key: "held", Cost: 100}}
				if d, err := store.Take(ctx, p, "held", 10); err != nil || !d.Allowed {
					t.Fatalf("%s: take 10: %+v %v", alg, d, err)
				}
				type snapshot struct {
					dump string
					ttl  time.Duration
				}
				before := map[string]snapshot{}
				for _, k := range store.Keys(p, "held") {
					dump, err := client.Dump(ctx, k).Result()
					if err != nil {
						t.Fatalf("%s: DUMP %s: %v", alg, k, err)
					}
					before[k] = snapshot{dump, client.PTTL(ctx, k).Val()}
				}
				if _, ok := lim.AllowAll(ctx, twice); ok {
					t.Fatalf("%s: 100 + 100 on 140 left allowed", alg)
				}
				for k, was := range before {
					dump, err := client.Dump(ctx, k).Result()
					if err != nil || dump != was.dump {
						t.Errorf("%s: key %s changed by a denied check (%v)", alg, k, err)
					}
					if ttl := client.PTTL(ctx, k).Val(); ttl <= 0 || ttl > was.ttl {
						t.Errorf("%s: key %s: PTTL %s after the denied check, want in (0, %s]", alg, k, ttl, was.ttl)
					}
				}

				fresh := []limiter.Request{{Policy: p, Key: "fresh", Cost: 100}, {Policy: p, Key: "fresh", Cost: 100}}
				if _, ok := lim.AllowAll(ctx, fresh); ok {
					t.Fatalf("%s: 100 + 100 on 150 allowed", alg)
				}
				if n := client.Exists(ctx, store.Keys(p, "fresh")...).Val(); n != 0 {
					t.Errorf("%s: a denied check left %d keys of a key it found empty", alg, n)
				}
			}
		})
	}
}

// local_cache: the denial of a request seen under the charge of an earlier
// request of its check on the same key is not remembered. That charge was
// undone; the store grants the same cost alone, and so must the cache.
func TestLocalCacheForgetsNoSameKeyDenial(t *testing.T) {
	ctx := context.Background()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			store := newStore(t, b.client(), newPrefix(t), storetest.NewClock(storetest.Base).Now)
			lim := newLimiterWith(t, store, 5*time.Second)
			p := mustValidate(t, &limiter.Policy{Name: "cached", Algorithm: limiter.TokenBucket, Limit: 150, Period: time.Hour, LocalCache: true})
			ds, ok := lim.AllowAll(ctx, []limiter.Request{{Policy: p, Key: "k", Cost: 100}, {Policy: p, Key: "k", Cost: 100}})
			if ok || len(ds) != 2 || ds[1].Allowed || ds[0].Remaining != 150 {
				t.Fatalf("100 + 100 on 150: %v %+v, want the second denied and 150 left", ok, ds)
			}
			if d := lim.Allow(ctx, p, "k", 100); !d.Allowed || d.Remaining != 50 {
				t.Errorf("100 alone afterwards: %+v, want allowed with 50 left", d)
			}
		})
	}
}
