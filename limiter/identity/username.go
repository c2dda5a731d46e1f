package identity

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// MaxUsernameBytes bounds a username before it is normalised: NFKC can
// expand a string eighteen-fold, and a 60 KB name of U+FDFA costs 21 ms of
// CPU to normalise.
const MaxUsernameBytes = 256

// DefaultMaxBodyBytes bounds a login body read for its username.
const DefaultMaxBodyBytes = 64 << 10

// UsernameError says why a login body gives no username to limit by.
// Status is the HTTP status the doors answer with (400 or 413).
type UsernameError struct {
	Status int
	Reason string
	// TooLong reports a username over MaxUsernameBytes: the request is
	// still charged to the policies that do not key by username.
	TooLong bool
}

func (e *UsernameError) Error() string { return "username: " + e.Reason }

// NormalizeUsername returns the form a username is limited by: NFKC,
// trimmed, lower-cased, so that "Alice", " alice" and "ａｌｉｃｅ" share one
// limit. A name that is empty once trimmed, not UTF-8, or longer than
// MaxUsernameBytes (checked before any normalisation) is refused.
func NormalizeUsername(s string) (string, error) {
	if len(s) > MaxUsernameBytes {
		return "", &UsernameError{Status: http.StatusBadRequest, TooLong: true,
			Reason: fmt.Sprintf("longer than %d bytes", MaxUsernameBytes)}
	}
	if !utf8.ValidString(s) {
		return "", &UsernameError{Status: http.StatusBadRequest, Reason: "not UTF-8"}
	}
	s = strings.ToLower(strings.TrimSpace(norm.NFKC.String(s)))
	if s == "" {
		return "", &UsernameError{Status: http.StatusBadRequest, Reason: "empty"}
	}
	return s, nil
}

// ReadUsername reads a JSON login body ({"username": "..."}) for its
// username and puts the body back for the handler. At most maxBody bytes
// are read (0 means DefaultMaxBodyBytes).
func ReadUsername(r *http.Request, maxBody int64) (string, error) {
	if maxBody <= 0 {
		maxBody = DefaultMaxBodyBytes
	}
	if r.Body == nil || r.Body == http.NoBody {
		return "", &UsernameError{Status: http.StatusBadRequest, Reason: `the body must be a JSON object with a "username"`}
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return "", &UsernameError{Status: http.StatusBadRequest, Reason: "could not read the body"}
	}
	if int64(len(body)) > maxBody {
		return "", &UsernameError{Status: http.StatusRequestEntityTooLarge, Reason: fmt.Sprintf("the body is larger than %d bytes", maxBody)}
	}
	var login struct {
		Username *string `json:"username"`
	}
	// JSON is UTF-8; encoding/json would quietly turn bad bytes into U+FFFD.
	if !utf8.Valid(body) || json.Unmarshal(body, &login) != nil || login.Username == nil {
		return "", &UsernameError{Status: http.StatusBadRequest, Reason: `the body must be a JSON object with a "username" string`}
	}
	return NormalizeUsername(*login.Username)
}

// IsTooLong reports a username refused for its length (see UsernameError.TooLong).
func IsTooLong(err error) bool {
	var ue *UsernameError
	return errors.As(err, &ue) && ue.TooLong
}
