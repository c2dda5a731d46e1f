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

// The actual cost of a document sent again and again, with variables that
// change what it selects, is the one priced afresh each time: what pricing
// keeps of a document's responses does not carry one request's variables
// into the next.
func TestActualCostOfRepeatedDocument(t *testing.T) {
	const query = `query($v: Boolean!) { products(first: 3) { nodes { id variants(first: 2) @include(if: $v) { sku } } } }`
	actual := func(e *env, v bool) int64 {
		t.Helper()
		res := e.post(t, query, map[string]any{"v": v}, nil)
		c := res.Cost(t)
		if res.Status != http.StatusOK || c.ActualQueryCost == nil {
			t.Fatalf("v=%v: status %d, actual %v: %s", v, res.Status, c.ActualQueryCost, res.Body)
		}
		return *c.ActualQueryCost
	}
	want := map[bool]int64{true: actual(newEnv(t, envOpts{}), true), false: actual(newEnv(t, envOpts{}), false)}
	if want[true] == want[false] {
		t.Fatalf("actual cost %d with and without the variants: the test does not tell them apart", want[true])
	}
	e := newEnv(t, envOpts{})
	for i, v := range []bool{true, false, false, true, true, false} {
		if got := actual(e, v); got != want[v] {
			t.Errorf("request %d (v=%v): actual cost %d, want %d", i, v, got, want[v])
		}
	}
}
