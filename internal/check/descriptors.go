package check

import (
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/identity"
	"golang.org/x/net/http/httpguts"
)

// Descriptor is one level of the tree that maps Envoy's descriptors to
// policies, shaped like envoyproxy/ratelimit's config: an entry matches by
// key and value, the policies of the node reached by a descriptor's last
// entry apply, and a node's Descriptors match the entries after it.
type Descriptor struct {
	// Key is the entry's key (remote_address, generic_key, the
	// descriptor_key of a request_headers action); required.
	Key string
	// Value matches the entry's value exactly; a trailing * matches any
	// value with that prefix; "" matches any value.
	Value string
	// Part, when set, is the identity key part the entry's value supplies:
	// ip (remote_address), api_key, username, route or header:NAME. The
	// same value yields the same store key as the HTTP doors give it.
	Part string
	// Policies are charged, in order, for a descriptor whose last entry
	// reaches this node. Empty: such a descriptor is not limited.
	Policies []*limiter.Policy
	// Descriptors match the next entry.
	Descriptors []Descriptor
}

// Key parts a descriptor entry may supply. tenant and plan are not among
// them: they come from the API-key table, as for every door.
var entryParts = []string{identity.PartIP, identity.PartAPIKey, identity.PartUsername, identity.PartRoute, "header:NAME"}

// Bounds on one ShouldRateLimit call. The gateway's config decides these
// (a route's actions, their descriptor_key): more is InvalidArgument,
// refused before anything is charged. An entry's value may be the client's
// and is never refused for its length: a route value longer than
// MaxEntryBytes is denied, an API key or header is charged to the address.
const (
	MaxDescriptors = 64   // descriptors per request
	MaxEntries     = 64   // entries per descriptor (and levels of the tree)
	MaxEntryBytes  = 4096 // bytes of one entry's key (and of a route value); also of a value in the config's tree
)

// DescriptorError is a descriptor tree the service refuses: the domain, the
// index at each level down to the node, the field (key, value, part,
// policies[i], descriptors) and why.
type DescriptorError struct {
	Domain string
	Path   []int
	Field  string
	Reason string
}

func (e *DescriptorError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "domain %q: descriptors", e.Domain)
	for i, n := range e.Path {
		if i > 0 {
			b.WriteString(".descriptors")
		}
		fmt.Fprintf(&b, "[%d]", n)
	}
	if e.Field != "" {
		b.WriteString("." + e.Field)
	}
	return b.String() + ": " + e.Reason
}

// node is a compiled Descriptor level.
type node struct {
	exact    map[entryKey]*node
	prefixes []prefixNode // trailing-* values, in config order
	any      map[string]*node
	part     string
	policies []*limiter.Policy
}

type entryKey struct{ key, value string }

type prefixNode struct {
	key, prefix string
	n           *node
}

// partValue is a key part and the entry value that supplies it.
type partValue struct{ part, value string }

// match walks a descriptor's entries down the tree as envoyproxy/ratelimit
// does (an exact key and value first, then a wildcard value, then the key
// alone; no backtracking) and returns the node its last entry reaches, or
// nil, with the key parts the entries on the way supplied.
func (n *node) match(entries []entry, parts []partValue) (*node, []partValue) {
	cur := n
	for _, e := range entries {
		next := cur.exact[entryKey{e.key, e.value}]
		if next == nil {
			for _, p := range cur.prefixes {
				if p.key == e.key && strings.HasPrefix(e.value, p.prefix) {
					next = p.n
					break
				}
			}
		}
		if next == nil {
			next = cur.any[e.key]
		}
		if next == nil {
			return nil, nil
		}
		if next.part != "" {
			parts = append(parts, partValue{next.part, e.value})
		}
		cur = next
	}
	if cur == n {
		return nil, nil // a descriptor with no entries matches nothing
	}
	return cur, parts
}

type entry struct{ key, value string }

// compileDomains checks the tree of every domain and compiles it. ids
// checks each policy as it will apply it.
func compileDomains(domains map[string][]Descriptor, ids *identity.Resolver) (map[string]*node, []error) {
	var errs []error
	out := make(map[string]*node, len(domains))
	charged := false
	names := make([]string, 0, len(domains))
	for name := range domains {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if name == "" {
			errs = append(errs, &limiter.FieldError{Field: "Domains", Reason: "a domain name must not be empty (Envoy's filter always sends one)"})
			continue
		}
		c := &compiler{domain: name, ids: ids}
		out[name] = c.level(domains[name], nil, nil, false)
		errs = append(errs, c.errs...)
		charged = charged || c.charged
	}
	if len(errs) == 0 && !charged {
		errs = append(errs, &limiter.FieldError{Field: "Domains", Reason: "no descriptor leads to a policy: the service would limit nothing"})
	}
	return out, errs
}

type compiler struct {
	domain  string
	ids     *identity.Resolver
	errs    []error
	charged bool
}

func (c *compiler) fail(path []int, field, format string, args ...any) {
	c.errs = append(c.errs, &DescriptorError{Domain: c.domain, Path: append([]int(nil), path...), Field: field, Reason: fmt.Sprintf(format, args...)})
}

// level compiles the descriptors of one level; above lists the parts the
// entries on the way down supply (broken: one of them was refused, so what
// the policies lack is not reported again).
func (c *compiler) level(ds []Descriptor, path []int, above []string, broken bool) *node {
	n := &node{exact: map[entryKey]*node{}, any: map[string]*node{}}
	if len(path) >= MaxEntries && len(ds) > 0 {
		c.fail(path, "descriptors", "nested deeper than %d levels: no descriptor has that many entries", MaxEntries)
		return n
	}
	for i, d := range ds {
		p := append(path[:len(path):len(path)], i)
		child := &node{exact: map[entryKey]*node{}, any: map[string]*node{}, part: canonicalPart(d.Part)}
		switch {
		case d.Key == "":
			c.fail(p, "key", "required: the entry's key (remote_address, generic_key, a request_headers descriptor_key)")
		case len(d.Key) > MaxEntryBytes || len(d.Value) > MaxEntryBytes:
			c.fail(p, "key", "longer than %d bytes", MaxEntryBytes)
		case strings.HasSuffix(d.Value, "*"):
			prefix := strings.TrimSuffix(d.Value, "*")
			if strings.Contains(prefix, "*") {
				c.fail(p, "value", "* may only end a value (a prefix match), got %q", d.Value)
			}
			for _, q := range n.prefixes {
				if q.key == d.Key && q.prefix == prefix {
					c.fail(p, "value", "duplicate entry %s=%s at this level", d.Key, d.Value)
				}
			}
			n.prefixes = append(n.prefixes, prefixNode{key: d.Key, prefix: prefix, n: child})
		case strings.Contains(d.Value, "*"):
			c.fail(p, "value", "* may only end a value (a prefix match), got %q", d.Value)
		case d.Value == "":
			if _, dup := n.any[d.Key]; dup {
				c.fail(p, "key", "duplicate entry %s (any value) at this level", d.Key)
			}
			n.any[d.Key] = child
		default:
			k := entryKey{d.Key, d.Value}
			if _, dup := n.exact[k]; dup {
				c.fail(p, "value", "duplicate entry %s=%s at this level", d.Key, d.Value)
			}
			n.exact[k] = child
		}
		parts, bad := above, broken
		if d.Part != "" {
			switch {
			case !validEntryPart(d.Part):
				c.fail(p, "part", "unknown key part %q (one of %s)", d.Part, strings.Join(entryParts, ", "))
				bad = true
			case contains(above, canonicalPart(d.Part)):
				c.fail(p, "part", "key part %q is already supplied by an entry above", d.Part)
			}
			parts = append(above[:len(above):len(above)], canonicalPart(d.Part))
		}
		c.policies(p, d.Policies, parts, bad)
		child.policies = d.Policies
		sub := c.level(d.Descriptors, p, parts, bad)
		child.exact, child.prefixes, child.any = sub.exact, sub.prefixes, sub.any
	}
	return n
}

// policies checks the policies of a node against the parts its path supplies.
func (c *compiler) policies(path []int, policies []*limiter.Policy, parts []string, broken bool) {
	for j, p := range policies {
		field := fmt.Sprintf("policies[%d]", j)
		if p == nil {
			c.fail(path, field, "nil policy")
			continue
		}
		c.charged = true
		for _, q := range policies[:j] {
			if q != nil && q.Name == p.Name {
				c.fail(path, field, "policy %q listed twice", p.Name)
			}
		}
		if c.ids != nil {
			if err := c.ids.CheckPolicy(p); err != nil {
				c.fail(path, field, "%v", err)
				continue
			}
		}
		for _, k := range p.Key {
			if why := missingPart(k, parts); why != "" && !broken {
				c.fail(path, field, "policy %q keys by %s, but %s", p.Name, k, why)
				break
			}
		}
	}
}

// missingPart says why the parts an entry path supplies cannot build key
// part k ("" when they can). The client address stands in for a missing
// API key or header, as in the HTTP doors, so a path that relies on that
// must supply ip: without it every such caller would share one bucket.
func missingPart(k string, parts []string) string {
	k = canonicalPart(k)
	has := func(p string) bool { return contains(parts, p) }
	switch {
	case k == identity.PartTenant || k == identity.PartPlan:
		return "" // from the API-key table, or "anonymous"
	case k == identity.PartUsername || k == identity.PartRoute:
		if has(k) {
			return ""
		}
		return "no entry on this path has part: " + k
	case k == identity.PartIP:
		if has(k) {
			return ""
		}
		return "no entry on this path has part: ip (remote_address)"
	case has(identity.PartIP):
		return ""
	case k == identity.PartAPIKey:
		return "no entry on this path has part: ip, which limits an unknown or absent API key"
	case has(k):
		return "" // a header entry always has a value
	}
	return fmt.Sprintf("no entry on this path has part: %s, nor part: ip to stand in for it", k)
}

// canonicalPart writes header:NAME with the canonical header name.
func canonicalPart(p string) string {
	if name, ok := strings.CutPrefix(p, identity.PartHeaderPrefix); ok {
		return identity.PartHeaderPrefix + http.CanonicalHeaderKey(name)
	}
	return p
}

func validEntryPart(p string) bool {
	switch p {
	case identity.PartIP, identity.PartAPIKey, identity.PartUsername, identity.PartRoute:
		return true
	}
	name, ok := strings.CutPrefix(p, identity.PartHeaderPrefix)
	return ok && httpguts.ValidHeaderFieldName(name)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
