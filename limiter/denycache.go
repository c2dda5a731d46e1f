package limiter

import (
	"sync"
	"time"
)

// maxDenied bounds the deny cache of policies with LocalCache.
const maxDenied = 1 << 16

// denyCache remembers keys the store denied (Policy.LocalCache) until the
// store said the same cost could pass. An entry's time is measured from
// before the request went out, so it ends no later than the store's own
// retry-after: the cache denies only what the store would deny.
type denyCache struct {
	mu sync.Mutex
	m  map[denyKey]denied
}

type denyKey struct {
	policy *Policy
	key    string
}

type denied struct {
	cost      int64     // the smallest cost known to be denied
	until     time.Time // when that cost can pass
	resetAt   time.Time // when the quota is full again
	remaining int64
	limit     int64
}

// get returns a denial of cost for k made from the cache, if it holds one.
func (c *denyCache) get(k denyKey, cost int64, now time.Time) (Decision, bool) {
	c.mu.Lock()
	e, ok := c.m[k]
	if ok && !now.Before(e.until) {
		delete(c.m, k)
		ok = false
	}
	c.mu.Unlock()
	if !ok || cost < e.cost {
		return Decision{}, false
	}
	return Decision{
		Limit:      e.limit,
		Remaining:  e.remaining,
		Cost:       cost,
		RetryAfter: e.until.Sub(now),
		ResetAfter: max(e.resetAt.Sub(now), e.until.Sub(now)),
	}, true
}

// put remembers d, a denial by the store of a request sent at sent.
func (c *denyCache) put(k denyKey, d Decision, sent time.Time) {
	if d.RetryAfter <= 0 || d.ExceedsCapacity {
		return
	}
	e := denied{cost: d.Cost, until: sent.Add(d.RetryAfter), resetAt: sent.Add(d.ResetAfter), remaining: d.Remaining, limit: d.Limit}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[denyKey]denied)
	}
	if old, ok := c.m[k]; ok && old.cost < e.cost && sent.Before(old.until) {
		// A smaller cost is already known denied for longer; keep it.
		return
	}
	if len(c.m) >= maxDenied {
		for key, old := range c.m {
			if !sent.Before(old.until) {
				delete(c.m, key)
			}
		}
		if len(c.m) >= maxDenied {
			return
		}
	}
	c.m[k] = e
}

// forget drops k: something was given back to it.
func (c *denyCache) forget(k denyKey) {
	c.mu.Lock()
	delete(c.m, k)
	c.mu.Unlock()
}
