// Package jsonerror writes the JSON error answer every HTTP door of costgate
// sends: {"error": code, "message": why, ...}, never cached. The GraphQL
// doors answer in GraphQL's own shape instead (gqlexec.WriteResponse).
package jsonerror

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/costgate/costgate/limiter/header"
)

// Codes shared by several doors.
const (
	CodeUnauthorized        = "unauthorized"
	CodeIdentityUnavailable = "identity_unavailable"
)

// Body is the JSON error body.
type Body struct {
	Error         string `json:"error"`
	Message       string `json:"message"`
	Policy        string `json:"policy,omitempty"`
	RetryAfterSec int64  `json:"retry_after_sec,omitempty"`
}

// Write answers status with b.
func Write(w http.ResponseWriter, status int, b Body) { WriteJSON(w, status, b) }

// WriteJSON answers status with v as JSON, never cached: an answer about
// limits or health is only true now.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// Unavailable answers 503 with b, telling the client when to retry
// (header.UnavailableRetryAfter), in the header and in the body.
func Unavailable(w http.ResponseWriter, b Body) {
	w.Header().Set(header.RetryAfter, strconv.Itoa(header.UnavailableRetryAfter))
	b.RetryAfterSec = header.UnavailableRetryAfter
	Write(w, http.StatusServiceUnavailable, b)
}

// LookupFailed answers a request whose API key could not be looked up.
func LookupFailed(w http.ResponseWriter) {
	Unavailable(w, Body{Error: CodeIdentityUnavailable, Message: "the API key could not be checked; retry shortly"})
}

// UnknownAPIKey answers a request carrying an API key the Lookup does not
// know, once it was charged to its client address.
func UnknownAPIKey(w http.ResponseWriter) {
	Write(w, http.StatusUnauthorized, Body{Error: CodeUnauthorized, Message: "unknown API key"})
}
