package admin

import (
	"cmp"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/identity"
)

// The identities denied most over the last minute, per policy: what an
// operator asks first when limits trip ("who is being throttled?").
//
// Each policy keeps a ring of topBuckets buckets of topBucket each; a
// bucket is a Space-Saving summary (Metwally et al.) of at most TopSize
// identities: an identity already held counts one more; a new one takes a
// free slot, or else the slot of the one counted least, inheriting its
// count as its error. So whatever a flood of new identities does, memory
// stays bounded, and an identity denied more than 1/TopSize of a bucket's
// denials is never pushed out. What is reported is the count less its
// error: a lower bound of the identity's denials, exact for those that held
// their slot all along.

// TopSize is the most identities top reports (and keeps per bucket).
const TopSize = 100

const (
	topBucket  = 10 * time.Second
	topBuckets = 6 // the last minute
	// topPolicies bounds the policies kept: a config's are far fewer.
	topPolicies = 1024
)

// Entry is one identity of top, in the parts an operator acts on (reset,
// override): those its policy keys by, and its tenant.
type Entry struct {
	Denied   int64             `json:"denied"`
	Tenant   string            `json:"tenant"`
	APIKey   string            `json:"api_key,omitempty"`
	IP       string            `json:"ip,omitempty"`
	Username string            `json:"username,omitempty"`
	Route    string            `json:"route,omitempty"`
	Headers  map[string]string `json:"headers,omitempty"`
}

// Top counts denials per policy and identity, in process memory only.
// Safe for concurrent use; the zero value is not: use NewTop.
type Top struct {
	clock    func() time.Time
	mu       sync.Mutex
	policies map[string]*policyTop
}

// NewTop returns an empty Top; clock nil means time.Now.
func NewTop(clock func() time.Time) *Top {
	if clock == nil {
		clock = time.Now
	}
	return &Top{clock: clock, policies: map[string]*policyTop{}}
}

type policyTop struct {
	mu      sync.Mutex
	buckets [topBuckets]topSummary
}

type topSummary struct {
	slot  int64 // the bucket's start, in topBucket units since the epoch
	slots map[string]*topCounter
}

type topCounter struct {
	count, err int64
	entry      Entry
}

// Denied is the limiter's WithDenials hook: it counts a request a policy
// denied against its identity (the request's Caller, an
// *identity.Identity; others are not counted).
func (t *Top) Denied(r limiter.Request, _ limiter.Decision) {
	id, ok := r.Caller.(*identity.Identity)
	if !ok || r.Policy == nil {
		return
	}
	t.add(r.Policy, r.Key, id)
}

func (t *Top) add(p *limiter.Policy, key string, id *identity.Identity) {
	now := t.clock()
	t.mu.Lock()
	pt := t.policies[p.Name]
	if pt == nil {
		if len(t.policies) >= topPolicies {
			t.mu.Unlock()
			return
		}
		pt = &policyTop{}
		t.policies[strings.Clone(p.Name)] = pt
	}
	t.mu.Unlock()

	slot := now.UnixNano() / int64(topBucket)
	pt.mu.Lock()
	defer pt.mu.Unlock()
	b := &pt.buckets[slot%topBuckets]
	if b.slot != slot || b.slots == nil {
		b.slot, b.slots = slot, make(map[string]*topCounter, TopSize)
	}
	if c := b.slots[key]; c != nil {
		c.count++
		return
	}
	c := &topCounter{count: 1, entry: entryOf(p, id)}
	if len(b.slots) >= TopSize {
		var leastKey string
		var least *topCounter
		for k, x := range b.slots {
			if least == nil || x.count < least.count {
				leastKey, least = k, x
			}
		}
		delete(b.slots, leastKey)
		c.count, c.err = least.count+1, least.count
	}
	b.slots[strings.Clone(key)] = c
}

// entryOf is what an operator needs of id under p: the parts p keys by, in
// the form a client sends them, and the tenant.
func entryOf(p *limiter.Policy, id *identity.Identity) Entry {
	e := Entry{Tenant: strings.Clone(id.Tenant)}
	ip := func() { e.IP = identity.ClientText(id.Client()) }
	for _, part := range p.Key {
		switch part {
		case identity.PartIP:
			ip()
		case identity.PartAPIKey:
			if id.APIKey != "" {
				e.APIKey = strings.Clone(id.APIKey)
			} else {
				ip() // an anonymous caller's address stands in for its key
			}
		case identity.PartUsername:
			if id.Username != "" {
				e.Username = strings.Clone(id.Username)
			} else {
				ip()
			}
		case identity.PartRoute:
			e.Route = strings.Clone(id.Route)
		default:
			if name, ok := strings.CutPrefix(part, identity.PartHeaderPrefix); ok {
				if v := id.HeaderValue(name); v != "" {
					if e.Headers == nil {
						e.Headers = map[string]string{}
					}
					e.Headers[name] = v
				} else {
					ip()
				}
			}
		}
	}
	return e
}

// Policies returns the names of the policies that denied, sorted.
func (t *Top) Policies() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Sorted(maps.Keys(t.policies))
}

// Top returns the identities policy denied most over the last minute, at
// most TopSize, most denied first.
func (t *Top) Top(policy string) []Entry {
	t.mu.Lock()
	pt := t.policies[policy]
	t.mu.Unlock()
	if pt == nil {
		return []Entry{}
	}
	now := t.clock().UnixNano() / int64(topBucket)
	sum := map[string]*Entry{}
	pt.mu.Lock()
	for i := range pt.buckets {
		b := &pt.buckets[i]
		if b.slots == nil || b.slot <= now-topBuckets || b.slot > now {
			continue
		}
		for k, c := range b.slots {
			e := sum[k]
			if e == nil {
				cp := c.entry
				cp.Denied = 0
				e = &cp
				sum[k] = e
			}
			e.Denied += c.count - c.err
		}
	}
	pt.mu.Unlock()
	out := make([]Entry, 0, len(sum))
	for _, e := range sum {
		if e.Denied > 0 {
			out = append(out, *e)
		}
	}
	slices.SortFunc(out, func(a, b Entry) int {
		return cmp.Or(cmp.Compare(b.Denied, a.Denied), cmp.Compare(a.Tenant, b.Tenant), cmp.Compare(a.APIKey, b.APIKey),
			cmp.Compare(a.IP, b.IP), cmp.Compare(a.Username, b.Username))
	})
	return out[:min(len(out), TopSize)]
}
