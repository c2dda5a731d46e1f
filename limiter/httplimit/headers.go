package httplimit

import (
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/costgate/costgate/limiter"
)

// Header names, set on every limited response, allowed or denied.
const (
	HeaderLimit      = "X-RateLimit-Limit"
	HeaderRemaining  = "X-RateLimit-Remaining"
	HeaderReset      = "X-RateLimit-Reset"
	HeaderPolicy     = "RateLimit-Policy" // IETF draft: one item per applied policy
	HeaderRateLimit  = "RateLimit"        // IETF draft: same items, same order
	HeaderRetryAfter = "Retry-After"
)

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// ceilSeconds rounds d up to whole seconds.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64(math.Ceil(d.Seconds()))
}

// RetryAfterSeconds is the Retry-After value for a denial: whole seconds,
// rounded up, at least 1.
func RetryAfterSeconds(d limiter.Decision) int64 {
	return max(ceilSeconds(d.RetryAfter), 1)
}

// Window returns a policy's RateLimit-Policy quota and window: for the
// windows q = limit and w = the period; for the buckets q = burst and w = the
// seconds to refill a whole bucket, ceil(burst·period/limit).
func Window(p *limiter.Policy) (q, w int64) {
	if p.IsBucket() {
		b := p.Capacity()
		refill := ceilDiv(b*p.PeriodMicros(), p.Limit) // µs
		return b, max(1, ceilDiv(refill, 1_000_000))
	}
	return p.Limit, max(1, ceilSeconds(p.Period))
}

// SetHeaders writes the rate-limit headers for the decisions of one request
// (the policies applied, in config order). Decisions of shadow-mode
// policies, and decisions made without the store, are left out; with none
// left no header is written. X-RateLimit-* describe the decision with the
// smallest remaining (ties: the first).
func SetHeaders(h Header, now time.Time, decisions []limiter.Decision) {
	var (
		policy, state strings.Builder
		pick          *limiter.Decision
	)
	for i := range decisions {
		d := &decisions[i]
		if d.Policy == nil || d.Policy.EffectiveMode() == limiter.Shadow || d.Err != nil && d.Outcome != limiter.ErrorLocal {
			continue
		}
		if pick == nil || d.Remaining < pick.Remaining {
			pick = d
		}
		q, w := Window(d.Policy)
		t := ceilSeconds(d.ResetAfter)
		if !d.Allowed && !d.ExceedsCapacity {
			t = RetryAfterSeconds(*d)
		}
		if policy.Len() > 0 {
			policy.WriteString(", ")
			state.WriteString(", ")
		}
		name := sfString(d.Policy.Name)
		policy.WriteString(name + ";q=" + strconv.FormatInt(q, 10) + ";w=" + strconv.FormatInt(w, 10))
		state.WriteString(name + ";r=" + strconv.FormatInt(max(d.Remaining, 0), 10) + ";t=" + strconv.FormatInt(t, 10))
	}
	if pick == nil {
		return
	}
	h.Set(HeaderLimit, strconv.FormatInt(pick.Limit, 10))
	h.Set(HeaderRemaining, strconv.FormatInt(max(pick.Remaining, 0), 10))
	h.Set(HeaderReset, strconv.FormatInt(resetUnix(now, pick.ResetAfter), 10))
	h.Set(HeaderPolicy, policy.String())
	h.Set(HeaderRateLimit, state.String())
}

// Header is the part of http.Header SetHeaders needs.
type Header interface{ Set(key, value string) }

// resetUnix is the Unix second at which the quota is full again, rounded up.
func resetUnix(now time.Time, after time.Duration) int64 {
	at := now.Add(after)
	s := at.Unix()
	if at.Nanosecond() > 0 {
		s++
	}
	return s
}

// sfString renders s as an RFC 8941 sf-string: printable ASCII in quotes,
// with " and \ escaped. Other bytes cannot appear in an sf-string and are
// replaced by '?'; policy names from the config are plain identifiers anyway.
func sfString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c > 0x7e:
			b.WriteByte('?')
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}
