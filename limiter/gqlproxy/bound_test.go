package gqlproxy_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/costgate/costgate/limiter/gqllimit"
)

// Proxied, a document is validated against the upstream's schema with the
// same bounds: no suggestion of the schema's names with introspection
// disabled, at most 100 errors and the one saying validation stopped,
// nothing forwarded, the refusal charged.
func TestProxyValidationIsBounded(t *testing.T) {
	up := startUpstream(t)
	for _, noIntrospection := range []bool{false, true} {
		e := newProxyEnv(t, up.URL, func(c *gqllimit.Config) { c.NoIntrospection = noIntrospection })
		r := e.post(t, `{ products { nodes { titl } } }`, nil, nil)
		if r.Status != 400 || r.Code() != gqllimit.CodeValidationFailed {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		if suggests := strings.Contains(r.Body, "Did you mean"); suggests == noIntrospection {
			t.Errorf("introspection disabled %v: %s", noIntrospection, r.Body)
		}
	}
	e := newProxyEnv(t, up.URL)
	var b strings.Builder
	for i := range 498 {
		fmt.Fprintf(&b, "variants(first: %d) { id } ", 1+i%2)
	}
	before := e.available(t)
	r := e.post(t, "{ products(first: 1) { nodes { "+b.String()+"} } }", nil, nil)
	if r.Status != 400 || len(r.Res.Errors) != 101 || len(r.Body) > 1<<20 {
		t.Errorf("%d, %d errors, %d bytes", r.Status, len(r.Res.Errors), len(r.Body))
	}
	if charged := before - e.available(t); charged != 4 {
		t.Errorf("charged %d, want 4: reading 1,997 nodes", charged)
	}
	if n := up.calls.Load(); n != 0 {
		t.Errorf("the upstream got %d calls", n)
	}
}
