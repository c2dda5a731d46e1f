package memstore

import (
	"context"
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"testing"
	"time"
	"unsafe"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/storetest"
)

// check verifies a shard's bookkeeping: the table finds every entry, each
// heap holds exactly its policy's entries with positions that match, keeps
// heap order on its stored keys, and every stored key is a lower bound of
// the value it stands for (ranks only once caught up, see catchUp).
func (sh *shard) check(t *testing.T, now int64) {
	t.Helper()
	live := 0
	free := map[int32]bool{}
	for _, i := range sh.free {
		free[i] = true
	}
	perGroup := make([]int, len(sh.groups))
	windows := map[int32]bool{}
	for i := range sh.entries {
		idx := int32(i)
		if free[idx] {
			continue
		}
		live++
		e := &sh.entries[idx]
		perGroup[e.group]++
		tag := uint32(maphash.String(sh.seed, e.key))
		found := false
		for j := sh.table.home(tag); sh.table.slots[j] != 0; j = (j + 1) & sh.table.mask {
			if sh.table.slots[j] == slotOf(tag, idx) {
				found = true
				break
			}
		}
		if !found {
			t.Fatalf("entry %d (%q) is not in the table", idx, e.key)
		}
		g := &sh.groups[e.group]
		st := sh.stateOf(idx)
		if g.bucket() != (e.window < 0) {
			t.Fatalf("entry %q of %s: window %d", e.key, g.name, e.window)
		}
		if g.bucket() {
			rank, lo := g.bucketFullAt(&st)
			if e.rank > rank || e.rank == rank && e.rankLo > lo {
				t.Fatalf("entry %q: bucket key (%d,%d) above the true (%d,%d)", e.key, e.rank, e.rankLo, rank, lo)
			}
		} else if w := &sh.windows[e.window]; w.expireAt > windowExpiry(g.pr, &st) {
			t.Fatalf("entry %q: expiry key %d above the true %d", e.key, w.expireAt, windowExpiry(g.pr, &st))
		} else if windows[e.window] {
			t.Fatalf("entry %q: window %d shared", e.key, e.window)
		} else {
			windows[e.window] = true
		}
		if g.pr.alg == fixedWindow && e.rank > st.cur {
			t.Fatalf("entry %q: rank %d above its count %d", e.key, e.rank, st.cur)
		}
	}
	if live != sh.count || live != sh.table.n {
		t.Fatalf("live entries %d, count %d, table %d", live, sh.count, sh.table.n)
	}
	if len(windows)+len(sh.wfree) != len(sh.windows) {
		t.Fatalf("%d windows in use, %d free, %d in all", len(windows), len(sh.wfree), len(sh.windows))
	}
	if sh.count > sh.maxKeys {
		t.Fatalf("count %d over the cap %d", sh.count, sh.maxKeys)
	}
	for gi := range sh.groups {
		g := &sh.groups[gi]
		for hid := range numHeaps {
			h := &g.heaps[hid]
			if !g.uses(hid) {
				if len(h.items) != 0 {
					t.Fatalf("group %s: unused heap %d holds %d", g.name, hid, len(h.items))
				}
				continue
			}
			if len(h.items) != perGroup[gi] {
				t.Fatalf("group %s heap %d: %d items, group has %d entries", g.name, hid, len(h.items), perGroup[gi])
			}
			for i, idx := range h.items {
				if free[idx] || sh.entries[idx].group != int32(gi) {
					t.Fatalf("group %s heap %d: item %d is entry %d of another group or free", g.name, hid, i, idx)
				}
				if int(*sh.posOf(h, idx)) != i {
					t.Fatalf("group %s heap %d: entry %d at %d says %d", g.name, hid, idx, i, *sh.posOf(h, idx))
				}
				if i > 0 && sh.less(h, i, (i-1)/2) {
					t.Fatalf("group %s heap %d: item %d below its parent", g.name, hid, i)
				}
			}
		}
	}
	if top := sh.earliestExpiry(); top < sh.nextDue {
		t.Fatalf("nextDue %d after the earliest expiry key %d", sh.nextDue, top)
	}
}

func (sh *shard) earliestExpiry() int64 {
	earliest := int64(1<<63 - 1)
	for gi := range sh.groups {
		g := &sh.groups[gi]
		if h := g.expiry(); len(h.items) > 0 {
			earliest = min(earliest, sh.expiryKey(g, h.items[0]))
		}
	}
	return earliest
}

// Random calls of every kind, on small caps, keep the bookkeeping sound.
func TestBookkeepingUnderRandomCalls(t *testing.T) {
	for seed := range uint64(30) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			clock := storetest.NewClock(storetest.Base)
			s := New(&Options{MaxKeys: 1 + rng.IntN(40), Clock: clock.Now})
			var policies []*limiter.Policy
			for i, alg := range limiter.Algorithms() {
				p := &limiter.Policy{Name: fmt.Sprint("p", i), Algorithm: alg,
					Limit: 1 + rng.Int64N(12), Period: time.Duration(1+rng.IntN(3000)) * time.Millisecond}
				if p.IsBucket() && rng.IntN(2) == 0 {
					p.Burst = 1 + rng.Int64N(20)
				}
				policies = append(policies, p)
			}
			ctx := context.Background()
			var receipts []limiter.Receipt
			for step := range 3000 {
				if rng.IntN(3) == 0 {
					clock.Advance(time.Duration(rng.Int64N(int64(400 * time.Millisecond))))
				}
				pi := rng.IntN(len(policies))
				p := policies[pi]
				reloaded := false
				if rng.IntN(200) == 0 {
					reloaded = true
					// A reload: the same name with other numbers.
					q := *p
					q.Limit = 1 + rng.Int64N(12)
					policies[pi] = &q
					p = &q
				}
				for _, g := range s.shards[0].groups {
					// A reload reaches a shard only at the first call that finds the policy's keys.
					if g.name == p.Name && g.pr != paramsOf(p) {
						reloaded = true
					}
				}
				key := fmt.Sprint("k", rng.IntN(60))
				before := s.shards[0].snapshot(clock.Now().UnixMicro())
				evictions, overflows := s.Evictions(), s.Overflows()
				var err error
				switch r := rng.IntN(10); {
				case r == 0 && len(receipts) > 0:
					_, err = s.Undo(ctx, p, key, receipts[rng.IntN(len(receipts))])
				default:
					var d limiter.Decision
					d, err = s.Take(ctx, p, key, rng.Int64N(p.Capacity()+1))
					if d.Receipt.Cost > 0 {
						receipts = append(receipts, d.Receipt)
					}
				}
				if err != nil {
					t.Fatalf("step %d: %v", step, err)
				}
				if !reloaded {
					s.shards[0].checkEviction(t, before, key, p, s.Overflows() > overflows, s.Evictions()-evictions)
				}
				for i := range s.shards {
					s.shards[i].check(t, clock.Now().UnixMicro())
				}
			}
			t.Logf("cap %d: %d evictions", s.shards[0].maxKeys, s.Evictions())
		})
	}
}

// held is a state as the oracle sees it before a step.
type held struct {
	key, policy    string
	used, capacity int64
	denying        bool
}

func (sh *shard) snapshot(now int64) map[string]held {
	free := map[int32]bool{}
	for _, i := range sh.free {
		free[i] = true
	}
	out := map[string]held{}
	for i := range sh.entries {
		if free[int32(i)] {
			continue
		}
		e := &sh.entries[i]
		g := &sh.groups[e.group]
		st := sh.stateOf(int32(i))
		used, capacity, unit := usage(g.pr, &st, now)
		if used == 0 {
			continue // full again: the sweep takes it, not an eviction
		}
		out[g.name+"/"+e.key] = held{e.key, g.name, used, capacity, used > capacity-unit}
	}
	return out
}

// checkEviction holds a step to the eviction rule by brute force: a state
// that went was the least in use of the states that were not denying, and
// the store was full only when every state denied.
func (sh *shard) checkEviction(t *testing.T, before map[string]held, key string, p *limiter.Policy, full bool, evicted uint64) {
	t.Helper()
	after := map[string]bool{}
	for i := range sh.entries {
		e := &sh.entries[i]
		if e.key != "" {
			after[sh.groups[e.group].name+"/"+e.key] = true
		}
	}
	open := 0
	for _, h := range before {
		if !h.denying {
			open++
		}
	}
	if full && open > 0 {
		t.Fatalf("the overflow state decided with %d states that were not denying", open)
	}
	var gone []held
	for id, h := range before {
		if !after[id] && id != p.Name+"/"+key {
			gone = append(gone, h)
		}
	}
	if uint64(len(gone)) != evicted {
		t.Fatalf("%d states went (%+v), %d evictions counted (step on %s/%s)", len(gone), gone, evicted, p.Name, key)
	}
	for _, g := range gone {
		if g.denying {
			t.Fatalf("evicted %s/%s, which was denying (%d of %d in use); step %+v on %q", g.policy, g.key, g.used, g.capacity, *p, key)
		}
		for _, h := range before {
			if !h.denying && lessShare(h.used, h.capacity, g.used, g.capacity) {
				t.Fatalf("evicted %s/%s (%d of %d in use) while %s/%s held only %d of %d",
					g.policy, g.key, g.used, g.capacity, h.policy, h.key, h.used, h.capacity)
			}
		}
	}
}

func TestTable(t *testing.T) {
	var tb table
	rng := rand.New(rand.NewPCG(1, 2))
	want := map[int32]uint32{}
	for step := range 20000 {
		if len(want) > 0 && rng.IntN(2) == 0 {
			for idx, tag := range want {
				tb.delete(tag, idx)
				delete(want, idx)
				break
			}
		} else {
			idx := int32(step)
			tag := uint32(rng.IntN(64)) // many collisions and long runs
			tb.insert(tag, idx)
			want[idx] = tag
		}
		if tb.n != len(want) {
			t.Fatalf("n = %d, want %d", tb.n, len(want))
		}
	}
	for idx, tag := range want {
		found := false
		for j := tb.home(tag); tb.slots[j] != 0; j = (j + 1) & tb.mask {
			if tb.slots[j] == slotOf(tag, idx) {
				found = true
			}
		}
		if !found {
			t.Fatalf("entry %d (tag %d) lost", idx, tag)
		}
	}
}

// A bucket step touches one cache line of entries (see entry).
func TestEntryIsOneCacheLine(t *testing.T) {
	if got := unsafe.Sizeof(entry{}); got != 64 {
		t.Errorf("entry is %d bytes, want 64", got)
	}
}

// divisor agrees with the DIV instruction, at the edges and at random.
func TestDivisor(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	ds := []int64{1, 2, 3, 7, 10, 1000, 1_000_000, 999_999_937, 1 << 31, 1<<53 - 1, 1 << 53, 1<<62 + 1, 1<<63 - 1}
	for range 200 {
		ds = append(ds, 1+rng.Int64N(1<<rng.IntN(63)))
	}
	for _, d := range ds {
		v := newDivisor(d)
		ns := []int64{0, 1, d - 1, d, d + 1, 2*d - 1, 1<<53 - 1, 1<<63 - 1, 1<<63 - 1 - d}
		for range 200 {
			ns = append(ns, rng.Int64N(1<<rng.IntN(63)))
		}
		for _, n := range ns {
			if n < 0 {
				continue
			}
			q, r := v.divmod(n)
			if q != n/d || r != n%d {
				t.Fatalf("%d / %d: got %d rem %d, want %d rem %d", n, d, q, r, n/d, n%d)
			}
			if c := v.ceil(n); c != n/d+b2i(n%d != 0) {
				t.Fatalf("ceil(%d / %d) = %d", n, d, c)
			}
		}
	}
}
