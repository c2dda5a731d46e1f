package routelimit

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/costgate/costgate/internal/jsonerror"
	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/header"
)

// Error codes of the JSON error bodies.
const (
	CodeRateLimit        = "rate_limit"
	CodeConcurrencyLimit = "concurrency_limit"
	CodeUnavailable      = "rate_limiter_unavailable"
	// CodeBlocked: an operator's deny override blocks the caller (403).
	CodeBlocked = "blocked"
)

// WriteDenied answers a denied request: 429 with Retry-After when the
// policy denied (concurrency_limit when a concurrency policy had no place
// free, rate_limit otherwise), 503 when the store failed and the policy
// fails closed, 403 when an operator blocked the caller.
func WriteDenied(w http.ResponseWriter, d limiter.Decision) {
	name := ""
	if d.Policy != nil {
		name = d.Policy.Name
	}
	switch {
	case d.Outcome == limiter.Blocked:
		// No Retry-After: the block lasts until the operators lift it.
		jsonerror.Write(w, http.StatusForbidden, jsonerror.Body{
			Error:   CodeBlocked,
			Message: "blocked by the operators of this API",
			Policy:  name,
		})
	case d.Outcome == limiter.ErrorDenied:
		jsonerror.Unavailable(w, jsonerror.Body{
			Error:   CodeUnavailable,
			Message: "the rate limiter cannot reach its store, and this route fails closed; retry shortly",
			Policy:  name,
		})
	case d.ExceedsCapacity:
		// Retrying cannot help: no Retry-After.
		jsonerror.Write(w, http.StatusTooManyRequests, jsonerror.Body{
			Error:   CodeRateLimit,
			Message: fmt.Sprintf("the request costs %d, more than policy %q can ever grant (%d)", d.Cost, name, d.Limit),
			Policy:  name,
		})
	case d.Policy != nil && d.Policy.Algorithm == limiter.Concurrency:
		secs := header.RetryAfterSeconds(d)
		w.Header().Set(header.RetryAfter, strconv.FormatInt(secs, 10))
		jsonerror.Write(w, http.StatusTooManyRequests, jsonerror.Body{
			Error:         CodeConcurrencyLimit,
			Message:       fmt.Sprintf("policy %q allows %d requests in flight at once, and they all are; retry in %ds", name, d.Limit, secs),
			Policy:        name,
			RetryAfterSec: secs,
		})
	default:
		secs := header.RetryAfterSeconds(d)
		w.Header().Set(header.RetryAfter, strconv.FormatInt(secs, 10))
		jsonerror.Write(w, http.StatusTooManyRequests, jsonerror.Body{
			Error:         CodeRateLimit,
			Message:       fmt.Sprintf("rate limit of policy %q exceeded; retry in %ds", name, secs),
			Policy:        name,
			RetryAfterSec: secs,
		})
	}
}

func errorCode(status int) string {
	switch status {
	case http.StatusRequestEntityTooLarge:
		return "body_too_large"
	case http.StatusUnauthorized:
		return "unauthorized"
	default:
		return "bad_request"
	}
}
