package limiter

import (
	"cmp"
	"fmt"
	"hash/maphash"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/costgate/costgate/internal/names"
)

// Operator overrides: an operator raises or lowers one identity's limit,
// exempts it or blocks it, for a while, without editing a config. The doors
// apply them through [Overrides.Apply] (identity.Resolver.Request does it for
// every door of costgate) and the Limiter acts on [Request.Override].

// Action is what an override does to the requests it applies to.
type Action string

// The actions of an override.
const (
	// ActionLimit replaces the policy's limit and burst (Override.Limit
	// and Override.Burst) or multiplies them (Override.Multiplier).
	ActionLimit Action = "limit"
	// ActionAllow exempts: the policy never limits the requests, and the
	// store is not asked (decisions are Exempt, counted and logged).
	ActionAllow Action = "allow"
	// ActionDeny blocks: every request is refused (decisions are Blocked;
	// HTTP answers 403 "blocked"), in shadow mode too, charging nothing.
	ActionDeny Action = "deny"
)

// Outcomes of the checks an override decided, beside those of store.go.
const (
	// Blocked is a request refused by a deny override.
	Blocked Outcome = "blocked"
	// Exempt is a request served unlimited by an allow override.
	Exempt Outcome = "exempt"
)

// MaxOverrideLife is the longest an override may last.
const MaxOverrideLife = 30 * 24 * time.Hour

// MaxMultiplier bounds Override.Multiplier: a typo must not become 10^9.
const MaxMultiplier = 1_000_000

// Override is one operator override. It applies to the requests of its
// Targets until Expires.
type Override struct {
	// Name names the override (letters, digits, '_', '-', '.'): putting
	// an override of the same name replaces it.
	Name string `json:"name"`
	// Policy is the policy as the operator named it; "" for every policy.
	// Targets say what it applies to.
	Policy  string   `json:"policy,omitempty"`
	Targets []Target `json:"targets"`
	Action  Action   `json:"action"`
	// Limit and Burst, for ActionLimit, replace the policy's (Burst 0: the
	// new Limit, as in a Policy; the windows take no burst). Multiplier,
	// instead, multiplies the limit and burst the request would have had
	// (its plan's included), rounded down, at least 1.
	Limit      int64   `json:"limit,omitempty"`
	Burst      int64   `json:"burst,omitempty"`
	Multiplier float64 `json:"multiplier,omitempty"`
	// Expires is when it stops applying.
	Expires time.Time `json:"expires"`
	// Created, By and Who are for people: when it was put, by whom (an
	// admin token's name), and the identity it names, redacted (no
	// secret, address or username in the clear).
	Created time.Time         `json:"created"`
	By      string            `json:"by,omitempty"`
	Who     map[string]string `json:"who,omitempty"`
}

// Target is what an override applies to: one store key of one policy, or
// every key of a tenant (Key "") under one policy or, with Policy "", under
// every policy.
type Target struct {
	Policy string `json:"policy,omitempty"`
	Key    string `json:"key,omitempty"`
	Tenant string `json:"tenant,omitempty"`
}

// Validate checks o as of now: a name, at least one target, an action with
// what it needs, and an expiry after now and at most MaxOverrideLife
// ahead. The error is a *FieldError naming the field in the admin API's
// spelling (name, policy, tenant, action, limit, burst, multiplier, expires).
func (o *Override) Validate(now time.Time) error {
	fail := func(field, format string, args ...any) error {
		return &FieldError{Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	switch {
	case o.Name == "":
		return fail("name", "required")
	case len(o.Name) > 128 || !names.Valid(o.Name):
		return fail("name", "at most 128 letters, digits, '_', '-' and '.', got %q", o.Name)
	case len(o.Targets) == 0:
		return fail("policy", "the override names no identity")
	}
	for _, t := range o.Targets {
		switch {
		case t.Key == "" && t.Tenant == "":
			return fail("tenant", "a target needs a key or a tenant")
		case t.Key != "" && t.Tenant != "":
			return fail("tenant", "a target is a key or a tenant, not both")
		case t.Key != "" && t.Policy == "":
			return fail("policy", "a key belongs to one policy")
		}
	}
	switch o.Action {
	case ActionAllow, ActionDeny:
		if o.Limit != 0 || o.Burst != 0 || o.Multiplier != 0 {
			return fail("action", "%s takes no limit, burst or multiplier", o.Action)
		}
	case ActionLimit:
		switch {
		case o.Multiplier != 0 && (o.Limit != 0 || o.Burst != 0):
			return fail("multiplier", "either a multiplier or a limit (and burst), not both")
		case o.Multiplier != 0 && !(o.Multiplier > 0 && o.Multiplier <= MaxMultiplier):
			return fail("multiplier", "must be above 0 and at most %d, got %v", MaxMultiplier, o.Multiplier)
		case o.Multiplier == 0 && o.Limit < 1:
			return fail("limit", "action limit needs a limit of at least 1 (or a multiplier), got %d", o.Limit)
		case o.Burst < 0:
			return fail("burst", "must not be negative, got %d", o.Burst)
		case o.Limit > MaxExact || o.Burst > MaxExact:
			return fail("limit", "must be at most 2^53-1")
		}
	case "":
		return fail("action", "required: limit, allow or deny")
	default:
		return fail("action", "unknown action %q (limit, allow or deny)", o.Action)
	}
	switch {
	case o.Expires.IsZero():
		return fail("expires", "required: a duration (1h) or an RFC 3339 time, at most 30 days ahead")
	case !o.Expires.After(now):
		return fail("expires", "%s is in the past", o.Expires.UTC().Format(time.RFC3339))
	case o.Expires.Sub(now) > MaxOverrideLife:
		return fail("expires", "at most 30 days ahead, got %.1f days", o.Expires.Sub(now).Hours()/24)
	}
	return nil
}

// Derive returns the policy a limit override makes of p, the policy a
// request would have had (its plan's multiplier applied), and whether it
// makes a valid one. Allow and deny overrides leave p as it is.
func (o *Override) Derive(p *Policy) (*Policy, error) {
	if o.Action != ActionLimit {
		return p, nil
	}
	if o.Burst != 0 && !p.IsBucket() {
		return p, &FieldError{Field: "burst", Reason: fmt.Sprintf("policy %q is a window (%s): it takes a limit, no burst", p.Name, p.Algorithm)}
	}
	d := *p
	if o.Multiplier != 0 {
		d.Limit = scaleDown(p.Limit, o.Multiplier)
		if p.IsBucket() {
			d.Burst = scaleDown(p.Capacity(), o.Multiplier)
		}
	} else {
		d.Limit = o.Limit
		d.Burst = 0
		if p.IsBucket() {
			d.Burst = cmp.Or(o.Burst, o.Limit)
		}
	}
	if err := d.Validate(); err != nil {
		return p, err
	}
	return &d, nil
}

// scaleDown is n×m rounded down, at least 1, at most MaxExact.
func scaleDown(n int64, m float64) int64 {
	v := math.Floor(float64(n) * m)
	switch {
	case v < 1:
		return 1
	case v > MaxExact:
		return MaxExact
	}
	return int64(v)
}

// Overrides is the table of overrides every check consults. Its table is
// an immutable value behind an atomic pointer: a check with no override in
// effect pays one load and a nil check, and Set swaps the whole table.
// A nil *Overrides applies none. Safe for concurrent use.
type Overrides struct {
	clock func() time.Time
	table atomic.Pointer[overrideTable]
	mu    sync.Mutex // serialises Set
}

// NewOverrides returns an empty table; clock (nil: time.Now) tells when an
// override has expired.
func NewOverrides(clock func() time.Time) *Overrides {
	if clock == nil {
		clock = time.Now
	}
	return &Overrides{clock: clock}
}

type overrideTable struct {
	// maybe holds two bits per key and tenant that any override names:
	// a request whose key and tenant find a bit clear is passed over with
	// two hashes, never a map lookup (a table of others' overrides costs
	// a check next to nothing).
	salt      uint64
	maybe     []uint64
	mask      uint64
	byPolicy  map[string]*policyOverrides
	anyTenant map[string]*overrideEntry // Policy "": every policy of a tenant
	entries   []*overrideEntry          // every override, by name
}

// mark and marked set and test the two bits of s in t.maybe.
func (t *overrideTable) mark(s string) {
	h := t.filterHash(s)
	for _, b := range [2]uint64{h & t.mask, (h >> 32) & t.mask} {
		t.maybe[b/64] |= 1 << (b % 64)
	}
}

func (t *overrideTable) marked(s string) bool {
	h := t.filterHash(s)
	a, b := h&t.mask, (h>>32)&t.mask
	return t.maybe[a/64]&(1<<(a%64)) != 0 && t.maybe[b/64]&(1<<(b%64)) != 0
}

// filterHash hashes the length and the first and last 4 bytes of s,
// mixed with the table's seed: a store key holds a keyed hash (random
// already, 24 bits in 4 base64 bytes) at one end or the other, a tenant is
// a short name. Two strings it cannot tell apart only cost a map lookup;
// it never decides what applies.
func (t *overrideTable) filterHash(s string) uint64 {
	var head, tail uint64
	for i := 0; i < min(len(s), 4); i++ {
		head = head<<8 | uint64(s[i])
	}
	for i := max(len(s)-4, 4); i < len(s); i++ {
		tail = tail<<8 | uint64(s[i])
	}
	h := (head ^ t.salt) * 0x9e3779b97f4a7c15 // Fibonacci hashing spreads the bits
	h = (h ^ h>>29 ^ tail<<16 ^ uint64(len(s))) * 0xbf58476d1ce4e5b9
	return h ^ h>>32
}

type policyOverrides struct {
	keys    map[string]*overrideEntry
	tenants map[string]*overrideEntry
}

// overrideEntry is one override in a table. It keeps the policies its
// limit makes, one per policy it met (the base and plan-scaled ones), so
// that stores that cache per policy pointer see one pointer per override.
type overrideEntry struct {
	o       Override
	derived sync.Map // *Policy → *Policy
}

// Set replaces the table with list, leaving out what has expired. Of two
// overrides on the same target the later created applies. An override of
// the table before that is unchanged keeps its derived policies.
func (o *Overrides) Set(list []Override) {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.clock()
	old := map[string]*overrideEntry{}
	if t := o.table.Load(); t != nil {
		for _, e := range t.entries {
			old[e.o.Name] = e
		}
	}
	var entries []*overrideEntry
	for _, ov := range list {
		if !ov.Expires.After(now) {
			continue
		}
		if e := old[ov.Name]; e != nil && sameOverride(&e.o, &ov) {
			entries = append(entries, e)
			continue
		}
		entries = append(entries, &overrideEntry{o: ov})
	}
	if len(entries) == 0 {
		o.table.Store(nil)
		return
	}
	// The later created last, so that it wins the target.
	slices.SortStableFunc(entries, func(a, b *overrideEntry) int {
		return cmp.Or(a.o.Created.Compare(b.o.Created), cmp.Compare(a.o.Name, b.o.Name))
	})
	t := &overrideTable{salt: maphash.Comparable(maphash.MakeSeed(), 0), byPolicy: map[string]*policyOverrides{}, anyTenant: map[string]*overrideEntry{}}
	targets := 0
	for _, e := range entries {
		targets += len(e.o.Targets)
	}
	bits := uint64(1024) // at least 16 bits a target: about 1.5% pass the filter for nothing
	for bits < 16*uint64(targets) && bits < 1<<24 {
		bits *= 2
	}
	t.maybe, t.mask = make([]uint64, bits/64), bits-1
	for _, e := range entries {
		for _, tg := range e.o.Targets {
			if tg.Key != "" {
				t.mark(tg.Key)
			} else {
				t.mark(tg.Tenant)
			}
			if tg.Policy == "" {
				t.anyTenant[tg.Tenant] = e
				continue
			}
			po := t.byPolicy[tg.Policy]
			if po == nil {
				po = &policyOverrides{keys: map[string]*overrideEntry{}, tenants: map[string]*overrideEntry{}}
				t.byPolicy[tg.Policy] = po
			}
			if tg.Key != "" {
				po.keys[tg.Key] = e
			} else {
				po.tenants[tg.Tenant] = e
			}
		}
	}
	t.entries = entries
	slices.SortFunc(t.entries, func(a, b *overrideEntry) int { return cmp.Compare(a.o.Name, b.o.Name) })
	o.table.Store(t)
}

func sameOverride(a, b *Override) bool {
	return a.Name == b.Name && a.Action == b.Action && a.Limit == b.Limit && a.Burst == b.Burst &&
		a.Multiplier == b.Multiplier && a.Expires.Equal(b.Expires) && a.Created.Equal(b.Created) &&
		slices.Equal(a.Targets, b.Targets)
}

// List returns the overrides in effect, by name.
func (o *Overrides) List() []Override {
	if o == nil {
		return nil
	}
	t := o.table.Load()
	if t == nil {
		return nil
	}
	now := o.clock()
	out := make([]Override, 0, len(t.entries))
	for _, e := range t.entries {
		if e.o.Expires.After(now) {
			out = append(out, e.o)
		}
	}
	return out
}

// Len is the number of overrides in effect.
func (o *Overrides) Len() int { return len(o.List()) }

// Apply returns r with the override that applies to it (see ApplyTo).
func (o *Overrides) Apply(r Request) Request {
	o.ApplyTo(&r)
	return r
}

// ApplyTo sets r.Override to the override that applies to r and, for a
// limit override, r.Policy to the policy it derives from r's (see
// Override.Derive; one it cannot derive leaves the policy as it is). The
// most specific override applies: one naming r's key, then one naming its
// tenant under r's policy, then one naming its tenant under every policy.
// r.Tenant must be set for the last two.
func (o *Overrides) ApplyTo(r *Request) {
	if o == nil {
		return
	}
	if t := o.table.Load(); t != nil {
		t.apply(r, o.clock)
	}
}

func (t *overrideTable) apply(r *Request, clock func() time.Time) {
	key, tenant := t.marked(r.Key), r.Tenant != "" && t.marked(r.Tenant)
	if !key && !tenant {
		return
	}
	e := t.find(r, key, tenant, clock)
	if e == nil {
		return
	}
	if e.o.Action == ActionLimit {
		p, ok := e.derive(r.Policy)
		if !ok {
			return
		}
		r.Policy = p
	}
	r.Override = &e.o
}

// Matching returns every override in effect that names r (the one Apply
// applies first, then those it hides), for people.
func (o *Overrides) Matching(r Request) []Override {
	if o == nil {
		return nil
	}
	t := o.table.Load()
	if t == nil {
		return nil
	}
	now := o.clock()
	var out []Override
	for _, e := range t.candidates(r) {
		if e != nil && e.o.Expires.After(now) {
			out = append(out, e.o)
		}
	}
	return out
}

// find is the entry that applies to r, expired ones passed over; the
// clock is read only when one names r. key and tenant say whether the
// filter lets r's key and tenant through.
func (t *overrideTable) find(r *Request, key, tenant bool, clock func() time.Time) *overrideEntry {
	var now time.Time
	live := func(e *overrideEntry) bool {
		if e == nil {
			return false
		}
		if now.IsZero() {
			now = clock()
		}
		return e.o.Expires.After(now)
	}
	if po := t.byPolicy[r.Policy.Name]; po != nil {
		if key {
			if e := po.keys[r.Key]; live(e) {
				return e
			}
		}
		if tenant {
			if e := po.tenants[r.Tenant]; live(e) {
				return e
			}
		}
	}
	if tenant && len(t.anyTenant) > 0 {
		if e := t.anyTenant[r.Tenant]; live(e) {
			return e
		}
	}
	return nil
}

func (t *overrideTable) candidates(r Request) [3]*overrideEntry {
	var c [3]*overrideEntry
	if po := t.byPolicy[r.Policy.Name]; po != nil {
		c[0] = po.keys[r.Key]
		if r.Tenant != "" {
			c[1] = po.tenants[r.Tenant]
		}
	}
	if r.Tenant != "" {
		c[2] = t.anyTenant[r.Tenant]
	}
	return c
}

// derive is the policy e makes of p, made once per p.
func (e *overrideEntry) derive(p *Policy) (*Policy, bool) {
	if v, ok := e.derived.Load(p); ok {
		d := v.(*Policy)
		return d, d != p
	}
	d, err := e.o.Derive(p)
	if err != nil {
		d = p // not valid: the policy as configured applies
	}
	v, _ := e.derived.LoadOrStore(p, d)
	d = v.(*Policy)
	return d, d != p
}
