package identity

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"

	"github.com/costgate/costgate/internal/keyparts"
	"github.com/costgate/costgate/internal/username"
	"github.com/costgate/costgate/limiter"
)

// Parts name an identity the way its client sends it, for the people who
// run the limits (an admin API): the API key as the client sends it, the
// address the client connects from, the login username as typed. A
// Resolver turns them into the store keys a request of that client gets:
// the same lookup, normalisation and hashing, so that an operator never
// handles a hash.
type Parts struct {
	APIKey string
	// Tenant stands alone for every key of a tenant (Named then names no
	// single key); beside APIKey it must be the key's own tenant.
	Tenant   string
	IP       string
	Username string
	Route    string
	// Headers are the values of header:NAME key parts, by NAME.
	Headers map[string]string
}

// TenantOnly reports parts that name a tenant and nothing else.
func (p Parts) TenantOnly() bool {
	return p.Tenant != "" && p.APIKey == "" && p.IP == "" && p.Username == "" && p.Route == "" && len(p.Headers) == 0
}

// Named returns the identity parts name: a request from parts.IP sending
// parts.APIKey, logging in as parts.Username. The errors are
// *limiter.FieldError naming the part (api_key, tenant, ip, username,
// header.NAME): an API key the Lookup does not know, a tenant that is not
// the key's, an address that does not parse, a username the login would
// refuse.
func (res *Resolver) Named(ctx context.Context, parts Parts) (*Identity, error) {
	fail := func(field, format string, args ...any) error {
		return &limiter.FieldError{Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	id := &Identity{Tenant: Anonymous, Plan: Anonymous, header: http.Header{}, clientDone: true}
	switch {
	case parts.APIKey != "":
		if !validAPIKey(parts.APIKey) || res.cfg.APIKeys == nil {
			return nil, fail("api_key", "unknown API key")
		}
		k, ok, err := res.cfg.APIKeys.LookupAPIKey(ctx, parts.APIKey)
		switch {
		case err != nil:
			return nil, fmt.Errorf("identity: API key lookup: %w", err)
		case !ok:
			return nil, fail("api_key", "unknown API key")
		}
		id.APIKey, id.Tenant, id.Plan = parts.APIKey, k.Tenant, k.Plan
		if id.Tenant == "" {
			id.Tenant = Anonymous
		}
		if id.Plan == "" {
			id.Plan = Anonymous
		}
		if parts.Tenant != "" && parts.Tenant != id.Tenant {
			return nil, fail("tenant", "the API key belongs to tenant %q, not %q", id.Tenant, parts.Tenant)
		}
	case parts.Tenant != "" && !parts.TenantOnly():
		return nil, fail("tenant", "only an API key tells a tenant: give the api_key, or the tenant alone (every key of it)")
	case parts.Tenant != "":
		id.Tenant = parts.Tenant
	}
	if parts.IP != "" {
		c, err := parseClient(parts.IP)
		if err != nil {
			return nil, fail("ip", "%v", err)
		}
		id.client = c
	}
	if parts.Username != "" {
		name, err := username.Normalize(parts.Username)
		if err != nil {
			var ue *username.Error
			if errors.As(err, &ue) {
				return nil, fail("username", "%s", ue.Reason)
			}
			return nil, fail("username", "%v", err)
		}
		id.Username = name
	}
	id.Route = parts.Route
	for name, v := range parts.Headers {
		if !keyparts.IsHeaderValue(v) {
			return nil, fail("header."+name, "empty, or longer than %d bytes", keyparts.MaxHeaderBytes)
		}
		id.header.Set(name, v)
	}
	return id, nil
}

// parseClient reads an address as an operator writes it (198.51.100.7,
// 2001:db8::1, [2001:db8::1]:443, or a request's group, 2001:db8::/64),
// grouped as requests are.
func parseClient(s string) (Client, error) {
	s = strings.TrimSpace(s)
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return Client{Addr: group(ap.Addr().Unmap())}, nil
	}
	if p, err := netip.ParsePrefix(s); err == nil {
		return Client{Addr: group(p.Addr().Unmap())}, nil
	}
	a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"))
	if err != nil {
		return Client{}, fmt.Errorf("%q is not an IP address", s)
	}
	return Client{Addr: group(a.Unmap().WithZone(""))}, nil
}

// Names reports whether id, made by Named from parts, names one key of p:
// it has every part p keys by, or what a request puts in a missing part's
// place (the address for an anonymous caller's api_key, or for a header).
// The error is a *limiter.FieldError naming the first part missing.
func (res *Resolver) Names(p *limiter.Policy, id *Identity) error {
	hasIP := id.client.Addr.IsValid()
	for _, part := range p.Key {
		missing := ""
		switch part {
		case PartIP:
			if !hasIP {
				missing = "ip"
			}
		case PartAPIKey:
			if id.APIKey == "" && (!hasIP || id.Tenant != Anonymous) {
				missing = "api_key"
			}
		case PartTenant, PartPlan:
			if id.APIKey == "" && id.Tenant == Anonymous && !hasIP {
				missing = "api_key"
			}
		case PartUsername:
			if id.Username == "" {
				missing = "username"
			}
		case PartRoute:
			if id.Route == "" {
				missing = "route"
			}
		default:
			if name, ok := strings.CutPrefix(part, PartHeaderPrefix); ok {
				if id.header.Get(name) == "" && !hasIP {
					missing = "header." + name
				}
				continue
			}
			return &limiter.FieldError{Field: "policy", Reason: fmt.Sprintf("policy %q keys by %q, a part of the application's own, which an identity named by its parts cannot give", p.Name, part)}
		}
		if missing != "" {
			return &limiter.FieldError{Field: missing, Reason: fmt.Sprintf("required: policy %q keys by [%s]", p.Name, strings.Join(p.Key, ", "))}
		}
	}
	return nil
}

// ClientText is a client's address as Named reads it back: the address of
// a /32 or /128, else the group (2001:db8:1:2::/64), or a hop's text.
func ClientText(c Client) string {
	switch {
	case !c.Addr.IsValid():
		return c.Text
	case c.Addr.IsSingleIP():
		return c.Addr.Addr().String()
	}
	return c.Addr.String()
}

// CheckOverride reports whether o, a limit override of p, makes a valid
// policy of p under every plan (Override.Derive), as a request of any
// plan would meet it. The error names the plan.
func (res *Resolver) CheckOverride(p *limiter.Policy, o *limiter.Override) error {
	if _, err := o.Derive(p); err != nil {
		return err
	}
	for _, plan := range sortedKeys(res.cfg.Plans) {
		if _, err := o.Derive(res.policyFor(p, plan)); err != nil {
			return fmt.Errorf("with plan %q: %w", plan, err)
		}
	}
	return nil
}

// HeaderValue is the value the header:NAME key part of id reads (the
// header's lines joined by ", "), copied out of the request.
func (id *Identity) HeaderValue(name string) string {
	if id.header == nil {
		return ""
	}
	return strings.Clone(strings.Join(id.header.Values(name), ", "))
}
