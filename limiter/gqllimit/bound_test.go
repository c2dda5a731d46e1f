package gqllimit_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/vektah/gqlparser/v2/validator/rules"

	"github.com/costgate/costgate/limiter/gqllimit"
)

// With introspection disabled no error message names the schema's fields,
// arguments or types ("Did you mean ...?"); with it, they do, as gqlgen's own.
func TestSuggestionsOnlyWithIntrospection(t *testing.T) {
	queries := []string{
		`{ products { nodes { titl } } }`,                             // a field
		`{ products(frist: 1) { nodes { id } } }`,                     // an argument
		`{ products { nodes { ...F } } } fragment F on Produc { id }`, // a type
	}
	for _, noIntrospection := range []bool{false, true} {
		e := newEnv(t, envOpts{cfg: func(c *gqllimit.Config) { c.NoIntrospection = noIntrospection }})
		for _, q := range queries {
			r := e.post(t, q, nil, nil)
			if r.Status != 400 || r.Code() != gqllimit.CodeValidationFailed {
				t.Fatalf("%s: %d %s", q, r.Status, r.Body)
			}
			if suggests := strings.Contains(r.Body, "Did you mean"); suggests == noIntrospection {
				t.Errorf("introspection disabled %v: %s answered %s", noIntrospection, q, r.Body)
			}
		}
	}
}

// A document whose fields conflict pair by pair, within every limit, is
// answered 400 with at most 100 errors and the one saying validation
// stopped, in well under 1 MiB, charged what reading it took (1,997 nodes:
// 4 tokens, more than the rejection cost, 1).
func TestValidationAnswerIsBounded(t *testing.T) {
	e := newEnv(t, envOpts{})
	var b strings.Builder
	for i := range 498 {
		fmt.Fprintf(&b, "variants(first: %d) { id } ", 1+i%2)
	}
	before := e.available(t)
	r := e.post(t, "{ products(first: 1) { nodes { "+b.String()+"} } }", nil, nil)
	if r.Status != 400 || r.Code() != gqllimit.CodeValidationFailed {
		t.Fatalf("%d %.300s", r.Status, r.Body)
	}
	if n := len(r.Res.Errors); n != 101 || !strings.Contains(r.Res.Errors[100].Message, "too many validation errors") {
		t.Errorf("%d errors, the last %q", n, r.Res.Errors[n-1].Message)
	}
	if len(r.Body) > 1<<20 {
		t.Errorf("the answer is %d bytes", len(r.Body))
	}
	if charged := before - e.available(t); charged != 4 {
		t.Errorf("charged %d, want 4: 1,997 nodes", charged)
	}
}

// An answer costgate writes itself is bounded, whatever the request echoes:
// an operationName of a megabyte, a field name of a megabyte.
func TestEchoedNamesAreBounded(t *testing.T) {
	e := newEnv(t, envOpts{cfg: func(c *gqllimit.Config) { c.MaxBodyBytes = 4 << 20 }})
	long := strings.Repeat("x", 1<<20)
	for name, body := range map[string]string{
		"operationName": `{"query":"{ __typename }","operationName":"` + long + `"}`,
		"field":         `{"query":"{ ` + long + ` }"}`,
	} {
		r := e.raw(t, "POST", "/graphql", []byte(body), nil)
		if r.Status != 400 || len(r.Body) > 8<<10 {
			t.Errorf("%s: %d, %d bytes: %.200s", name, r.Status, len(r.Body), r.Body)
		}
	}
}

// One request, one reading: behind Handler, gqlgen runs the document the
// middleware parsed, measured and validated (its QueryCache), and neither
// parses nor validates it again: a validation rule gqlgen would run is never
// called, over POST, GET and SSE alike.
func TestGqlgenRunsTheMiddlewaresReading(t *testing.T) {
	var srv *handler.Server
	e := newEnv(t, envOpts{streams: true, server: func(s *handler.Server) { srv = s }})
	var validations atomic.Int64
	srv.SetValidationRulesFn(func() *rules.Rules {
		validations.Add(1)
		return rules.NewDefaultRules()
	})
	for _, q := range []string{`{ products(first: 2) { nodes { id title } } }`, `{ products(first: 3) { nodes { id } } }`} {
		if r := e.post(t, q, nil, nil); r.Status != 200 {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		if r := e.raw(t, "GET", "/graphql?query="+url.QueryEscape(q), nil, nil); r.Status != 200 {
			t.Fatalf("GET: %d %s", r.Status, r.Body)
		}
	}
	if n := validations.Load(); n != 0 {
		t.Errorf("gqlgen validated %d documents itself", n)
	}
}

// Over a websocket, a subscription that does not validate is refused in the
// protocol's error message with every error (at most 100, and the one saying
// validation stopped), not the one gqlgen's interface carries, and charged.
func TestWebsocketValidationErrors(t *testing.T) {
	e := newEnv(t, envOpts{streams: true})
	c := dialWS(t, serveHTTP(t, e), transportWS, apiKey)
	c.conn.SetReadLimit(4 << 20) // to measure it, whatever it is
	var b strings.Builder
	for i := range 300 {
		fmt.Fprintf(&b, "variants(first: %d) { id } ", 1+i%2)
	}
	before := e.keyAvailable(t)
	c.subscribe("1", "subscription { ticker(count: 1) { products(first: 1) { "+b.String()+"} } }")
	m := c.await("1")
	var errs []struct {
		Message    string         `json:"message"`
		Extensions map[string]any `json:"extensions"`
	}
	if m.Type != "error" || json.Unmarshal(m.Payload, &errs) != nil {
		t.Fatalf("got %s %.300s", m.Type, m.Payload)
	}
	if len(errs) != 101 || errs[0].Extensions["code"] != gqllimit.CodeValidationFailed || len(m.Payload) > 1<<20 {
		t.Errorf("%d errors, the first %v, %d bytes", len(errs), errs[0].Extensions, len(m.Payload))
	}
	if charged := before - e.keyAvailable(t); charged != 3 {
		t.Errorf("charged %d, want 3: reading 1,207 nodes", charged)
	}
}
