package limiter

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// PolicyError is a policy Validate refused: which policy, which field, and why.
// Match it with errors.As; callers map Field onto their own names (the
// server's config onto policies.NAME.FIELD), never parse the message.
type PolicyError struct {
	// Policy is the policy's name ("" when the name itself is the problem).
	Policy string
	// Field is the field in the config's spelling: name, algorithm, limit,
	// period, burst, key, mode, on_store_error, sync.
	Field  string
	Reason string
}

func (e *PolicyError) Error() string {
	var b strings.Builder
	b.WriteString("policy")
	if e.Policy != "" {
		b.WriteString(` "` + e.Policy + `"`)
	}
	b.WriteString(": " + e.Field + ": " + e.Reason)
	return b.String()
}

// FieldError is a setting a constructor refused because, as given, it would
// fail or would limit nothing. Field names the Go field (Config.Routes,
// Options.MaxKeys, Routes[1].Pattern); Reason says why.
type FieldError struct {
	Field string
	// Path is Field step by step, set when Field reaches into a slice or a
	// map (FieldAt), so that a caller maps it onto names of its own without
	// parsing Field: a string is a field name, an int a slice index, a
	// MapKey a map key. Routes[1].Pattern is {"Routes", 1, "Pattern"}.
	Path   []any
	Reason string
}

// MapKey is a map key in a FieldError's Path.
type MapKey string

// FieldAt returns the FieldError of the setting at path (see
// FieldError.Path), its Field spelled from the path.
func FieldAt(reason string, path ...any) *FieldError {
	var b strings.Builder
	for _, step := range path {
		switch s := step.(type) {
		case int:
			b.WriteString("[" + strconv.Itoa(s) + "]")
		case MapKey:
			b.WriteString("[" + strconv.Quote(string(s)) + "]")
		default:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			fmt.Fprint(&b, s)
		}
	}
	return &FieldError{Field: b.String(), Path: path, Reason: reason}
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

// Errors returns the errors err holds: those of an errors.Join, flattened,
// or err itself. Constructors that report every problem at once join them.
func Errors(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, Errors(e)...)
		}
		return out
	}
	return []error{err}
}

// ErrNilStore is returned by New without a store.
var ErrNilStore = errors.New("limiter: a Store is required")
