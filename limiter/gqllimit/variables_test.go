package gqllimit_test

import (
	"net/http"
	"testing"
)

// TestVariablesMustBeAnObject: variables that are not a JSON object, or hold
// a number no float64 holds (what encoding/json cannot decode), are
// refused with 400 before anything is charged or run; an object is served.
func TestVariablesMustBeAnObject(t *testing.T) {
	e := newEnv(t, envOpts{})
	for _, vars := range []string{`"n"`, `[]`, `3`, `{"n": 1e400}`, `{"a": {"b": [-1e999]}}`} {
		before := e.available(t)
		res := e.raw(t, http.MethodPost, "/", []byte(`{"query":"query($n: Int) { products(first: $n) { nodes { id } } }","variables":`+vars+`}`),
			map[string]string{"Content-Type": "application/json"})
		if res.Status != http.StatusBadRequest || res.Code() != "BAD_REQUEST" {
			t.Errorf("variables %s: got %d %s, want 400 BAD_REQUEST", vars, res.Status, res.Code())
		}
		if got := e.available(t); got != before {
			t.Errorf("variables %s: %d points charged", vars, before-got)
		}
	}
	if got := e.resolved.get("products"); got != 0 {
		t.Errorf("products resolved %d times for refused variables", got)
	}
	res := e.raw(t, http.MethodPost, "/", []byte(`{"query":"query($n: Int) { products(first: $n) { nodes { id } } }","variables":{"n": 2, "s": "\"{1e400}\\\\"}}`),
		map[string]string{"Content-Type": "application/json"})
	if res.Status != http.StatusOK || res.Code() != "" {
		t.Errorf("an object of variables: got %d %s, want 200", res.Status, res.Code())
	}
}
