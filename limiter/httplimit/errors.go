package httplimit

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/header"
)

// Error codes of the JSON error bodies.
const (
	CodeRateLimit   = "rate_limit"
	CodeUnavailable = "rate_limiter_unavailable"
)

// errorBody is the JSON body of a 429 or 503.
type errorBody struct {
	Error         string `json:"error"`
	Message       string `json:"message"`
	Policy        string `json:"policy,omitempty"`
	RetryAfterSec int64  `json:"retry_after_sec,omitempty"`
}

// WriteDenied answers a denied request: 429 with Retry-After when the
// policy denied, 503 when the store failed and the policy fails closed.
func WriteDenied(w http.ResponseWriter, d limiter.Decision) {
	name := ""
	if d.Policy != nil {
		name = d.Policy.Name
	}
	switch {
	case d.Outcome == limiter.ErrorDenied:
		w.Header().Set(header.RetryAfter, strconv.Itoa(header.UnavailableRetryAfter))
		writeError(w, http.StatusServiceUnavailable, errorBody{
			Error:         CodeUnavailable,
			Message:       "the rate limiter cannot reach its store, and this route fails closed; retry shortly",
			Policy:        name,
			RetryAfterSec: header.UnavailableRetryAfter,
		})
	case d.ExceedsCapacity:
		// Retrying cannot help: no Retry-After.
		writeError(w, http.StatusTooManyRequests, errorBody{
			Error:   CodeRateLimit,
			Message: fmt.Sprintf("the request costs %d, more than policy %q can ever grant (%d)", d.Cost, name, d.Limit),
			Policy:  name,
		})
	default:
		secs := header.RetryAfterSeconds(d)
		w.Header().Set(header.RetryAfter, strconv.FormatInt(secs, 10))
		writeError(w, http.StatusTooManyRequests, errorBody{
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

func writeError(w http.ResponseWriter, status int, body errorBody) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(body)
}
