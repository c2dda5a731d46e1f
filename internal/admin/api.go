package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/costgate/costgate/internal/jsonerror"
	"github.com/costgate/costgate/internal/ratefields"
	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/identity"
	"github.com/costgate/costgate/limiter/redisstore"
)

// The calls of the admin API. An identity is named by the parts its policy
// keys by, as its client sends them (query parameters of GET calls,
// members of the JSON body of the others): policy, tenant, api_key, ip,
// username, route, header.NAME.

// maxBody bounds a call's JSON body.
const maxBody = 64 << 10

// identityMembers are the members naming an identity, besides header.NAME.
var identityMembers = []string{"policy", "tenant", "api_key", "ip", "username", "route"}

// target is an identity as a call names it.
type target struct {
	policy string
	parts  identity.Parts
}

func isIdentityMember(k string) bool {
	return slices.Contains(identityMembers, k) || strings.HasPrefix(k, "header.") && len(k) > len("header.")
}

// setMember sets member k of t to v.
func (t *target) set(k, v string) {
	switch k {
	case "policy":
		t.policy = v
	case "tenant":
		t.parts.Tenant = v
	case "api_key":
		t.parts.APIKey = v
	case "ip":
		t.parts.IP = v
	case "username":
		t.parts.Username = v
	case "route":
		t.parts.Route = v
	default:
		if t.parts.Headers == nil {
			t.parts.Headers = map[string]string{}
		}
		t.parts.Headers[strings.TrimPrefix(k, "header.")] = v
	}
}

// who is t as people may see it: plain tenant, the rest only by its last
// four characters (no secret, address or username in the clear).
func (t target) who() map[string]string {
	m := map[string]string{}
	if t.parts.Tenant != "" {
		m["tenant"] = t.parts.Tenant
	}
	for k, v := range map[string]string{"api_key": t.parts.APIKey, "ip": t.parts.IP, "username": t.parts.Username} {
		if v != "" {
			m[k] = redact(v)
		}
	}
	if t.parts.Route != "" {
		m["route"] = t.parts.Route
	}
	for name, v := range t.parts.Headers {
		m["header."+name] = redact(v)
	}
	return m
}

func redact(s string) string {
	r := []rune(s)
	if len(r) <= 4 {
		return "…"
	}
	return "…" + string(r[len(r)-4:])
}

// describe is t for the audit log.
func (t target) describe(name string) string {
	var b []string
	if name != "" {
		b = append(b, "name="+name)
	}
	if t.policy != "" {
		b = append(b, "policy="+t.policy)
	}
	who := t.who()
	for _, k := range slices.Sorted(maps.Keys(who)) {
		b = append(b, k+"="+who[k])
	}
	return strings.Join(b, " ")
}

// targetFromQuery reads the identity of a GET call; anything else in the
// query is refused, naming it.
func targetFromQuery(q url.Values) (target, error) {
	var t target
	for _, k := range slices.Sorted(maps.Keys(q)) {
		switch {
		case !isIdentityMember(k):
			return t, &limiter.FieldError{Field: k, Reason: "unknown parameter (policy, tenant, api_key, ip, username, route, header.NAME)"}
		case len(q[k]) != 1:
			return t, &limiter.FieldError{Field: k, Reason: "given more than once"}
		}
		t.set(k, q[k][0])
	}
	return t, nil
}

// body is a call's JSON object.
type body map[string]any

// readBody reads a JSON object whose members are identity members or one
// of extra; anything else is refused, naming it.
func readBody(w http.ResponseWriter, r *http.Request, extra ...string) (body, target, error) {
	var t target
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.UseNumber()
	var m body
	if err := dec.Decode(&m); err != nil || m == nil {
		reason := "want a JSON object"
		if err != nil {
			reason += ": " + err.Error()
		}
		return nil, t, &limiter.FieldError{Field: "body", Reason: reason}
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, t, &limiter.FieldError{Field: "body", Reason: "one JSON object expected, found more"}
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		switch {
		case isIdentityMember(k):
			s, ok := m[k].(string)
			if !ok {
				return nil, t, &limiter.FieldError{Field: k, Reason: "want a string"}
			}
			t.set(k, s)
		case slices.Contains(extra, k):
		default:
			return nil, t, &limiter.FieldError{Field: k, Reason: fmt.Sprintf("unknown member (want %s)", strings.Join(append(slices.Clone(identityMembers), append([]string{"header.NAME"}, extra...)...), ", "))}
		}
	}
	return m, t, nil
}

func (b body) str(k string) (string, error) {
	v, ok := b[k]
	if !ok {
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", &limiter.FieldError{Field: k, Reason: "want a string"}
	}
	return s, nil
}

func (b body) int(k string) (int64, error) {
	v, ok := b[k]
	if !ok {
		return 0, nil
	}
	n, ok := v.(json.Number)
	if !ok {
		return 0, &limiter.FieldError{Field: k, Reason: "want a whole number"}
	}
	i, err := n.Int64()
	if err != nil || i < 0 {
		return 0, &limiter.FieldError{Field: k, Reason: "want a whole number, at least 0, got " + n.String()}
	}
	return i, nil
}

func (b body) float(k string) (float64, error) {
	v, ok := b[k]
	if !ok {
		return 0, nil
	}
	n, ok := v.(json.Number)
	if !ok {
		return 0, &limiter.FieldError{Field: k, Reason: "want a number"}
	}
	f, err := n.Float64()
	if err != nil || math.IsInf(f, 0) || f <= 0 {
		return 0, &limiter.FieldError{Field: k, Reason: "want a number above 0, got " + n.String()}
	}
	return f, nil
}

// resolved is one policy an identity names, and the request it makes.
type resolved struct {
	policy *limiter.Policy // as configured
	req    limiter.Request // scaled by plan, the override applied
}

// resolve is the policies t names (t's policy, or every policy whose key
// it has the parts of), each with the request the identity makes of it.
func resolve(ctx context.Context, v View, t target) ([]resolved, *identity.Identity, error) {
	var policies []*limiter.Policy
	if t.policy != "" {
		p := v.Policies[t.policy]
		if p == nil {
			return nil, nil, &limiter.FieldError{Field: "policy", Reason: fmt.Sprintf("unknown policy %q (%s)", t.policy, strings.Join(slices.Sorted(maps.Keys(v.Policies)), ", "))}
		}
		policies = []*limiter.Policy{p}
	} else {
		for _, name := range slices.Sorted(maps.Keys(v.Policies)) {
			policies = append(policies, v.Policies[name])
		}
	}
	id, err := v.Identity.Named(ctx, t.parts)
	if err != nil {
		return nil, nil, err
	}
	var out []resolved
	var first error
	for _, p := range policies {
		if err := v.Identity.Names(p, id); err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		out = append(out, resolved{policy: p, req: v.Identity.Request(p, id, 1)})
	}
	if len(out) == 0 {
		if first == nil {
			first = &limiter.FieldError{Field: "policy", Reason: "the config has no policy"}
		}
		return nil, nil, first
	}
	return out, id, nil
}

// policyState is one policy's state for an identity, as state answers it.
type policyState struct {
	Policy    string            `json:"policy"`
	Algorithm limiter.Algorithm `json:"algorithm"`
	// Limit and Burst are what applies to the identity: its plan's and
	// its override's included.
	Limit     int64   `json:"limit"`
	Burst     int64   `json:"burst"`
	PeriodSec float64 `json:"period_sec"`
	// Remaining is what the store would grant now; for a local-first
	// policy, what the store holds beyond the gateways' leases.
	Remaining     int64          `json:"remaining"`
	ResetAfterSec int64          `json:"reset_after_sec"`
	Denying       bool           `json:"denying"`
	Overrides     []overrideView `json:"overrides"`
	// DenyCache and Lease are this gateway's.
	DenyCache *denyCacheView `json:"deny_cache"`
	Lease     *leaseView     `json:"lease"`
	// Error is why the store's state could not be read.
	Error string `json:"error,omitempty"`
}

type denyCacheView struct {
	Cost          int64     `json:"cost"`
	Until         time.Time `json:"until"`
	RetryAfterSec int64     `json:"retry_after_sec"`
}

type leaseView struct {
	Lease    int64     `json:"lease"`
	Used     int64     `json:"used"`
	Synced   time.Time `json:"synced,omitzero"`
	Gateways int64     `json:"gateways"`
	Outage   bool      `json:"outage"`
}

type overrideView struct {
	Name string `json:"name"`
	// Policy is "" for an override of every policy.
	Policy       string            `json:"policy,omitempty"`
	Target       map[string]string `json:"target"`
	Action       limiter.Action    `json:"action"`
	Limit        int64             `json:"limit,omitempty"`
	Burst        int64             `json:"burst,omitempty"`
	Multiplier   float64           `json:"multiplier,omitempty"`
	Expires      time.Time         `json:"expires"`
	ExpiresInSec int64             `json:"expires_in_sec"`
	Created      time.Time         `json:"created"`
	By           string            `json:"by,omitempty"`
	// Applies, in state, tells the one override that applies.
	Applies *bool `json:"applies,omitempty"`
}

func viewOf(o limiter.Override, now time.Time) overrideView {
	who := o.Who
	if who == nil {
		who = map[string]string{}
	}
	return overrideView{Name: o.Name, Policy: o.Policy, Target: who, Action: o.Action, Limit: o.Limit, Burst: o.Burst,
		Multiplier: o.Multiplier, Expires: o.Expires.UTC(), ExpiresInSec: ratefields.CeilSeconds(o.Expires.Sub(now)),
		Created: o.Created.UTC(), By: o.By}
}

func (h *Handler) state(w http.ResponseWriter, r *http.Request) {
	c := call(r)
	t, err := targetFromQuery(r.URL.Query())
	c.target = t.describe("")
	if err != nil {
		badRequest(w, r, err)
		return
	}
	v, ok := h.view(w, r)
	if !ok {
		return
	}
	ctx := r.Context()
	rs, id, err := resolve(ctx, v, t)
	if err != nil {
		h.refuse(w, r, err)
		return
	}
	now := h.cfg.Clock()
	out := make([]policyState, 0, len(rs))
	for _, x := range rs {
		p := x.req.Policy
		st := policyState{Policy: x.policy.Name, Algorithm: p.Algorithm, Limit: p.Limit, Burst: p.Capacity(), PeriodSec: p.Period.Seconds(), Overrides: []overrideView{}}
		for i, o := range v.Overrides.Matching(x.req) {
			ov := viewOf(o, now)
			applies := i == 0 && x.req.Override != nil && x.req.Override.Name == o.Name
			ov.Applies = &applies
			st.Overrides = append(st.Overrides, ov)
		}
		var d limiter.Decision
		if p.Sync > 0 && v.Redis != nil {
			d, err = v.Redis.PeekShared(ctx, p, x.req.Key)
		} else {
			d, err = v.Limiter.Peek(ctx, p, x.req.Key)
		}
		avail := d.Remaining
		if err != nil {
			st.Error = err.Error()
		} else {
			st.Remaining, st.ResetAfterSec = d.Remaining, ratefields.CeilSeconds(d.ResetAfter)
		}
		if cd, ok := v.Limiter.CachedDenial(p, x.req.Key); ok {
			st.DenyCache = &denyCacheView{Cost: cd.Cost, Until: cd.Until.UTC(), RetryAfterSec: ratefields.CeilSeconds(cd.Until.Sub(time.Now()))}
		}
		if v.Redis != nil && p.Sync > 0 {
			if l, ok := v.Redis.Lease(p, x.req.Key); ok {
				st.Lease = &leaseView{Lease: l.Lease, Used: l.Used, Synced: l.Synced.UTC(), Gateways: l.Gateways, Outage: l.Outage}
				if l.Synced.IsZero() {
					st.Lease.Synced = time.Time{}
				}
				avail += max(l.Lease-l.Used, 0)
			}
		}
		switch o := x.req.Override; {
		case o != nil && o.Action == limiter.ActionDeny:
			st.Denying = true
		case o != nil && o.Action == limiter.ActionAllow:
		default:
			st.Denying = err == nil && avail < 1 || st.DenyCache != nil && st.DenyCache.Cost <= 1
		}
		out = append(out, st)
	}
	jsonerror.WriteJSON(w, http.StatusOK, map[string]any{
		"identity": map[string]string{"tenant": id.Tenant, "plan": id.Plan},
		"policies": out,
	})
}

// refuse answers an identity that cannot be resolved: 400 naming the part,
// or 503 when the API-key lookup itself failed.
func (h *Handler) refuse(w http.ResponseWriter, r *http.Request, err error) {
	var fe *limiter.FieldError
	if errors.As(err, &fe) {
		badRequest(w, r, err)
		return
	}
	storeError(w, r, err)
}

func (h *Handler) reset(w http.ResponseWriter, r *http.Request) {
	c := call(r)
	_, t, err := readBody(w, r)
	c.target = t.describe("")
	if err != nil {
		badRequest(w, r, err)
		return
	}
	v, ok := h.view(w, r)
	if !ok {
		return
	}
	rs, _, err := resolve(r.Context(), v, t)
	if err != nil {
		h.refuse(w, r, err)
		return
	}
	done := []string{}
	for _, x := range rs {
		if err := v.Limiter.Reset(r.Context(), x.req.Policy, x.req.Key); err != nil {
			storeError(w, r, fmt.Errorf("reset %s (after %v): %w", x.policy.Name, done, err))
			return
		}
		done = append(done, x.policy.Name)
	}
	scope := "this process"
	if v.Store != nil {
		scope = "every gateway"
	}
	jsonerror.WriteJSON(w, http.StatusOK, map[string]any{"reset": done, "scope": scope})
}

func (h *Handler) putOverride(w http.ResponseWriter, r *http.Request) {
	c := call(r)
	name := r.PathValue("name")
	b, t, err := readBody(w, r, "action", "limit", "burst", "multiplier", "expires")
	c.target = t.describe(name)
	if err != nil {
		badRequest(w, r, err)
		return
	}
	now := h.cfg.Clock()
	o := limiter.Override{Name: name, Policy: t.policy, Created: now, By: c.token, Who: t.who()}
	var action, expires string
	var errs []error
	add := func(err error) { errs = append(errs, err) }
	action, err = b.str("action")
	add(err)
	o.Action = limiter.Action(action)
	o.Limit, err = b.int("limit")
	add(err)
	o.Burst, err = b.int("burst")
	add(err)
	o.Multiplier, err = b.float("multiplier")
	add(err)
	expires, err = b.str("expires")
	add(err)
	if err := errors.Join(errs...); err != nil {
		badRequest(w, r, limiter.Errors(err)[0])
		return
	}
	if expires != "" {
		if o.Expires, err = parseExpiry(expires, now); err != nil {
			badRequest(w, r, err)
			return
		}
	}
	v, ok := h.view(w, r)
	if !ok {
		return
	}
	var checked []*limiter.Policy
	if t.parts.TenantOnly() {
		tg := limiter.Target{Policy: t.policy, Tenant: t.parts.Tenant}
		if t.policy != "" {
			p := v.Policies[t.policy]
			if p == nil {
				badRequest(w, r, &limiter.FieldError{Field: "policy", Reason: fmt.Sprintf("unknown policy %q", t.policy)})
				return
			}
			checked = append(checked, p)
		} else {
			for _, name := range slices.Sorted(maps.Keys(v.Policies)) {
				checked = append(checked, v.Policies[name])
			}
		}
		o.Targets = []limiter.Target{tg}
	} else {
		rs, _, err := resolve(r.Context(), v, t)
		if err != nil {
			h.refuse(w, r, err)
			return
		}
		for _, x := range rs {
			o.Targets = append(o.Targets, limiter.Target{Policy: x.policy.Name, Key: x.req.Key})
			checked = append(checked, x.policy)
		}
	}
	if err := o.Validate(now); err != nil {
		badRequest(w, r, err)
		return
	}
	for _, p := range checked {
		if err := v.Identity.CheckOverride(p, &o); err != nil {
			field := "limit"
			var fe *limiter.FieldError
			switch {
			case errors.As(err, &fe):
				field = fe.Field
			case o.Multiplier != 0:
				field = "multiplier"
			}
			badRequest(w, r, &limiter.FieldError{Field: field, Reason: fmt.Sprintf("policy %q: %v", p.Name, err)})
			return
		}
	}
	if err := h.store(r.Context(), v, func(list []limiter.Override) ([]limiter.Override, error) {
		list = slices.DeleteFunc(list, func(x limiter.Override) bool { return x.Name == o.Name })
		if len(list) >= redisstore.MaxOverrides {
			return nil, redisstore.ErrTooManyOverrides
		}
		return append(list, o), nil
	}, func(s OverrideStore) error { return s.PutOverride(r.Context(), o) }); err != nil {
		if errors.Is(err, redisstore.ErrTooManyOverrides) {
			badRequest(w, r, &limiter.FieldError{Field: "name", Reason: err.Error()})
			return
		}
		storeError(w, r, err)
		return
	}
	jsonerror.WriteJSON(w, http.StatusOK, map[string]any{"override": viewOf(o, now)})
}

// store changes the overrides: in the shared store when there is one
// (then this gateway's table is read back from it at once), else in this
// process's table.
func (h *Handler) store(ctx context.Context, v View, inProcess func([]limiter.Override) ([]limiter.Override, error), shared func(OverrideStore) error) error {
	if v.Store == nil {
		h.memoryMu.Lock()
		defer h.memoryMu.Unlock()
		list, err := inProcess(v.Overrides.List())
		if err != nil {
			return err
		}
		v.Overrides.Set(list)
		return nil
	}
	if err := shared(v.Store); err != nil {
		return err
	}
	list, err := v.Store.Overrides(ctx)
	if err != nil {
		return fmt.Errorf("the change is stored, but this gateway could not read it back (it will within %s): %w", 10*time.Second, err)
	}
	v.Overrides.Set(list)
	return nil
}

// parseExpiry reads an expiry: a duration from now (90m, 24h, 7d) or an
// RFC 3339 time.
func parseExpiry(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		if n, err := strconv.ParseFloat(days, 64); err == nil && n > -1000 && n < 1000 {
			return now.Add(time.Duration(n * float64(24*time.Hour))), nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return time.Time{}, &limiter.FieldError{Field: "expires", Reason: fmt.Sprintf("want a duration (90m, 24h, 7d) or an RFC 3339 time, got %q", s)}
	}
	return now.Add(d), nil
}

func (h *Handler) listOverrides(w http.ResponseWriter, r *http.Request) {
	if len(r.URL.Query()) > 0 {
		badRequest(w, r, &limiter.FieldError{Field: slices.Sorted(maps.Keys(r.URL.Query()))[0], Reason: "unknown parameter"})
		return
	}
	v, ok := h.view(w, r)
	if !ok {
		return
	}
	list := v.Overrides.List()
	if v.Store != nil {
		var err error
		if list, err = v.Store.Overrides(r.Context()); err != nil {
			storeError(w, r, err)
			return
		}
	}
	now := h.cfg.Clock()
	out := make([]overrideView, 0, len(list))
	for _, o := range list {
		if o.Expires.After(now) {
			out = append(out, viewOf(o, now))
		}
	}
	jsonerror.WriteJSON(w, http.StatusOK, map[string]any{"overrides": out})
}

func (h *Handler) deleteOverride(w http.ResponseWriter, r *http.Request) {
	c := call(r)
	name := r.PathValue("name")
	c.target = "name=" + name
	v, ok := h.view(w, r)
	if !ok {
		return
	}
	found := false
	err := h.store(r.Context(), v, func(list []limiter.Override) ([]limiter.Override, error) {
		n := len(list)
		list = slices.DeleteFunc(list, func(x limiter.Override) bool { return x.Name == name })
		found = len(list) < n
		return list, nil
	}, func(s OverrideStore) error {
		var err error
		found, err = s.DeleteOverride(r.Context(), name)
		return err
	})
	if err != nil {
		storeError(w, r, err)
		return
	}
	if !found {
		c.result(ResultNotFound)
		writeError(w, http.StatusNotFound, CodeNotFound, "name", fmt.Sprintf("no override named %q", name))
		return
	}
	jsonerror.WriteJSON(w, http.StatusOK, map[string]any{"deleted": name})
}

// topView is one policy's top denied.
type topView struct {
	Policy    string  `json:"policy"`
	WindowSec int64   `json:"window_sec"`
	Entries   []Entry `json:"entries"`
}

func (h *Handler) top(w http.ResponseWriter, r *http.Request) {
	c := call(r)
	q := r.URL.Query()
	for k, vs := range q {
		if k != "policy" || len(vs) != 1 {
			badRequest(w, r, &limiter.FieldError{Field: k, Reason: "unknown parameter, or given twice (policy)"})
			return
		}
	}
	policy := q.Get("policy")
	c.target = "policy=" + policy
	v, ok := h.view(w, r)
	if !ok {
		return
	}
	view := func(name string) topView {
		tv := topView{Policy: name, WindowSec: int64(topBuckets * topBucket / time.Second), Entries: []Entry{}}
		if h.cfg.Top != nil {
			tv.Entries = h.cfg.Top.Top(name)
		}
		return tv
	}
	if policy != "" {
		if v.Policies[policy] == nil {
			badRequest(w, r, &limiter.FieldError{Field: "policy", Reason: fmt.Sprintf("unknown policy %q (%s)", policy, strings.Join(slices.Sorted(maps.Keys(v.Policies)), ", "))})
			return
		}
		jsonerror.WriteJSON(w, http.StatusOK, view(policy))
		return
	}
	all := []topView{}
	for _, name := range slices.Sorted(maps.Keys(v.Policies)) {
		all = append(all, view(name))
	}
	jsonerror.WriteJSON(w, http.StatusOK, map[string]any{"policies": all})
}
