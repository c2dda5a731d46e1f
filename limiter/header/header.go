// Package header writes the rate-limit response headers that every door of
// costgate sends, allowed or denied: X-RateLimit-Limit, -Remaining, -Reset,
// and the IETF draft's RateLimit-Policy and RateLimit, one item per applied
// policy.
package header

import (
	"net/http"
	"strconv"
	"time"

	"github.com/costgate/costgate/internal/ratefields"

	"github.com/costgate/costgate/limiter"
)

// Header names, set on every limited response, allowed or denied.
const (
	Limit      = "X-RateLimit-Limit"
	Remaining  = "X-RateLimit-Remaining"
	Reset      = "X-RateLimit-Reset"
	Policy     = "RateLimit-Policy" // IETF draft: one item per applied policy
	RateLimit  = "RateLimit"        // IETF draft: same items, same order
	RetryAfter = "Retry-After"
	// Override names, per policy, the operators' override that applied to
	// the request: "api";action=limit;expires=1764480000 (Unix seconds).
	Override = "Costgate-Override"
)

// Exposed lists the headers a browser client on another origin needs
// exposed (Access-Control-Expose-Headers) to read its limits.
var Exposed = []string{Limit, Remaining, Reset, Policy, RateLimit, RetryAfter, Override}

// UnavailableRetryAfter is the Retry-After, in seconds, of a 503 answered
// because the store is down and the policy fails closed.
const UnavailableRetryAfter = 1

// RetryAfterSeconds is the Retry-After value for a denial: whole seconds,
// rounded up, at least 1.
func RetryAfterSeconds(d limiter.Decision) int64 {
	return max(ratefields.CeilSeconds(d.RetryAfter), 1)
}

// Canonical forms of the header names, so that setting them allocates nothing.
var (
	keyLimit     = http.CanonicalHeaderKey(Limit)
	keyRemaining = http.CanonicalHeaderKey(Remaining)
	keyReset     = http.CanonicalHeaderKey(Reset)
	keyPolicy    = http.CanonicalHeaderKey(Policy)
	keyRateLimit = http.CanonicalHeaderKey(RateLimit)
	keyOverride  = http.CanonicalHeaderKey(Override)
)

// Set writes the rate-limit headers for the decisions of one request
// (the policies applied, in config order). Decisions of shadow-mode
// policies, and decisions made without the store, are left out; with none
// left no header is written. X-RateLimit-* describe the decision with the
// smallest remaining (ties: the first); a concurrency policy's only when it
// denies or no rate policy applies, since its remaining counts requests in
// flight. A concurrency policy's RateLimit-Policy item has no window but
// the draft's quota unit, qu="concurrent-requests", and its RateLimit item
// a t only on a denial (the Retry-After).
// An override that made a decision is also named in Costgate-Override
// (a limit override's own limits are those RateLimit-Policy shows).
func Set(h http.Header, now time.Time, decisions []limiter.Decision) {
	for i := range decisions {
		if decisions[i].Override != nil {
			setOverrides(h, decisions)
			break
		}
	}
	// Every value is written into one buffer, kept on the stack for the
	// usual one or two policies, and becomes one string: two allocations
	// (that string and the values' backing array) whatever the policies.
	var stack [256]byte
	buf := stack[:0]
	var pick *limiter.Decision
	for i := range decisions {
		if d := &decisions[i]; ratefields.Shown(d) && ratefields.Describes(d, pick) {
			pick = d
		}
	}
	if pick == nil {
		return
	}
	var cut [5]int
	buf = strconv.AppendInt(buf, pick.Limit, 10)
	cut[0] = len(buf)
	buf = strconv.AppendInt(buf, max(pick.Remaining, 0), 10)
	cut[1] = len(buf)
	buf = strconv.AppendInt(buf, resetUnix(now, pick.ResetAfter), 10)
	cut[2] = len(buf)
	first := true
	for i := range decisions {
		d := &decisions[i]
		if !ratefields.Shown(d) {
			continue
		}
		if !first {
			buf = append(buf, ", "...)
		}
		first = false
		q, w := ratefields.Window(d.Policy)
		buf = appendSFString(buf, d.Policy.Name)
		buf = strconv.AppendInt(append(buf, ";q="...), q, 10)
		if w > 0 {
			buf = strconv.AppendInt(append(buf, ";w="...), w, 10)
		} else {
			buf = append(buf, `;qu="concurrent-requests"`...) // requests in flight, no window
		}
	}
	cut[3] = len(buf)
	first = true
	for i := range decisions {
		d := &decisions[i]
		if !ratefields.Shown(d) {
			continue
		}
		if !first {
			buf = append(buf, ", "...)
		}
		first = false
		t := ratefields.CeilSeconds(d.ResetAfter)
		if !d.Allowed && !d.ExceedsCapacity {
			t = RetryAfterSeconds(*d)
		}
		buf = appendSFString(buf, d.Policy.Name)
		buf = strconv.AppendInt(append(buf, ";r="...), max(d.Remaining, 0), 10)
		if d.Allowed && d.Policy.Algorithm == limiter.Concurrency {
			continue // a place is free now; when more free is not known
		}
		buf = strconv.AppendInt(append(buf, ";t="...), t, 10)
	}
	cut[4] = len(buf)
	all := string(buf)
	vals := [...]string{all[:cut[0]], all[cut[0]:cut[1]], all[cut[1]:cut[2]], all[cut[2]:cut[3]], all[cut[3]:cut[4]]}
	backing := vals[:] // one allocation for the five one-element slices
	h[keyLimit] = backing[0:1:1]
	h[keyRemaining] = backing[1:2:2]
	h[keyReset] = backing[2:3:3]
	h[keyPolicy] = backing[3:4:4]
	h[keyRateLimit] = backing[4:5:5]
}

// setOverrides writes Costgate-Override: one item per decision an
// override made, its policy's name with the action and the expiry.
func setOverrides(h http.Header, decisions []limiter.Decision) {
	var b []byte
	for i := range decisions {
		d := &decisions[i]
		if d.Override == nil || d.Policy == nil {
			continue
		}
		if len(b) > 0 {
			b = append(b, ", "...)
		}
		b = appendSFString(b, d.Policy.Name)
		b = append(append(b, ";action="...), d.Override.Action...)
		b = strconv.AppendInt(append(b, ";expires="...), d.Override.Expires.Unix(), 10)
	}
	h[keyOverride] = []string{string(b)}
}

// resetUnix is the Unix second at which the quota is full again, rounded up.
func resetUnix(now time.Time, after time.Duration) int64 {
	at := now.Add(after)
	s := at.Unix()
	if at.Nanosecond() > 0 {
		s++
	}
	return s
}

// appendSFString appends s as an RFC 8941 sf-string: printable ASCII in
// quotes, with " and \ escaped. Other bytes cannot appear in an sf-string
// and become '?'; policy names from the config are plain identifiers anyway.
func appendSFString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20 || c > 0x7e:
			b = append(b, '?')
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}
