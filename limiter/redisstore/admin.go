package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/costgate/costgate/limiter"
)

// What operators change at runtime, shared by every gateway of the store:
// resets and overrides. The overrides live in one hash (they survive a
// gateway's restart); every change is also appended to one stream, which
// every gateway reads from its last entry every WatchInterval. The stream's
// last ID is an epoch every gateway reads, and the entries since it are the
// changes: a gateway that lost Redis for a while reads the resets it
// missed when it is back, where a pub/sub message sent meanwhile would be
// lost. A gateway that finds its place trimmed away (or the stream gone, a
// Redis restarted empty) starts afresh: it reloads the overrides and
// forgets its deny cache (AdminResync).

// WatchInterval is how often a watching store reads the admin stream: an
// override or a reset made on one gateway applies on the others within
// this and a round trip.
const WatchInterval = 100 * time.Millisecond

// overridesReread is how often the overrides are read whole, the stream
// notwithstanding (a Redis restarted from a snapshot, say).
const overridesReread = 10 * time.Second

// Bounds of the admin keys: the stream keeps its last entries (about) and
// lives a day after its last change; the hash outlives the longest override.
const (
	adminStreamLen = 10_000
	adminStreamTTL = 24 * time.Hour
	overridesTTL   = limiter.MaxOverrideLife + 24*time.Hour
)

// MaxOverrides bounds the overrides a store keeps.
const MaxOverrides = 10_000

// ErrTooManyOverrides is returned by PutOverride at MaxOverrides.
var ErrTooManyOverrides = fmt.Errorf("redisstore: at most %d overrides", MaxOverrides)

// AdminEventKind tells what an AdminEvent asks of a gateway.
type AdminEventKind string

// The kinds of AdminEvent.
const (
	// AdminResync: the overrides are in Overrides; the gateway may have
	// missed resets, so it forgets its deny cache. Sent first, when the
	// watch starts.
	AdminResync AdminEventKind = "resync"
	// AdminOverrides: the overrides changed; they are in Overrides.
	AdminOverrides AdminEventKind = "overrides"
	// AdminReset: a gateway (this one too) reset the states in Resets;
	// this store has already dropped its local-first leases of them.
	AdminReset AdminEventKind = "reset"
	// AdminError: the store could not read the stream or the overrides
	// (Err); it tries again at the next interval.
	AdminError AdminEventKind = "error"
)

// AdminEvent is what Watch hands its function.
type AdminEvent struct {
	Kind      AdminEventKind
	Overrides []limiter.Override
	Resets    []ResetKey
	Err       error
}

// ResetKey is one state reset: a policy's name and a key.
type ResetKey struct {
	Policy string
	Key    string
}

func (s *Store) overridesKey() string { return s.prefix + "{admin}:overrides" }
func (s *Store) eventsKey() string    { return s.prefix + "{admin}:events" }

// stateSuffixes are the suffixes of every state a key may hold under a
// policy of one name: each algorithm's, and the local-first one.
func stateSuffixes() []string {
	var out []string
	for _, sfx := range suffixes {
		out = append(out, sfx...)
	}
	out = append(out, syncSuffix)
	slices.Sort(out)
	return slices.Compact(out)
}

var _ limiter.Resetter = (*Store)(nil)

// Reset implements limiter.Resetter: it deletes every state key holds
// under policies of p's name (any algorithm, exact and local-first: one
// slot, one DEL), drops this gateway's lease of it, and tells the other
// gateways (the admin stream), whose Watch drops theirs. The state is reset
// even when telling fails; the error says so.
//
// A local-first state is reset again (deleted, and every gateway told)
// resetRepeats later: what the other gateways granted before the reset,
// and pushed before they heard of it, belonged to the state reset, not to
// the fresh one, and a denial it caused meanwhile must not stay in a deny
// cache. (What they grant from a lease taken in between is not counted
// against the fresh state: at most a lease per gateway.)
func (s *Store) Reset(ctx context.Context, p *limiter.Policy, key string) error {
	t := tag(p, key)
	var keys []string
	for _, sfx := range stateSuffixes() {
		keys = append(keys, s.redisKey(&t, sfx))
	}
	if err := s.client.Del(ctx, keys...).Err(); err != nil {
		return fmt.Errorf("redisstore: reset %s: %w", p.Name, err)
	}
	s.lf.drop([]ResetKey{{p.Name, key}})
	if p.Sync > 0 {
		s.resetAgain(p.Name, key, s.redisKey(&t, syncSuffix))
	}
	if err := s.publish(ctx, "reset", p.Name, key); err != nil {
		return fmt.Errorf("redisstore: reset %s: the state is reset, but the other gateways were not told (their deny caches and leases end on their own): %w", p.Name, err)
	}
	return nil
}

// resetRepeats are the delays after a reset at which a local-first state
// is deleted again: once every gateway has read the stream, and once more
// at the second within which a reset reaches them all.
var resetRepeats = []time.Duration{3 * WatchInterval, time.Second}

func (s *Store) resetAgain(policy, key, redisKey string) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		start := time.Now()
		for _, at := range resetRepeats {
			t := time.NewTimer(at - time.Since(start))
			select {
			case <-s.stop:
				t.Stop()
				return
			case <-t.C:
			}
			// Best effort: the first reset was the one asked for.
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			if s.client.Del(ctx, redisKey).Err() == nil {
				s.lf.drop([]ResetKey{{policy, key}})
				_ = s.publish(ctx, "reset", policy, key)
			}
			cancel()
		}
	}()
}

// publish appends an event to the admin stream.
func (s *Store) publish(ctx context.Context, kind, policy, key string) error {
	_, err := s.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.XAdd(ctx, &redis.XAddArgs{Stream: s.eventsKey(), MaxLen: adminStreamLen, Approx: true,
			Values: []any{"k", kind, "p", policy, "key", key, "g", s.lf.gateway}})
		p.Expire(ctx, s.eventsKey(), adminStreamTTL)
		return nil
	})
	return err
}

// PutOverride stores o under its name (replacing one of that name) and
// tells every gateway. It refuses an override that has expired, and a new
// one beyond MaxOverrides.
func (s *Store) PutOverride(ctx context.Context, o limiter.Override) error {
	b, err := json.Marshal(o)
	if err != nil {
		return fmt.Errorf("redisstore: override: %w", err)
	}
	n, err := s.client.HLen(ctx, s.overridesKey()).Result()
	if err != nil {
		return fmt.Errorf("redisstore: override: %w", err)
	}
	if n >= MaxOverrides {
		list, err := s.Overrides(ctx) // drops the expired ones
		if err != nil {
			return err
		}
		if len(list) >= MaxOverrides && !slices.ContainsFunc(list, func(x limiter.Override) bool { return x.Name == o.Name }) {
			return ErrTooManyOverrides
		}
	}
	_, err = s.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, s.overridesKey(), o.Name, b)
		p.Expire(ctx, s.overridesKey(), overridesTTL)
		p.XAdd(ctx, &redis.XAddArgs{Stream: s.eventsKey(), MaxLen: adminStreamLen, Approx: true,
			Values: []any{"k", "overrides", "p", "", "key", o.Name, "g", s.lf.gateway}})
		p.Expire(ctx, s.eventsKey(), adminStreamTTL)
		return nil
	})
	if err != nil {
		return fmt.Errorf("redisstore: override: %w", err)
	}
	return nil
}

// DeleteOverride removes the override of that name and tells every
// gateway; it reports whether there was one.
func (s *Store) DeleteOverride(ctx context.Context, name string) (bool, error) {
	var del *redis.IntCmd
	_, err := s.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		del = p.HDel(ctx, s.overridesKey(), name)
		p.XAdd(ctx, &redis.XAddArgs{Stream: s.eventsKey(), MaxLen: adminStreamLen, Approx: true,
			Values: []any{"k", "overrides", "p", "", "key", name, "g", s.lf.gateway}})
		p.Expire(ctx, s.eventsKey(), adminStreamTTL)
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("redisstore: override: %w", err)
	}
	return del.Val() > 0, nil
}

// Overrides returns the overrides in effect, by name; it deletes those
// that have expired (and any it cannot read) as it goes.
func (s *Store) Overrides(ctx context.Context) ([]limiter.Override, error) {
	m, err := s.client.HGetAll(ctx, s.overridesKey()).Result()
	if err != nil {
		return nil, fmt.Errorf("redisstore: overrides: %w", err)
	}
	now := time.Now()
	var out []limiter.Override
	var gone []string
	for name, v := range m {
		var o limiter.Override
		if json.Unmarshal([]byte(v), &o) != nil || o.Name != name {
			gone = append(gone, name)
			continue
		}
		if !o.Expires.After(now) {
			gone = append(gone, name)
			continue
		}
		out = append(out, o)
	}
	if len(gone) > 0 {
		// An expired override applies nowhere already; this only tidies.
		_ = s.client.HDel(ctx, s.overridesKey(), gone...).Err()
	}
	slices.SortFunc(out, func(a, b limiter.Override) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Watch starts reading the admin stream every WatchInterval and calls f
// with what the other gateways changed: AdminResync first (with the
// overrides), then AdminOverrides and AdminReset as they come, AdminError
// when a read fails. f runs on the watch's goroutine, one event at a time.
// A Store watches at most once; the watch ends with Close.
func (s *Store) Watch(f func(AdminEvent)) {
	s.watchOnce.Do(func() {
		s.wg.Add(1)
		go s.watch(f)
	})
}

// streamID is an entry ID of a stream, ms-seq.
type streamID struct{ ms, seq uint64 }

func parseStreamID(s string) (streamID, bool) {
	a, b, ok := strings.Cut(s, "-")
	ms, err1 := strconv.ParseUint(a, 10, 64)
	seq, err2 := strconv.ParseUint(b, 10, 64)
	return streamID{ms, seq}, ok && err1 == nil && err2 == nil
}

func (a streamID) less(b streamID) bool { return a.ms < b.ms || a.ms == b.ms && a.seq < b.seq }
func (a streamID) String() string       { return fmt.Sprintf("%d-%d", a.ms, a.seq) }

// watcher is the state of Watch's loop.
type watcher struct {
	s    *Store
	f    func(AdminEvent)
	last streamID // the last entry read
	// synced: the loop knows where it is in the stream and has the
	// overrides; false at start and after a gap.
	synced   bool
	failed   bool // the last read failed: look for a gap before reading on
	reload   bool // an override changed and the overrides are still to be read
	reloadAt time.Time
}

func (s *Store) watch(f func(AdminEvent)) {
	defer s.wg.Done()
	w := &watcher{s: s, f: f}
	t := time.NewTicker(WatchInterval)
	defer t.Stop()
	for {
		w.poll()
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
	}
}

// poll is one turn of the loop, bounded in time.
func (w *watcher) poll() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := w.step(ctx); err != nil {
		w.failed = true
		w.f(AdminEvent{Kind: AdminError, Err: err})
		return
	}
	w.failed = false
}

func (w *watcher) step(ctx context.Context) error {
	s := w.s
	if !w.synced || w.failed || w.reload || time.Now().After(w.reloadAt) {
		// Where the stream ends now, before the overrides are read, so
		// that a change between the two is read again, not missed.
		tail, err := w.tail(ctx)
		if err != nil {
			return err
		}
		gap := !w.synced || tail.less(w.last)
		if w.synced && !gap && w.failed {
			first, ok, err := w.first(ctx)
			if err != nil {
				return err
			}
			gap = ok && w.last.less(first)
		}
		if gap || w.reload || time.Now().After(w.reloadAt) {
			list, err := s.Overrides(ctx)
			if err != nil {
				return err
			}
			w.reload, w.reloadAt = false, time.Now().Add(overridesReread)
			if gap {
				w.last, w.synced = tail, true
				w.f(AdminEvent{Kind: AdminResync, Overrides: list})
				return nil
			}
			w.f(AdminEvent{Kind: AdminOverrides, Overrides: list})
		}
	}
	res, err := s.client.XRead(ctx, &redis.XReadArgs{Streams: []string{s.eventsKey(), w.last.String()}, Count: 1000, Block: -1}).Result()
	if errors.Is(err, redis.Nil) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("redisstore: admin stream: %w", err)
	}
	var resets []ResetKey
	for _, st := range res {
		for _, m := range st.Messages {
			if id, ok := parseStreamID(m.ID); ok {
				w.last = id
			}
			own := m.Values["g"] == s.lf.gateway
			switch m.Values["k"] {
			case "reset":
				// This gateway's own too: a reset repeated (Reset) must clear
				// here what it clears elsewhere. Applying one twice is harmless.
				p, _ := m.Values["p"].(string)
				k, _ := m.Values["key"].(string)
				resets = append(resets, ResetKey{p, k})
			case "overrides":
				w.reload = w.reload || !own // this gateway read its own change back already
			}
		}
	}
	if len(resets) > 0 {
		s.lf.drop(resets)
		w.f(AdminEvent{Kind: AdminReset, Resets: resets})
	}
	if w.reload {
		list, err := s.Overrides(ctx)
		if err != nil {
			return err
		}
		w.reload, w.reloadAt = false, time.Now().Add(overridesReread)
		w.f(AdminEvent{Kind: AdminOverrides, Overrides: list})
	}
	return nil
}

// tail is the ID of the stream's last entry (0-0 when there is none).
func (w *watcher) tail(ctx context.Context) (streamID, error) {
	msgs, err := w.s.client.XRevRangeN(ctx, w.s.eventsKey(), "+", "-", 1).Result()
	if err != nil {
		return streamID{}, fmt.Errorf("redisstore: admin stream: %w", err)
	}
	if len(msgs) == 0 {
		return streamID{}, nil
	}
	id, _ := parseStreamID(msgs[0].ID)
	return id, nil
}

// first is the ID of the stream's first entry, if it has one.
func (w *watcher) first(ctx context.Context) (streamID, bool, error) {
	msgs, err := w.s.client.XRangeN(ctx, w.s.eventsKey(), "-", "+", 1).Result()
	if err != nil {
		return streamID{}, false, fmt.Errorf("redisstore: admin stream: %w", err)
	}
	if len(msgs) == 0 {
		return streamID{}, false, nil
	}
	id, ok := parseStreamID(msgs[0].ID)
	return id, ok, nil
}

// drop forgets this gateway's local-first entries of the reset states:
// their next check takes a fresh lease of the fresh state, and what they
// granted from the old one is never pushed to the new. One pass over the
// entries however many states.
func (lf *localFirst) drop(resets []ResetKey) {
	want := make(map[ResetKey]bool, len(resets))
	for _, r := range resets {
		want[r] = true
	}
	var dropped []*lfEntry
	lf.mu.Lock()
	for k, e := range lf.entries {
		if want[ResetKey{k.p.Name, k.key}] {
			delete(lf.entries, k)
			dropped = append(dropped, e)
		}
	}
	lf.mu.Unlock()
	for _, e := range dropped {
		// It may still be queued for a sync: it pushes nothing, and grants
		// nothing more from its lease.
		e.mu.Lock()
		e.pend, e.used, e.synced, e.lease = [2]pending{}, 0, false, 0
		e.mu.Unlock()
	}
}

// Lease is this gateway's lease of a local-first state, for people.
type Lease struct {
	// Lease is what the last sync leased, Used what was granted of it.
	Lease, Used int64
	// Synced is when the sync that got it was sent (zero: never).
	Synced time.Time
	// Gateways is how many gateways shared the key at that sync.
	Gateways int64
	// Outage reports that the last round trip failed.
	Outage bool
}

// Lease returns this gateway's lease of key under the local-first policy
// of p's name (the one synced last, when plans or overrides made several),
// if it holds one.
func (s *Store) Lease(p *limiter.Policy, key string) (Lease, bool) {
	var found []*lfEntry
	s.lf.mu.RLock()
	if e := s.lf.entries[lfKey{p, key}]; e != nil {
		found = append(found, e)
	} else {
		for k, e := range s.lf.entries {
			if k.key == key && k.p.Name == p.Name {
				found = append(found, e)
			}
		}
	}
	s.lf.mu.RUnlock()
	var best Lease
	ok := false
	for _, e := range found {
		e.mu.Lock()
		l := Lease{Lease: e.lease, Used: e.used, Gateways: e.gateways, Outage: e.outage}
		if e.synced {
			l.Synced = e.syncedAt
		}
		e.mu.Unlock()
		if !ok || l.Synced.After(best.Synced) {
			best, ok = l, true
		}
	}
	return best, ok
}

// PeekShared reads key's shared state under p (p.Sync > 0) without
// charging or leasing anything: Remaining is what the store holds beyond
// the gateways' leases. (A Peek of a local-first policy answers from this
// gateway's lease.) It asks as a gateway of its own, which takes no lease,
// so this gateway's lease stays its own.
func (s *Store) PeekShared(ctx context.Context, p *limiter.Policy, key string) (limiter.Decision, error) {
	sc := s.lf.scripts[p.Algorithm]
	if p.Sync <= 0 || sc == nil {
		return limiter.Decision{}, &limiter.PolicyError{Policy: p.Name, Field: "sync", Reason: "not a local-first policy"}
	}
	peek := s.peeker()
	e := &lfEntry{p: p, key: key, redisKey: s.lf.redisKey(p, key), sc: sc, offset: s.lf.offset(p, key)}
	return peek.roundTrip(ctx, e, 0, false)
}

// peeker is a localFirst of its own gateway id, for PeekShared.
func (s *Store) peeker() *localFirst {
	s.peekOnce.Do(func() {
		s.peek = &localFirst{s: s, gateway: "peek-" + s.lf.gateway, scripts: s.lf.scripts, entries: map[lfKey]*lfEntry{}}
		s.peek.gateways.Store(1)
	})
	return s.peek
}

// adminFields of Store (store.go) kept here.
type adminFields struct {
	watchOnce sync.Once
	peekOnce  sync.Once
	peek      *localFirst
}
