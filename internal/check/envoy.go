package check

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/costgate/costgate/internal/ratefields"

	"github.com/costgate/costgate/internal/keyparts"

	"github.com/costgate/costgate/internal/peer"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	grpcpeer "google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/costgate/costgate/internal/routelimit"
	"github.com/costgate/costgate/internal/username"
	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/header"
	"github.com/costgate/costgate/limiter/identity"
)

// EnvoyConfig configures a RateLimitService. Limiter, Identity, Gateways
// and Domains (with at least one policy) are required.
type EnvoyConfig struct {
	Limiter  *limiter.Limiter
	Identity *identity.Resolver
	// Gateways are the peers allowed to call (the config's
	// identity.trusted_proxies): a descriptor names any client address, so
	// any other caller is refused with PermissionDenied.
	Gateways []netip.Prefix
	// Domains maps each domain of Envoy's rate-limit filter to its tree of
	// descriptors. An unknown domain, like a descriptor no node matches, is
	// answered OK with no limit, as envoyproxy/ratelimit answers it.
	Domains map[string][]Descriptor
	// Clock returns the time for X-RateLimit-Reset (default time.Now).
	Clock func() time.Time
	// Logger (default slog.Default()).
	Logger *slog.Logger
}

// RateLimitService is Envoy's global rate-limit service
// (envoy.service.ratelimit.v3.RateLimitService) over costgate's policies.
type RateLimitService struct {
	rlsv3.UnimplementedRateLimitServiceServer
	cfg      EnvoyConfig
	domains  map[string]*node
	refusals *refusalLog
}

var _ rlsv3.RateLimitServiceServer = (*RateLimitService)(nil)

// ValidateDomains reports every problem of a descriptor tree, joined: each
// is a *DescriptorError or, for the whole, a *limiter.FieldError. ids may be
// nil (policies are then not checked against it).
func ValidateDomains(domains map[string][]Descriptor, ids *identity.Resolver) error {
	_, errs := compileDomains(domains, ids)
	return errors.Join(errs...)
}

// NewRateLimitService checks cfg and returns the service.
func NewRateLimitService(cfg EnvoyConfig) (*RateLimitService, error) {
	var errs []error
	fail := func(field, reason string) {
		errs = append(errs, &limiter.FieldError{Field: field, Reason: reason})
	}
	if cfg.Limiter == nil {
		fail("Limiter", "required")
	}
	if cfg.Identity == nil {
		fail("Identity", "required: it says who pays")
	}
	if len(cfg.Gateways) == 0 {
		fail("Gateways", "empty: no Envoy could call (list their addresses in identity.trusted_proxies)")
	}
	domains, derrs := compileDomains(cfg.Domains, cfg.Identity)
	errs = append(errs, derrs...)
	if cfg.Limiter != nil {
		var walk func([]Descriptor)
		walk = func(ds []Descriptor) {
			for _, d := range ds {
				for _, p := range d.Policies {
					if err := cfg.Limiter.CheckPolicy(p); err != nil {
						errs = append(errs, err)
					}
					if p.EndsWithResponse() {
						errs = append(errs, &limiter.FieldError{Field: "Domains", Reason: EndingPolicyReason(p)})
					}
				}
				walk(d.Descriptors)
			}
		}
		for _, ds := range cfg.Domains {
			walk(ds)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("check: %w", err)
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &RateLimitService{cfg: cfg, domains: domains, refusals: &refusalLog{logger: cfg.Logger}}, nil
}

// planned is one descriptor of a request, matched and resolved.
type planned struct {
	reqs []limiter.Request // scaled by the caller's plan, keyed for the caller
	peek bool              // hits_addend 0: check, charge nothing
	// refused says why a value the client controls cannot be limited by
	// (an HTTP door answers it 400): the policies that do not key by it
	// are charged, and the descriptor is OVER_LIMIT whatever they say.
	refused string
}

// ShouldRateLimit implements the service. Every descriptor is matched and
// its identity resolved before anything is charged; the descriptors'
// policies are then charged all or nothing, and one over its limit makes
// the answer OVER_LIMIT and leaves every budget as it was. Only the
// gateway's own mistakes are errors (InvalidArgument, nothing charged): a
// value the client controls never is, since Envoy lets a request through
// unlimited when the service answers an error and failure_mode_deny is off.
func (s *RateLimitService) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	if peerAddr, ok := s.fromGateway(ctx); !ok {
		s.refusals.refused("grpc", peerAddr)
		return nil, status.Error(codes.PermissionDenied, "the rate-limit service answers only the gateways listed in identity.trusted_proxies")
	}
	if req.GetDomain() == "" {
		return nil, status.Error(codes.InvalidArgument, "rate limit domain must not be empty")
	}
	switch n := len(req.GetDescriptors()); {
	case n == 0:
		return nil, status.Error(codes.InvalidArgument, "rate limit descriptor list must not be empty")
	case n > MaxDescriptors:
		return nil, status.Errorf(codes.InvalidArgument, "%d descriptors: at most %d in one request", n, MaxDescriptors)
	}
	root := s.domains[req.GetDomain()]
	plans := make([]*planned, len(req.GetDescriptors()))
	var scratch [8]entry // a descriptor seldom has more: one array for all
	for i, d := range req.GetDescriptors() {
		p, err := s.plan(ctx, root, d, req.GetHitsAddend(), scratch[:0])
		if err != nil {
			return nil, status.Errorf(status.Code(err), "descriptor %d: %s", i, status.Convert(err).Message())
		}
		plans[i] = p
	}
	decisions, ok := s.decide(ctx, plans)
	return s.response(plans, decisions, ok), nil
}

// plan checks one descriptor, matches it and resolves who pays; nil when
// no policy applies. Its errors are InvalidArgument: what the gateway's
// config decides (the entries' keys and number, hits_addend). entries is
// scratch space for the descriptor's entries.
func (s *RateLimitService) plan(ctx context.Context, root *node, d *rlcommon.RateLimitDescriptor, hits uint32, entries []entry) (*planned, error) {
	if d == nil {
		return nil, status.Error(codes.InvalidArgument, "empty")
	}
	if d.GetIsNegativeHits() {
		return nil, status.Error(codes.InvalidArgument, "is_negative_hits is not supported: costgate gives back only what a denied request charged")
	}
	if n := len(d.GetEntries()); n > MaxEntries {
		return nil, status.Errorf(codes.InvalidArgument, "%d entries: at most %d", n, MaxEntries)
	}
	for j, e := range d.GetEntries() {
		// A key is the gateway's (a descriptor_key); a value may be the
		// client's (a request header), so its length is judged by the part
		// it supplies, never refused here.
		if len(e.GetKey()) > MaxEntryBytes {
			return nil, status.Errorf(codes.InvalidArgument, "entry %d: a key longer than %d bytes", j, MaxEntryBytes)
		}
		entries = append(entries, entry{e.GetKey(), e.GetValue()})
	}
	cost := int64(max(hits, 1))
	peek := false
	if h := d.GetHitsAddend(); h != nil {
		if h.GetValue() > limiter.MaxExact {
			return nil, status.Errorf(codes.InvalidArgument, "hits_addend %d is over 2^53", h.GetValue())
		}
		cost, peek = int64(h.GetValue()), h.GetValue() == 0
	}
	if root == nil {
		return nil, nil
	}
	leaf, parts := root.match(entries, nil)
	if leaf == nil || len(leaf.policies) == 0 {
		return nil, nil
	}
	id, refused, err := s.identity(ctx, parts, leaf.policies)
	if err != nil {
		return nil, err
	}
	p := &planned{peek: peek, refused: refused.reason}
	policies := leaf.policies
	if refused.reason != "" {
		policies = refused.without(policies)
	}
	for _, pol := range policies {
		p.reqs = append(p.reqs, s.cfg.Identity.Request(pol, id, cost))
	}
	return p, nil
}

// refusal lists the key parts whose values the limits cannot take.
type refusal struct {
	parts  []string
	all    bool   // no client address: nothing can be charged
	reason string // the first refusal, for the client
}

func (r *refusal) add(part, format string, args ...any) {
	if r.reason == "" {
		r.reason = fmt.Sprintf(format, args...)
	}
	r.parts = append(r.parts, part)
}

// without returns the policies that key by none of the refused parts.
func (r *refusal) without(policies []*limiter.Policy) []*limiter.Policy {
	var out []*limiter.Policy
	for _, p := range policies {
		if !r.all && !slices.ContainsFunc(r.parts, func(part string) bool { return keyparts.Needs([]*limiter.Policy{p}, part) }) {
			out = append(out, p)
		}
	}
	return out
}

// identity resolves the identity the entries' key parts describe, exactly
// as an HTTP door resolves a request carrying them: the address as the
// peer, the API key and headers as headers (an unknown or over-long key is
// charged to the address, an over-long header is keyed by it), the
// username normalised. A value none of that can take, for a part the
// policies key by, is a refusal.
func (s *RateLimitService) identity(ctx context.Context, parts []partValue, policies []*limiter.Policy) (*identity.Identity, refusal, error) {
	r := (&http.Request{Header: http.Header{}}).WithContext(ctx)
	var refused refusal
	var user, route string
	var hasUsername, hasAddr bool
	for _, pv := range parts {
		switch pv.part {
		case identity.PartIP:
			// Envoy's remote_address is always an address; anything else
			// came from a header, so the client has no address to charge.
			if hasAddr = parseAddr(pv.value); !hasAddr {
				refused.all = true
				refused.add(pv.part, "the client address (part ip) %q is not an IP address", truncate(pv.value))
			}
			r.RemoteAddr = pv.value
		case identity.PartAPIKey:
			r.Header[s.cfg.Identity.APIKeyHeader()] = []string{pv.value}
		case identity.PartUsername:
			user, hasUsername = pv.value, true
		case identity.PartRoute:
			route = pv.value
		default: // header:NAME, canonical
			r.Header[strings.TrimPrefix(pv.part, identity.PartHeaderPrefix)] = []string{pv.value}
		}
	}
	for _, pv := range parts {
		name, isHeader := strings.CutPrefix(pv.part, identity.PartHeaderPrefix)
		// Keyed by the address in its place, unless there is none.
		if isHeader && !hasAddr && !keyparts.IsHeaderValue(pv.value) && keyparts.Needs(policies, pv.part) {
			refused.add(pv.part, "the %s header (part %s) is empty or longer than %d bytes, and no entry gives the client address", name, pv.part, keyparts.MaxHeaderBytes)
		}
	}
	id, err := s.cfg.Identity.Resolve(r)
	if err != nil {
		return nil, refused, status.Error(codes.Unavailable, "the API key could not be checked; retry shortly")
	}
	if hasUsername && keyparts.Needs(policies, identity.PartUsername) {
		if name, err := username.Normalize(user); err != nil {
			refused.add(identity.PartUsername, "the username (part username) is %s", usernameReason(err))
		} else {
			id.Username = name
		}
	}
	if len(route) > MaxEntryBytes && keyparts.Needs(policies, identity.PartRoute) {
		refused.add(identity.PartRoute, "the route (part route) is longer than %d bytes", MaxEntryBytes)
	} else {
		id.Route = route
	}
	return id, refused, nil
}

func parseAddr(s string) bool {
	if _, err := netip.ParseAddrPort(s); err == nil {
		return true
	}
	_, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"))
	return err == nil
}

// decide makes the decisions of every planned descriptor, all or nothing:
// the checks of hits_addend 0 first (they charge nothing), then one
// AllowAll over every charge. decisions[i] holds descriptor i's decisions,
// empty when it was not reached.
func (s *RateLimitService) decide(ctx context.Context, plans []*planned) ([][]limiter.Decision, bool) {
	decisions := make([][]limiter.Decision, len(plans))
	for i, p := range plans {
		if p == nil || !p.peek {
			continue
		}
		for _, r := range p.reqs {
			d := s.peek(ctx, r)
			decisions[i] = append(decisions[i], d)
			if !d.Allowed {
				return decisions, false
			}
		}
	}
	var reqs []limiter.Request
	var owner []int
	for i, p := range plans {
		if p == nil || p.peek {
			continue
		}
		for _, r := range p.reqs {
			reqs = append(reqs, r)
			owner = append(owner, i)
		}
	}
	if len(reqs) == 0 {
		return decisions, true
	}
	made, ok := s.cfg.Limiter.AllowAll(ctx, reqs)
	for k, d := range made {
		decisions[owner[k]] = append(decisions[owner[k]], d)
	}
	return decisions, ok
}

// peek checks a policy without charging it: denied when not one unit is
// left. A store error is decided by the policy's on_store_error, as a
// charge would be (local: allowed, since there is nothing to charge).
func (s *RateLimitService) peek(ctx context.Context, r limiter.Request) limiter.Decision {
	if d, ok := s.cfg.Limiter.Overridden(r); ok {
		return d // an operator exempts or blocks the caller
	}
	p := r.Policy
	shadow := p.EffectiveMode() == limiter.Shadow
	d, err := s.cfg.Limiter.Peek(ctx, p, r.Key)
	switch {
	case err != nil:
		d = limiter.Decision{Policy: p, Limit: p.Capacity(), Err: err, Allowed: true, Outcome: limiter.ErrorAllowed}
		if p.EffectiveFailMode() == limiter.FailDeny && !shadow {
			d.Allowed, d.Outcome = false, limiter.ErrorDenied
		}
	case d.Remaining < 1 && shadow:
		d.Outcome = limiter.ShadowDenied
	case d.Remaining < 1:
		d.Allowed, d.Outcome = false, limiter.Denied
		d.RetryAfter = d.ResetAfter // at most this long until a unit is back
	}
	return d
}

// response builds the answer: a status per descriptor, the rate-limit
// headers of every decision (Envoy adds them to the client's response, OK
// or not), and on a denial the body and Retry-After of the HTTP doors.
func (s *RateLimitService) response(plans []*planned, decisions [][]limiter.Decision, ok bool) *rlsv3.RateLimitResponse {
	resp := &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK, Statuses: make([]*rlsv3.RateLimitResponse_DescriptorStatus, len(plans))}
	var all []limiter.Decision
	var denied *limiter.Decision
	refused := ""
	for i, p := range plans {
		st := &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK}
		resp.Statuses[i] = st
		if p == nil {
			continue // no limit applies, as envoyproxy/ratelimit answers
		}
		if p.refused != "" {
			st.Code = rlsv3.RateLimitResponse_OVER_LIMIT
			if refused == "" {
				refused = p.refused
			}
		}
		ds := decisions[i]
		if len(ds) == 0 {
			if p.refused == "" {
				// Not checked: an earlier descriptor was over its limit.
				st.Code = rlsv3.RateLimitResponse_UNKNOWN
			}
			continue
		}
		all = append(all, ds...)
		pick := -1
		for k := range ds {
			d := &ds[k]
			if !d.Allowed {
				st.Code = rlsv3.RateLimitResponse_OVER_LIMIT
				denied = d
				if ratefields.Shown(d) {
					pick = k
				}
				break
			}
			if ratefields.Shown(d) && (pick < 0 || d.Remaining < ds[pick].Remaining) {
				pick = k
			}
		}
		if pick >= 0 {
			d := ds[pick]
			st.CurrentLimit = currentLimit(d.Policy)
			st.LimitRemaining = uint32(min(max(d.Remaining, 0), math.MaxUint32))
			st.DurationUntilReset = durationpb.New(d.ResetAfter)
		}
	}
	h := http.Header{}
	header.Set(h, s.cfg.Clock(), all)
	w := &memoryWriter{h: h}
	switch {
	case !ok && denied != nil:
		routelimit.WriteDenied(w, *denied)
	case refused != "":
		// Denied as the HTTP doors answer such a value (400): a gateway
		// failing open would let an error through unlimited.
		writeError(w, http.StatusBadRequest, CodeBadRequest, refused)
	}
	if !ok || refused != "" {
		resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
		resp.RawBody = w.body.Bytes()
	}
	resp.ResponseHeadersToAdd = headerValues(h)
	return resp
}

// currentLimit describes a policy as Envoy's RateLimit: the quota and window
// of its RateLimit-Policy header (burst and refill time for the buckets),
// in the largest unit that divides the window.
func currentLimit(p *limiter.Policy) *rlsv3.RateLimitResponse_RateLimit {
	q, w := ratefields.Window(p)
	rl := &rlsv3.RateLimitResponse_RateLimit{Name: p.Name, RequestsPerUnit: uint32(min(q, math.MaxUint32)), Unit: rlsv3.RateLimitResponse_RateLimit_SECOND}
	for _, u := range []struct {
		secs int64
		unit rlsv3.RateLimitResponse_RateLimit_Unit
	}{
		{7 * 86400, rlsv3.RateLimitResponse_RateLimit_WEEK},
		{86400, rlsv3.RateLimitResponse_RateLimit_DAY},
		{3600, rlsv3.RateLimitResponse_RateLimit_HOUR},
		{60, rlsv3.RateLimitResponse_RateLimit_MINUTE},
		{1, rlsv3.RateLimitResponse_RateLimit_SECOND},
	} {
		if w%u.secs == 0 {
			rl.Unit = u.unit
			if m := w / u.secs; m > 1 {
				rl.UnitMultiplier = wrapperspb.UInt32(uint32(min(m, math.MaxUint32)))
			}
			break
		}
	}
	return rl
}

func headerValues(h http.Header) []*corev3.HeaderValue {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []*corev3.HeaderValue
	for _, k := range keys {
		for _, v := range h[k] {
			out = append(out, &corev3.HeaderValue{Key: k, Value: v})
		}
	}
	return out
}

// fromGateway reports whether the caller is a gateway, and its address.
func (s *RateLimitService) fromGateway(ctx context.Context) (string, bool) {
	p, ok := grpcpeer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return "", false
	}
	return p.Addr.String(), peer.In(p.Addr.String(), s.cfg.Gateways)
}

// memoryWriter captures what httplimit writes for a denial.
type memoryWriter struct {
	h    http.Header
	body bytes.Buffer
}

func (w *memoryWriter) Header() http.Header         { return w.h }
func (w *memoryWriter) Write(p []byte) (int, error) { return w.body.Write(p) }
func (w *memoryWriter) WriteHeader(int)             {}
