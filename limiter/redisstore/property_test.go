package redisstore_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/memstore"
	"github.com/costgate/costgate/limiter/redisstore"
	"github.com/costgate/costgate/limiter/storetest"
)

// The memory store and the Redis store give identical decisions for the same
// randomized call sequence: takes of random cost (including 0 and more than
// the capacity), undos of earlier receipts, refunds, the clock moving by
// random steps (sometimes not at all), over random policies of every
// algorithm. The clock does not step back here: after a step back, memstore
// has already dropped states that its newer reading found full, while a Redis
// key clamps only to its own last write (both are sound; the conformance
// suite checks each store's clamping on its own).
//
// Keys are kept from expiring (holdKeys): a key's TTL runs on Redis's real
// clock, and on a busy machine a step can take longer in real time than
// the injected clock leaves a nearly full state to live (a run in which one
// expired before it was held is run again: see comparing).
func TestMemoryAndRedisAgree(t *testing.T) {
	ctx := context.Background()
	client := standalone.Client(withTimeouts)
	for seed := range uint64(40) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			comparing(t, client, func() string {
				rng := rand.New(rand.NewPCG(seed, 0xc057))
				clock := storetest.NewClock(storetest.Base.Add(time.Duration(rng.Int64N(int64(time.Hour)))))
				mem := memstore.New(&memstore.Options{Clock: clock.Now})
				red := newStore(t, client, newPrefix(t), clock.Now)
				hold := holdKeys(t, client, red)

				p := randomPolicy(rng)
				mustValidate(t, &p)
				keys := []string{"a", "b"}
				var receipts []limiter.Receipt
				for i := range 400 {
					if rng.IntN(3) > 0 { // else several calls at one instant
						clock.Advance(time.Duration(rng.Int64N(int64(p.Period/3))) + time.Duration(rng.IntN(3))*time.Microsecond)
					}
					key := keys[rng.IntN(len(keys))]
					var (
						md, rd   limiter.Decision
						mErr, rE error
						what     string
					)
					switch r := rng.IntN(100); {
					case r < 10 && len(receipts) > 0:
						rc := receipts[rng.IntN(len(receipts))]
						what = fmt.Sprintf("undo %+v", rc)
						md, mErr = mem.Undo(ctx, &p, key, rc)
						rd, rE = red.Undo(ctx, &p, key, rc)
					case r < 15 && p.IsBucket():
						n := rng.Int64N(p.Capacity() + 1)
						what = fmt.Sprintf("refund %d", n)
						md, mErr = mem.Undo(ctx, &p, key, limiter.Receipt{Cost: n})
						rd, rE = red.Undo(ctx, &p, key, limiter.Receipt{Cost: n})
					default:
						cost := rng.Int64N(p.Capacity()/2+2) + rng.Int64N(2)*rng.Int64N(p.Capacity()+2)
						what = fmt.Sprintf("take %d", cost)
						md, mErr = mem.Take(ctx, &p, key, cost)
						rd, rE = red.Take(ctx, &p, key, cost)
					}
					if mErr != nil || rE != nil {
						t.Fatalf("step %d %s: memory err %v, redis err %v", i, what, mErr, rE)
					}
					if md != rd {
						return fmt.Sprintf("policy %+v\nstep %d (%s on %q at %d):\nmemory %+v\n redis %+v",
							p, i, what, key, clock.Now().UnixMicro(), md, rd)
					}
					if md.Receipt.Cost > 0 {
						receipts = append(receipts, md.Receipt)
					}
					hold([]*limiter.Policy{&p}, keys)
				}
				return ""
			})
		})
	}
}

// holdKeys returns a function that removes the TTL of the keys of ps under
// keys. A key expires only once its state is back to the initial one, so
// keeping it changes no decision; what it spares the comparison is a key
// gone early on Redis's real clock while the injected clock says its state
// still counts.
func holdKeys(t *testing.T, client redis.UniversalClient, s *redisstore.Store) func(ps []*limiter.Policy, keys []string) {
	return func(ps []*limiter.Policy, keys []string) {
		t.Helper()
		_, err := client.Pipelined(context.Background(), func(pipe redis.Pipeliner) error {
			for _, p := range ps {
				for _, key := range keys {
					for _, k := range s.Keys(p, key) {
						pipe.Persist(context.Background(), k)
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// comparing runs one seed's comparison up to three times. holdKeys keeps
// the keys from expiring, but only after each step: a state the step left
// a few milliseconds from empty can expire on Redis's real clock before it
// is held, when a busy machine is slow between the two. Where the stores
// disagreed and Redis expired a key meanwhile (INFO expired_keys, over every
// master), the run proves nothing and is run again from the start; a
// disagreement without an expiry, or in the third run, fails the test.
func comparing(t *testing.T, client redis.UniversalClient, run func() (mismatch string)) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		before := expiredKeys(t, client)
		mismatch := run()
		if mismatch == "" {
			return
		}
		if attempt < 3 && expiredKeys(t, client) > before {
			t.Logf("run %d: the stores disagreed while Redis expired a key; running again:\n%s", attempt, mismatch)
			continue
		}
		t.Fatal(mismatch)
	}
}

// expiredKeys is how many keys Redis has expired, summed over the masters.
func expiredKeys(t *testing.T, client redis.UniversalClient) int64 {
	t.Helper()
	ctx := context.Background()
	var mu sync.Mutex
	var n int64
	count := func(ctx context.Context, c *redis.Client) error {
		info, err := c.Info(ctx, "stats").Result()
		if err != nil {
			return err
		}
		for line := range strings.Lines(info) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "expired_keys:"); ok {
				k, _ := strconv.ParseInt(v, 10, 64)
				mu.Lock()
				n += k
				mu.Unlock()
			}
		}
		return nil
	}
	var err error
	switch c := client.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, count)
	case *redis.Client:
		err = count(ctx, c)
	default:
		t.Fatalf("expiredKeys: a %T", client)
	}
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func randomPolicy(rng *rand.Rand) limiter.Policy {
	algs := limiter.Algorithms()
	p := limiter.Policy{
		Name:      "prop",
		Algorithm: algs[rng.IntN(len(algs))],
		Limit:     1 + rng.Int64N(20),
		Period:    time.Duration(1+rng.Int64N(5000)) * time.Millisecond,
	}
	if rng.IntN(4) == 0 {
		p.Period += time.Duration(rng.Int64N(1000)) * time.Microsecond // periods not in whole ms
	}
	if p.IsBucket() && rng.IntN(2) == 0 {
		p.Burst = 1 + rng.Int64N(30)
	}
	return p
}

// Several policies per request: Limiter.AllowAll over Redis (one script, or
// on a Cluster a script per slot and compensation) gives the decisions it
// gives over the memory store, which charges policy by policy and undoes.
// A check names policies and keys at random, the same one twice or more
// too (also through a shadow twin of a policy, which shares its state), and
// each request must see the charges of the ones before it.
// Receipts of sliding_log are left out of the comparison: undoing a charge
// there spends a sequence number that a script that never charged does not.
// Keys are held from expiring, as in TestMemoryAndRedisAgree.
func TestMemoryAndRedisAgreeOnBatches(t *testing.T) {
	ctx := context.Background()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			client := b.client()
			for seed := range uint64(20) {
				t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
					comparing(t, client, func() string {
						rng := rand.New(rand.NewPCG(seed, 0xba7c))
						clock := storetest.NewClock(storetest.Base.Add(time.Duration(rng.Int64N(int64(time.Hour)))))
						quiet := limiter.WithLogger(slog.New(slog.DiscardHandler))
						mem, err := limiter.New(memstore.New(&memstore.Options{Clock: clock.Now}), quiet)
						if err != nil {
							t.Fatal(err)
						}
						rs := newStore(t, client, newPrefix(t), clock.Now)
						hold := holdKeys(t, client, rs)
						red, err := limiter.New(rs, quiet, limiter.WithTimeout(5*time.Second))
						if err != nil {
							t.Fatal(err)
						}
						var ps []*limiter.Policy
						for i := range 2 + rng.IntN(2) {
							p := randomPolicy(rng)
							p.Name = fmt.Sprint("prop", i)
							if rng.IntN(5) == 0 {
								p.Mode = limiter.Shadow
							}
							mustValidate(t, &p)
							ps = append(ps, &p)
						}
						var minPeriod time.Duration = time.Hour
						pool := ps
						for _, p := range ps {
							minPeriod = min(minPeriod, p.Period)
							if rng.IntN(3) == 0 {
								twin := *p
								twin.Mode = limiter.Shadow
								pool = append(pool, &twin)
							}
						}
						for i := range 200 {
							if rng.IntN(3) > 0 {
								clock.Advance(time.Duration(rng.Int64N(int64(minPeriod/3))) + time.Duration(rng.IntN(3))*time.Microsecond)
							}
							reqs := make([]limiter.Request, 2+rng.IntN(3))
							for j := range reqs {
								p := pool[rng.IntN(len(pool))]
								reqs[j] = limiter.Request{Policy: p, Key: []string{"a", "b"}[rng.IntN(2)], Cost: 1 + rng.Int64N(p.Capacity()/2+1)}
							}
							md, mok := mem.AllowAll(ctx, reqs)
							rd, rok := red.AllowAll(ctx, reqs)
							same := mok == rok && len(md) == len(rd)
							for j := 0; same && j < len(md); j++ {
								m, r := md[j], rd[j]
								if m.Err != nil || r.Err != nil {
									t.Fatalf("step %d: errors %v / %v", i, m.Err, r.Err)
								}
								m.Receipt.Entry, r.Receipt.Entry = "", ""
								same = m == r
							}
							if !same {
								return fmt.Sprintf("policies %+v %+v\nstep %d (at %d, %+v):\nmemory %v %+v\n redis %v %+v",
									*ps[0], *ps[1], i, clock.Now().UnixMicro(), reqs, mok, md, rok, rd)
							}
							hold(ps, []string{"a", "b"})
						}
						return ""
					})
				})
			}
		})
	}
}
