package memstore_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/costgate/costgate/internal/syncbuf"
	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/memstore"
	"github.com/costgate/costgate/limiter/storetest"
)

// The login policies of the demo config, and an API bucket.
var (
	loginUser = limiter.Policy{Name: "login_user", Algorithm: limiter.SlidingLog, Limit: 10, Period: 5 * time.Minute}
	apiBucket = limiter.Policy{Name: "api", Algorithm: limiter.TokenBucket, Limit: 1000, Period: time.Minute, Burst: 150}
)

type harness struct {
	t     *testing.T
	clock *storetest.Clock
	store *memstore.Store
}

func newHarness(t *testing.T, maxKeys int) *harness {
	t.Helper()
	clock := storetest.NewClock(storetest.Base)
	return &harness{t: t, clock: clock, store: memstore.New(&memstore.Options{MaxKeys: maxKeys, Clock: clock.Now})}
}

func (h *harness) take(p *limiter.Policy, key string, cost int64) limiter.Decision {
	h.t.Helper()
	d, err := h.store.Take(context.Background(), p, key, cost)
	if err != nil {
		h.t.Fatalf("take %d of %s/%s: %v", cost, p.Name, key, err)
	}
	return d
}

func (h *harness) remaining(p *limiter.Policy, key string) int64 {
	h.t.Helper()
	return h.take(p, key, 0).Remaining
}

// A flood of new identities, five times the key cap, cannot unlock a locked
// key: eviction passes over states that are denying, whatever their age.
func TestLockoutSurvivesFlood(t *testing.T) {
	cases := []struct {
		name    string
		maxKeys int
		policy  limiter.Policy
		lock    func(h *harness, p *limiter.Policy) // leaves "alice" denying
		retry   time.Duration                       // alice's retry-after once locked
	}{
		{
			name: "sliding_log login", maxKeys: 1000, policy: loginUser,
			lock: func(h *harness, p *limiter.Policy) {
				for range 10 {
					h.take(p, "alice", 1)
				}
			},
			retry: 5 * time.Minute,
		},
		{
			name: "sliding_log login, two shards", maxKeys: 2 * 4096, policy: loginUser,
			lock: func(h *harness, p *limiter.Policy) {
				for range 10 {
					h.take(p, "alice", 1)
				}
			},
			retry: 5 * time.Minute,
		},
		{
			// 150 tokens at once; one back every 60ms.
			name: "empty token_bucket", maxKeys: 1000, policy: apiBucket,
			lock:  func(h *harness, p *limiter.Policy) { h.take(p, "alice", 150) },
			retry: 60 * time.Millisecond,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.maxKeys)
			p := &tc.policy
			tc.lock(h, p)
			if d := h.take(p, "alice", 1); d.Allowed || d.RetryAfter != tc.retry {
				t.Fatalf("alice before the flood: %+v, want denied with retry %s", d, tc.retry)
			}
			// Each new identity tries once; the flood lasts 1µs a request,
			// under the bucket's 60ms to a token.
			flood := 5 * tc.maxKeys
			for i := range flood {
				h.clock.Advance(time.Microsecond)
				if d := h.take(p, fmt.Sprint("user", i), 1); !d.Allowed {
					t.Fatalf("new identity %d denied: %+v", i, d)
				}
			}
			d := h.take(p, "alice", 1)
			if want := tc.retry - time.Duration(flood)*time.Microsecond; d.Allowed || d.RetryAfter != want {
				t.Errorf("alice after %d new identities: %+v, want denied with retry %s", flood, d, want)
			}
			if got, min := h.store.Evictions(), uint64(flood-tc.maxKeys); got < min {
				t.Errorf("evictions = %d, want at least %d", got, min)
			}
			if got := h.store.Len(); got > tc.maxKeys {
				t.Errorf("Len = %d over the cap %d", got, tc.maxKeys)
			}
		})
	}
}

// When every state is denying, a new key is decided by its policy's
// overflow state: one key's quota shared by every key that found no room,
// never a store error, so on_store_error never decides (before, the store
// failed the take, and on_store_error: allow served every newcomer
// unlimited). An undo of an overflow charge gives it back there; each
// overflow decision is counted and logged, at most a line a second per
// policy. The keys held keep answering, a read of a new key needs no room,
// and once a state stops denying it can be evicted again.
func TestFullOfDenyingStates(t *testing.T) {
	clock := storetest.NewClock(storetest.Base)
	var log syncbuf.Buffer
	var mu sync.Mutex
	overflowed := map[string]int{}
	store := memstore.New(&memstore.Options{MaxKeys: 3, Clock: clock.Now, Logger: slog.New(slog.NewTextHandler(&log, nil)),
		OnOverflow: func(p string) { mu.Lock(); overflowed[p]++; mu.Unlock() }})
	h := &harness{t: t, clock: clock, store: store}
	lock := &limiter.Policy{Name: "lock", Algorithm: limiter.TokenBucket, Limit: 1, Period: time.Minute}
	for _, k := range []string{"a", "b", "c"} {
		h.take(lock, k, 1) // empty: a token back in a minute
	}
	ctx := context.Background()
	first := h.take(lock, "d", 1)
	if !first.Allowed || first.Receipt.Cost != 1 {
		t.Fatalf("the first new key with every state denying: %+v, want the overflow state's one token", first)
	}
	for _, k := range []string{"e", "f", "g"} {
		if d := h.take(lock, k, 1); d.Allowed || d.RetryAfter != time.Minute {
			t.Errorf("new key %s after the overflow state's token went: %+v, want denied for a minute", k, d)
		}
	}
	if _, err := store.Undo(ctx, lock, "d", first.Receipt); err != nil {
		t.Fatal(err)
	}
	if d := h.take(lock, "e", 1); !d.Allowed {
		t.Errorf("a new key after the overflow charge was undone: %+v, want the token given back", d)
	}
	if got := store.Overflows(); got != 5 || overflowed["lock"] != 5 {
		t.Errorf("overflow decisions counted %d (hook %v), want 5", got, overflowed)
	}
	if lines := strings.Count(log.String(), "overflow state"); lines < 1 || lines > 2 {
		t.Errorf("%d overflow lines for 5 decisions within a moment, want one:\n%s", lines, log.String())
	}
	if d := h.take(lock, "a", 1); d.Allowed || d.RetryAfter != time.Minute {
		t.Errorf("a held key: %+v, want denied for a minute", d)
	}
	if got := h.remaining(lock, "z"); got != 1 {
		t.Errorf("reading a new key: remaining %d, want 1", got)
	}

	discard := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, mode := range []limiter.FailMode{limiter.FailDeny, limiter.FailAllow, limiter.FailLocal} {
		t.Run(string(mode), func(t *testing.T) {
			local := memstore.New(nil)
			lim, err := limiter.New(store, limiter.WithLocalFallback(local, 2), limiter.WithLogger(discard))
			if err != nil {
				t.Fatal(err)
			}
			p := &limiter.Policy{Name: "login_" + string(mode), Algorithm: limiter.SlidingLog,
				Limit: 10, Period: 5 * time.Minute, OnStoreError: mode}
			// Eleven newcomers: the overflow state's ten, then a denial.
			for i := range 11 {
				d := lim.Allow(ctx, p, fmt.Sprint("newcomer", i), 1)
				want := limiter.Allowed
				if i == 10 {
					want = limiter.Denied
				}
				if d.Outcome != want || d.Err != nil {
					t.Errorf("newcomer %d: outcome %s, err %v; want %s from the overflow state", i, d.Outcome, d.Err, want)
				}
			}
		})
	}

	// A minute on, a, b, c have their token back and are full again: gone,
	// not evicted.
	clock.Advance(time.Minute)
	h.take(lock, "d", 1)
	if got := store.Evictions(); got != 0 {
		t.Errorf("evictions = %d, want 0 (the full states were dropped)", got)
	}
	// d has a state of its own now, empty. Of three new keys two fit; the
	// third evicts one of them (not d, which denies).
	for _, k := range []string{"e", "f", "g"} {
		h.take(&apiBucket, k, 1)
	}
	if got := store.Evictions(); got != 1 {
		t.Errorf("evictions = %d, want 1", got)
	}
	if d := h.take(lock, "d", 1); d.Allowed {
		t.Errorf("d, empty, was evicted: %+v", d)
	}
}

// A flood of locked identities fills the key cap, in every shard, with
// states that deny: newcomers then share the policy's overflow state, ten
// guesses between them all, and the policy, which fails open on a store
// error, never serves one unlimited. The locked keys stay locked.
func TestLockedFloodLimitsNewcomers(t *testing.T) {
	const maxKeys = 2 * 4096 // two shards
	clock := storetest.NewClock(storetest.Base)
	store := memstore.New(&memstore.Options{MaxKeys: maxKeys, Clock: clock.Now, Logger: slog.New(slog.DiscardHandler)})
	lim, err := limiter.New(store, limiter.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	p := &limiter.Policy{Name: "login_user", Algorithm: limiter.SlidingLog, Limit: 10, Period: 5 * time.Minute, OnStoreError: limiter.FailAllow}
	ctx := context.Background()
	check := func(key string) bool {
		t.Helper()
		d := lim.Allow(ctx, p, key, 1)
		if d.Err != nil || d.Outcome != limiter.Allowed && d.Outcome != limiter.Denied {
			t.Fatalf("%s: outcome %s, err %v; want the store's own decision", key, d.Outcome, d.Err)
		}
		return d.Allowed
	}
	// Locked identities, eleven guesses each, until every shard is full.
	for i := 0; i < 2*maxKeys; i++ {
		for range 11 {
			check(fmt.Sprint("locked", i))
		}
	}
	if got := store.Len(); got < maxKeys*9/10 {
		t.Fatalf("%d keys held after the flood, want the cap %d", got, maxKeys)
	}
	admitted := 0
	for i := range 500 {
		if check(fmt.Sprint("newcomer", i)) {
			admitted++
		}
	}
	if admitted > 10 {
		t.Errorf("500 newcomers had %d guesses admitted; the overflow state grants 10 between them", admitted)
	}
	if check("locked0") || check(fmt.Sprint("locked", maxKeys/2)) {
		t.Error("a locked identity was unlocked by the flood")
	}
	t.Logf("%d keys held, %d evictions, %d overflow decisions, %d newcomers admitted", store.Len(), store.Evictions(), store.Overflows(), admitted)
}

// Eviction takes the state whose loss grants the least: the least quota in
// use as a share of its policy's capacity, at the instant of the eviction,
// passing over denying states. Each case is worked out by hand beside it.
func TestEvictsLeastInUse(t *testing.T) {
	bucket := &limiter.Policy{Name: "bucket", Algorithm: limiter.TokenBucket, Limit: 10, Period: 100 * time.Second} // 0.1 token a second
	small := &limiter.Policy{Name: "small", Algorithm: limiter.TokenBucket, Limit: 2, Period: 20 * time.Second}     // 0.1 token a second
	log := &limiter.Policy{Name: "log", Algorithm: limiter.SlidingLog, Limit: 4, Period: time.Minute}
	bigLog := &limiter.Policy{Name: "biglog", Algorithm: limiter.SlidingLog, Limit: 10, Period: time.Minute}
	fixed := &limiter.Policy{Name: "fixed", Algorithm: limiter.FixedWindow, Limit: 5, Period: time.Minute}
	big := &limiter.Policy{Name: "big", Algorithm: limiter.FixedWindow, Limit: 100, Period: time.Minute}
	window := &limiter.Policy{Name: "window", Algorithm: limiter.SlidingWindow, Limit: 10, Period: 10 * time.Second}

	type take struct {
		at     time.Duration // after storetest.Base, a multiple of 10s
		policy *limiter.Policy
		key    string
		cost   int64
	}
	type newcomer struct {
		policy *limiter.Policy
		key    string
		cost   int64
		victim string // policy/key of the state evicted for it, or "a|b": one of those, tied
	}
	cases := []struct {
		name      string
		maxKeys   int
		setup     []take
		at        time.Duration    // when the newcomers arrive
		remaining map[string]int64 // what each setup state has left then
		newcomers []newcomer
	}{
		{
			// At 15s: bucket/a holds 6 − 0.5 refilled = 5.5 of 10 (0.55);
			// log/b 1 of 4 (0.25); fixed/c 2 of 5 (0.4); window/d has its 6
			// in the previous window, half decayed: 3 of 10 (0.3);
			// bucket/z is empty (denying). Each newcomer takes 9 of the
			// bucket's 10 (0.9), so the older states go in order of share.
			name: "across policies by share", maxKeys: 5,
			setup: []take{
				{0, window, "d", 6},
				{10 * time.Second, bucket, "a", 6},
				{14 * time.Second, log, "b", 1},
				{15 * time.Second, fixed, "c", 2},
				{15 * time.Second, bucket, "z", 10},
			},
			at:        15 * time.Second,
			remaining: map[string]int64{"bucket/a": 4, "log/b": 3, "fixed/c": 3, "window/d": 7, "bucket/z": 0},
			newcomers: []newcomer{
				{bucket, "n1", 9, "log/b"},
				{bucket, "n2", 9, "window/d"},
				{bucket, "n3", 9, "fixed/c"},
				{bucket, "n4", 9, "bucket/a"},
				{bucket, "n5", 9, "bucket/n1|bucket/n2|bucket/n3|bucket/n4"}, // tied at 0.9; z denies
			},
		},
		{
			// small/k1 took both tokens at 0 and has 0.9 back at 9s: 1.1 of
			// 2 in use (0.55) but it cannot grant 1, so big/k2 (90 of 100,
			// 0.9) goes instead.
			name: "a denying state is passed over for a busier one", maxKeys: 2,
			setup: []take{
				{0, small, "k1", 2},
				{9 * time.Second, big, "k2", 90},
			},
			at:        9 * time.Second,
			remaining: map[string]int64{"small/k1": 0, "big/k2": 10},
			newcomers: []newcomer{{big, "k3", 95, "big/k2"}},
		},
		{
			// k1 wrote 3 in all (2 at 0, 1 at 40s) and k2 2 at 30s; at 65s
			// k1's first 2 have left the window (no call has trimmed them
			// yet): it holds 1, k2 2.
			name: "sliding_log: entries that left the window", maxKeys: 2,
			setup: []take{
				{0, bigLog, "k1", 2},
				{30 * time.Second, bigLog, "k2", 2},
				{40 * time.Second, bigLog, "k1", 1},
			},
			at:        65 * time.Second,
			remaining: map[string]int64{"biglog/k1": 9, "biglog/k2": 8},
			newcomers: []newcomer{{bigLog, "k3", 5, "biglog/k1"}},
		},
		{
			// k1 took 8 at 1s (window 0); when k2 took 3 at 12s, k1 still
			// weighed 8·0.8 = 6.4. At 18s it weighs 8·0.2 = 1.6 (2 units)
			// against k2's 3.
			name: "sliding_window: a heavy previous window decays", maxKeys: 2,
			setup: []take{
				{time.Second, window, "k1", 8},
				{12 * time.Second, window, "k2", 3},
			},
			at:        18 * time.Second,
			remaining: map[string]int64{"window/k1": 8, "window/k2": 7},
			newcomers: []newcomer{{window, "k3", 5, "window/k1"}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.maxKeys)
			policies := map[string]*limiter.Policy{}
			for _, s := range tc.setup {
				h.clock.Set(storetest.Base.Add(s.at))
				if d := h.take(s.policy, s.key, s.cost); !d.Allowed {
					t.Fatalf("setup %s/%s: %+v", s.policy.Name, s.key, d)
				}
				policies[s.policy.Name+"/"+s.key] = s.policy
			}
			// No call reads the states before the first newcomer: a read
			// would bring a sliding log up to date, which eviction must do
			// on its own.
			h.clock.Set(storetest.Base.Add(tc.at))
			remaining := tc.remaining
			for i, n := range tc.newcomers {
				if d := h.take(n.policy, n.key, n.cost); !d.Allowed {
					t.Fatalf("newcomer %s: %+v", n.key, d)
				}
				if got := h.store.Evictions(); got != uint64(i+1) {
					t.Fatalf("after newcomer %s: %d evictions, want %d", n.key, got, i+1)
				}
				var evicted []string
				for id, p := range policies {
					got := h.remaining(p, id[len(p.Name)+1:])
					switch {
					case got == remaining[id]:
					case got == p.Capacity():
						evicted = append(evicted, id)
					default:
						t.Errorf("newcomer %s: %s has %d left, want %d", n.key, id, got, remaining[id])
					}
				}
				if len(evicted) != 1 || !slices.Contains(strings.Split(n.victim, "|"), evicted[0]) {
					t.Fatalf("newcomer %s evicted %v, want %s", n.key, evicted, n.victim)
				}
				delete(policies, evicted[0])
				id := n.policy.Name + "/" + n.key
				policies[id], remaining[id] = n.policy, n.policy.Capacity()-n.cost
			}
		})
	}
}

// Real goroutines flood new keys into a small store while others hammer
// locked keys: the locks hold, no call fails, the cap holds. Run with -race.
func TestConcurrentFloodKeepsLocks(t *testing.T) {
	clock := storetest.NewClock(storetest.Base)
	s := memstore.New(&memstore.Options{MaxKeys: 64, Clock: clock.Now})
	ctx := context.Background()
	login := loginUser
	for i := range 8 {
		for range 10 {
			if _, err := s.Take(ctx, &login, fmt.Sprint("locked", i), 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 8 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				p := &login
				if i%2 == 0 {
					p = &apiBucket
				}
				if _, err := s.Take(ctx, p, fmt.Sprint("g", g, "-", i), 1); err != nil {
					errs <- err
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			for range 500 {
				d, err := s.Take(ctx, &login, fmt.Sprint("locked", g), 1)
				if err != nil || d.Allowed {
					errs <- fmt.Errorf("locked%d: %+v, %v", g, d, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := s.Len(); got > 64 {
		t.Errorf("Len = %d over the cap", got)
	}
	if s.Evictions() == 0 {
		t.Error("no eviction: the flood did not reach the cap")
	}
}
