package redisstore_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/memstore"
	"github.com/costgate/costgate/limiter/redistest"
	"github.com/costgate/costgate/limiter/storetest"
)

// Holds and charges of one request, through the Limiter: one script on
// standalone; on a Cluster the hold and the charge are in two slots, sent
// at once, and a denial in one undoes the other.
func TestConcurrencyChecks(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			client := b.client()
			storetest.RunConcurrencyChecks(t, func(t *testing.T, clock func() time.Time) limiter.Store {
				return newStore(t, client, newPrefix(t), clock)
			})
		})
	}
}

// A release sent while Redis is down is retried until it gets through: the
// place is free again as soon as Redis is back (with its data: an
// append-only file here), not a lease later. Meanwhile the policy's
// on_store_error decides what new requests get.
func TestConcurrencyReleaseOutlivesAnOutage(t *testing.T) {
	srv := redistest.StartServer(t, redistest.WithConfig("appendonly", "yes"), redistest.WithConfig("appendfsync", "always"))
	store := newStore(t, srv.Client(withTimeouts), newPrefix(t), nil)
	lim, err := limiter.New(store, limiter.WithTimeout(time.Second), limiter.WithLogger(slog.New(slog.DiscardHandler)),
		limiter.WithLocalFallback(memstore.New(nil), 1))
	if err != nil {
		t.Fatal(err)
	}
	p := &limiter.Policy{Name: "conc", Algorithm: limiter.Concurrency, Limit: 1, Lease: time.Hour}
	ctx := context.Background()
	reqs := []limiter.Request{{Policy: p, Key: "k", Cost: 1}}
	ds, ok := lim.AllowAll(ctx, reqs)
	if !ok {
		t.Fatalf("denied: %+v", ds)
	}
	tk := lim.Ticket(reqs, ds)
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	tk.End(200) // fails: Redis is down

	for mode, want := range map[limiter.FailMode]limiter.Outcome{
		limiter.FailAllow: limiter.ErrorAllowed, limiter.FailDeny: limiter.ErrorDenied, limiter.FailLocal: limiter.ErrorLocal,
	} {
		q := *p
		q.OnStoreError = mode
		r := []limiter.Request{{Policy: &q, Key: "k", Cost: 1}}
		ds, _ := lim.AllowAll(ctx, r)
		if ds[0].Outcome != want {
			t.Errorf("on_store_error %s during the outage: %s, want %s", mode, ds[0].Outcome, want)
		}
		lim.Ticket(r, ds).End(200) // the local hold, if any, released
	}

	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := lim.Drain(dctx); err != nil {
		t.Fatalf("Drain: %v", err)
	}
	d, err := lim.Peek(ctx, p, "k")
	if err != nil || d.Remaining != 1 {
		t.Errorf("after Redis came back: %+v %v, want the place free (the release retried)", d, err)
	}
}

// The memory store and the Redis store keep holds alike: for the same
// randomized calls (takes of any cost, releases and renewals of earlier
// receipts, released or not, the clock moving by random steps past leases
// too) they give identical decisions, receipts included. Keys are held from
// expiring on Redis's real clock, as in TestMemoryAndRedisAgree.
func TestMemoryAndRedisAgreeOnHolds(t *testing.T) {
	ctx := context.Background()
	client := standalone.Client(withTimeouts)
	for seed := range uint64(40) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			comparing(t, client, func() string {
				rng := rand.New(rand.NewPCG(seed, 0xc0c0))
				clock := storetest.NewClock(storetest.Base.Add(time.Duration(rng.Int64N(int64(time.Hour)))))
				mem := memstore.New(&memstore.Options{Clock: clock.Now})
				red := newStore(t, client, newPrefix(t), clock.Now)
				hold := holdKeys(t, client, red)
				p := limiter.Policy{Name: "prop", Algorithm: limiter.Concurrency, Limit: 1 + rng.Int64N(6),
					Lease: time.Duration(1000+rng.Int64N(9000)) * time.Millisecond}
				mustValidate(t, &p)
				keys := []string{"a", "b"}
				var receipts []limiter.Receipt
				for i := range 300 {
					if rng.IntN(3) > 0 {
						clock.Advance(time.Duration(rng.Int64N(int64(p.Lease/2))) + time.Duration(rng.IntN(3))*time.Microsecond)
					}
					key := keys[rng.IntN(len(keys))]
					var md, rd limiter.Decision
					var mErr, rErr error
					var what string
					switch r := rng.IntN(100); {
					case r < 30 && len(receipts) > 0:
						rc := receipts[rng.IntN(len(receipts))]
						what = "release " + rc.Entry
						md, mErr = mem.Undo(ctx, &p, key, rc)
						rd, rErr = red.Undo(ctx, &p, key, rc)
					case r < 50 && len(receipts) > 0:
						rc := receipts[rng.IntN(len(receipts))]
						what = "renew " + rc.Entry
						md, mErr = mem.Renew(ctx, &p, key, rc)
						rd, rErr = red.Renew(ctx, &p, key, rc)
					default:
						cost := rng.Int64N(3)
						what = fmt.Sprintf("take %d", cost)
						md, mErr = mem.Take(ctx, &p, key, cost)
						rd, rErr = red.Take(ctx, &p, key, cost)
					}
					if mErr != nil || rErr != nil {
						t.Fatalf("step %d %s: memory err %v, redis err %v", i, what, mErr, rErr)
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

// Checks that hold and charge at once agree in both stores: random routes
// of a concurrency policy and rate policies, some keys shared, through
// Limiter.AllowAll (one script on Redis, policy by policy and undone in
// memory), with the holds of granted checks released at random later.
func TestMemoryAndRedisAgreeOnHoldingChecks(t *testing.T) {
	ctx := context.Background()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			client := b.client()
			for seed := range uint64(12) {
				t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
					comparing(t, client, func() string {
						rng := rand.New(rand.NewPCG(seed, 0xc4ec))
						clock := storetest.NewClock(storetest.Base.Add(time.Duration(rng.Int64N(int64(time.Hour)))))
						quiet := limiter.WithLogger(slog.New(slog.DiscardHandler))
						mstore := memstore.New(&memstore.Options{Clock: clock.Now})
						mem, err := limiter.New(mstore, quiet)
						if err != nil {
							t.Fatal(err)
						}
						rs := newStore(t, client, newPrefix(t), clock.Now)
						hold := holdKeys(t, client, rs)
						red, err := limiter.New(rs, quiet, limiter.WithTimeout(5*time.Second))
						if err != nil {
							t.Fatal(err)
						}
						conc := &limiter.Policy{Name: "conc", Algorithm: limiter.Concurrency, Limit: 1 + rng.Int64N(4), Lease: 10 * time.Second}
						ps := []*limiter.Policy{conc}
						for i := range 1 + rng.IntN(2) {
							p := randomPolicy(rng)
							p.Name = fmt.Sprint("rate", i)
							ps = append(ps, &p)
						}
						for _, p := range ps {
							mustValidate(t, p)
						}
						type held struct {
							key string
							r   limiter.Receipt
						}
						var holds []held
						for i := range 150 {
							if rng.IntN(3) > 0 {
								clock.Advance(time.Duration(rng.Int64N(int64(time.Second))))
							}
							if len(holds) > 0 && rng.IntN(3) == 0 {
								j := rng.IntN(len(holds))
								h := holds[j]
								holds = append(holds[:j], holds[j+1:]...)
								md, mErr := mstore.Undo(ctx, conc, h.key, h.r)
								rd, rErr := rs.Undo(ctx, conc, h.key, h.r)
								if mErr != nil || rErr != nil || md != rd {
									return fmt.Sprintf("step %d: release %+v: memory %+v %v\n redis %+v %v", i, h, md, mErr, rd, rErr)
								}
								continue
							}
							reqs := make([]limiter.Request, 1+rng.IntN(3))
							for j := range reqs {
								p := ps[rng.IntN(len(ps))]
								reqs[j] = limiter.Request{Policy: p, Key: []string{"a", "b"}[rng.IntN(2)], Cost: 1 + rng.Int64N(p.Capacity()/2+1)}
							}
							md, mok := mem.AllowAll(ctx, reqs)
							rd, rok := red.AllowAll(ctx, reqs)
							same := mok == rok && len(md) == len(rd)
							for j := 0; same && j < len(md); j++ {
								m, r := md[j], rd[j]
								if m.Err != nil || r.Err != nil {
									t.Fatalf("step %d: memory %v, redis %v", i, m.Err, r.Err)
								}
								if m.Policy.Algorithm == limiter.SlidingLog {
									m.Receipt.Entry, r.Receipt.Entry = "", "" // as in TestMemoryAndRedisAgreeOnBatches
								}
								same = m.Allowed == r.Allowed && m.Remaining == r.Remaining && m.RetryAfter == r.RetryAfter &&
									m.ResetAfter == r.ResetAfter && m.Receipt == r.Receipt && m.Outcome == r.Outcome
							}
							if !same {
								return fmt.Sprintf("step %d: %+v\nmemory %v %+v\n redis %v %+v", i, reqs, mok, md, rok, rd)
							}
							for j, d := range md {
								if mok && d.Policy.Algorithm == limiter.Concurrency {
									holds = append(holds, held{reqs[j].Key, d.Receipt})
								}
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
