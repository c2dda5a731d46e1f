package gqllimit_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"

	"github.com/costgate/costgate/complexity"
	"github.com/costgate/costgate/graph"
	"github.com/costgate/costgate/internal/gqltest"
	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/gqllimit"
	"github.com/costgate/costgate/limiter/identity"
)

// price is what the pricing says query costs, worked out apart from the
// middleware (and its caches): complexity over the example API's schema.
func price(t *testing.T, query string, vars map[string]any) int64 {
	t.Helper()
	s, err := complexity.NewSchema(graph.NewExecutableSchema(graph.Config{Resolvers: &graph.Resolver{}}).Schema())
	if err != nil {
		t.Fatal(err)
	}
	doc, err := parser.ParseQuery(&ast.Source{Input: query})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Analyze(doc, "", vars)
	if err != nil {
		t.Fatal(err)
	}
	return max(res.Cost, 1)
}

func sha(query string) string {
	sum := sha256.Sum256([]byte(query))
	return hex.EncodeToString(sum[:])
}

// persistedBody is a POST body of Apollo's persisted-query protocol; an
// empty query sends the hash alone.
func persistedBody(query, hash string) []byte {
	body := map[string]any{"extensions": map[string]any{"persistedQuery": map[string]any{"version": 1, "sha256Hash": hash}}}
	if query != "" {
		body["query"] = query
	}
	b, _ := json.Marshal(body)
	return b
}

// What a rejection's extensions.cost holds.
type costWant int

const (
	noCost     costWant = iota // the document did not parse (or there was none)
	bucketOnly                 // throttleStatus, no requestedQueryCost: not priced
	priced                     // both
)

// Every rejection of a document that parsed carries extensions.cost, with the
// caller's bucket after the rejection was charged (the rejection cost, 1;
// nothing when throttled or refused before anything is charged) and the
// price when the operation was priced; each is counted once by code. Measure
// mode lets the cost, depth, aliases, fields and throttling rejections
// through, counted as would-be rejections, and rejects the others as
// enforcement does, charging them as its shadow charges do.
func TestRejectionsCarryCostAndAreCounted(t *testing.T) {
	deep := `{ products { nodes { reviews { author { name } } } } }`
	tests := []struct {
		name    string
		cfg     func(*gqllimit.Config)
		policy  func(*limiter.Policy)
		before  string // sent once first (to drain the bucket)
		query   string
		vars    map[string]any
		header  map[string]string
		raw     []byte // sent as the body instead of query
		status  int
		code    string
		cost    costWant
		measure bool  // Measure mode lets it run
		charges int64 // what the rejection is charged: 1, the rejection cost, but where noted
	}{
		{name: "depth", cfg: func(c *gqllimit.Config) { c.MaxDepth = 4 }, query: deep,
			status: 400, code: gqllimit.CodeMaxDepthExceeded, cost: priced, measure: true, charges: 1},
		{name: "aliases", cfg: func(c *gqllimit.Config) { c.MaxAliases = 2 },
			query:  `{ a: products(first: 1) { nodes { id } } b: products(first: 2) { nodes { id } } c: products(first: 3) { nodes { id } } }`,
			status: 400, code: gqllimit.CodeMaxAliasesExceeded, cost: priced, measure: true, charges: 1},
		{name: "fields", cfg: func(c *gqllimit.Config) { c.MaxFields = 5 }, query: `{ products(first: 2) { nodes { id title priceCents description } } }`,
			status: 400, code: gqllimit.CodeMaxFieldsExceeded, cost: priced, measure: true, charges: 1},
		{name: "slicing argument", query: `{ products(first: null) { nodes { id } } }`,
			status: 400, code: gqllimit.CodeSlicingArgumentRequired, cost: bucketOnly, charges: 1},
		{name: "max cost", query: `{ products(first: 100) { nodes { variants(first: 100) { id } } } }`,
			status: 400, code: gqllimit.CodeMaxCostExceeded, cost: priced, measure: true, charges: 1},
		{name: "capacity", policy: func(p *limiter.Policy) { p.Burst = 100 }, query: `{ products(first: 20) { nodes { id variants(first: 5) { id } } } }`,
			status: 400, code: gqllimit.CodeCostExceedsCapacity, cost: priced, measure: true, charges: 1},
		{name: "throttled", policy: func(p *limiter.Policy) { p.Burst = 100 }, cfg: func(c *gqllimit.Config) { c.NoRefund = true },
			before: `{ products(first: 10) { nodes { id title variants(first: 5) { id } } } }`,
			query:  `{ products(first: 10) { nodes { id title variants(first: 5) { id } } } }`,
			status: 429, code: gqllimit.CodeThrottled, cost: priced, measure: true},
		{name: "validation", query: `{ products(first: 1) { nodes { nope } } }`,
			status: 400, code: gqllimit.CodeValidationFailed, cost: bucketOnly, charges: 1},
		{name: "variables", query: `query($n: Int) { products(first: $n) { nodes { id } } }`, vars: map[string]any{"n": "ten"},
			status: 400, code: gqllimit.CodeValidationFailed, cost: bucketOnly, charges: 1},
		{name: "fragment cycle", query: `{ products(first: 1) { nodes { ...A } } } fragment A on Product { ...B } fragment B on Product { ...A }`,
			status: 400, code: gqllimit.CodeValidationFailed, cost: bucketOnly, charges: 1},
		{name: "fragments nested deeper than max_depth", cfg: func(c *gqllimit.Config) { c.MaxDepth = 3 },
			query:  `{ products(first: 1) { nodes { ...A } } } fragment A on Product { ...B } fragment B on Product { ...C } fragment C on Product { ...D } fragment D on Product { id }`,
			status: 400, code: gqllimit.CodeValidationFailed, cost: bucketOnly, charges: 1},
		{name: "introspection", cfg: func(c *gqllimit.Config) { c.NoIntrospection = true }, query: `{ __schema { queryType { name } } }`,
			status: 400, code: gqllimit.CodeIntrospectionDisabled, cost: priced, charges: 1},
		{name: "unknown API key", query: `{ __typename }`, header: map[string]string{"X-API-Key": "guess"},
			status: 401, code: gqllimit.CodeUnauthenticated, cost: bucketOnly, charges: 1},
		{name: "persisted query with a wrong hash", cfg: withAPQ, raw: persistedBody(`{ __typename }`, sha(`{ products { nodes { id } } }`)),
			status: 400, code: gqllimit.CodePersistedQueryHashMismatch, cost: noCost},
		{name: "unknown persisted query", cfg: withAPQ, raw: persistedBody("", sha(`{ __typename }`)),
			status: 200, code: gqllimit.CodePersistedQueryNotFound, cost: noCost},
		{name: "persisted queries off", raw: persistedBody("", sha(`{ __typename }`)),
			status: 400, code: gqllimit.CodePersistedQueryNotSupported, cost: noCost},
		{name: "parse error", query: `{ products( }`, status: 400, code: gqllimit.CodeParseFailed, cost: noCost, charges: 1},
		{name: "tokens", cfg: func(c *gqllimit.Config) { c.MaxTokens = 10 }, query: deep,
			status: 400, code: gqllimit.CodeMaxTokensExceeded, cost: noCost, charges: 1},
		{name: "body", cfg: func(c *gqllimit.Config) { c.MaxBodyBytes = 64 }, raw: []byte(`{"query":"` + strings.Repeat(" ", 100) + `{ __typename }"}`),
			status: 413, code: gqllimit.CodeBodyTooLarge, cost: noCost, charges: 1},
		{name: "batch", raw: []byte(`[{"query":"{ __typename }"},{"query":"{ __typename }"}]`),
			status: 400, code: gqllimit.CodeBatchNotSupported, cost: noCost, charges: 1},
		{name: "no query", raw: []byte(`{"query":""}`), status: 400, code: gqllimit.CodeBadRequest, cost: noCost},
	}
	for _, mode := range []limiter.Mode{limiter.Enforce, limiter.Shadow} {
		for _, tc := range tests {
			t.Run(string(mode)+"/"+tc.name, func(t *testing.T) {
				// 50 a day: the store's clock is frozen, but Redis expires a
				// bucket on its own clock once its deficit would have refilled,
				// 20ms a token at 50 a second, before a busy machine reads it back.
				p := graphqlPolicy()
				p.Period = 24 * time.Hour
				if tc.policy != nil {
					tc.policy(p)
				}
				e := newEnv(t, envOpts{policy: p, cfg: func(c *gqllimit.Config) {
					c.Mode = mode
					if tc.cfg != nil {
						tc.cfg(c)
					}
				}})
				if tc.before != "" {
					if r := e.post(t, tc.before, nil, nil); r.Status != 200 {
						t.Fatalf("before: %d %s", r.Status, r.Body)
					}
				}
				available := e.available(t)
				counted := e.rejections.snapshot()
				var r *gqltest.Result
				if tc.raw != nil {
					r = e.raw(t, "POST", "/graphql", tc.raw, tc.header)
				} else {
					r = e.post(t, tc.query, tc.vars, tc.header)
				}
				newly := e.rejections.snapshot()
				for code, n := range counted {
					newly[code] -= n
				}
				maps.DeleteFunc(newly, func(_ string, n int) bool { return n == 0 })
				if want := map[string]int{tc.code: 1}; !maps.Equal(newly, want) {
					t.Errorf("counted %v, want %v", newly, want)
				}

				if mode == limiter.Shadow && tc.measure {
					if r.Status != 200 || len(r.Res.Errors) > 0 || string(r.Res.Data) == "null" {
						t.Fatalf("measure mode: %d %s, want the operation run", r.Status, r.Body)
					}
					return
				}
				if r.Status != tc.status || r.Code() != tc.code {
					t.Fatalf("status %d code %q, want %d %q: %s", r.Status, r.Code(), tc.status, tc.code, r.Body)
				}
				if string(r.Res.Data) != "null" {
					t.Errorf("data %s, want null", r.Res.Data)
				}
				after := e.available(t)
				if got, want := after, available-tc.charges; got != want {
					t.Errorf("bucket %d after the rejection, want %d", got, want)
				}
				c := r.Res.Extensions.Cost
				if tc.cost == noCost {
					if c != nil {
						t.Errorf("extensions.cost %+v for a document that did not parse", c)
					}
					return
				}
				if c == nil || c.ThrottleStatus == nil {
					t.Fatalf("no extensions.cost.throttleStatus: %s", r.Body)
				}
				if c.ActualQueryCost != nil {
					t.Errorf("actualQueryCost %d, want null: nothing ran", *c.ActualQueryCost)
				}
				if got := c.ThrottleStatus.CurrentlyAvailable; got != after {
					t.Errorf("currentlyAvailable %d, want the bucket's %d", got, after)
				}
				if got, want := c.ThrottleStatus.MaximumAvailable, p.Capacity(); got != want {
					t.Errorf("maximumAvailable %d, want %d", got, want)
				}
				var want int64
				if tc.cost == priced {
					want = price(t, tc.query, tc.vars)
				}
				if c.RequestedQueryCost != want {
					t.Errorf("requestedQueryCost %d, want %d (0: left out)", c.RequestedQueryCost, want)
				}
				if tc.cost == bucketOnly && strings.Contains(r.Body, "requestedQueryCost") {
					t.Errorf("requestedQueryCost in %s, want it left out", r.Body)
				}
			})
		}
	}
}

func withAPQ(c *gqllimit.Config) { c.PersistedQueries = gqllimit.NewPersistedQueryCache(10, 0) }

// A store that fails closed: 503, priced, no throttleStatus (the bucket
// could not be read), counted.
func TestFailClosedCarriesCost(t *testing.T) {
	srv := startStoppedRedis(t)
	p := graphqlPolicy()
	p.OnStoreError = limiter.FailDeny
	e := newEnv(t, envOpts{policy: p, client: srv})
	q := `{ products(first: 3) { nodes { id } } }`
	r := e.post(t, q, nil, nil)
	if r.Status != http.StatusServiceUnavailable || r.Code() != gqllimit.CodeLimiterUnavailable {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	c := r.Cost(t)
	if c.RequestedQueryCost != price(t, q, nil) || c.ThrottleStatus != nil {
		t.Errorf("extensions.cost %+v, want the price and no throttleStatus", c)
	}
	if got := e.rejections.get(gqllimit.CodeLimiterUnavailable); got != 1 {
		t.Errorf("counted %d, want 1", got)
	}
}

// The headers of a rejection that charged nothing read the bucket too.
func TestRejectionHeaders(t *testing.T) {
	e := newEnv(t, envOpts{cfg: func(c *gqllimit.Config) { c.MaxDepth = 2 }})
	r := e.post(t, `{ products { nodes { reviews { id } } } }`, nil, nil)
	if r.Status != 400 || r.Code() != gqllimit.CodeMaxDepthExceeded {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	if got, want := r.Header.Get("X-RateLimit-Remaining"), fmt.Sprint(e.available(t)); got != want {
		t.Errorf("X-RateLimit-Remaining %q, want %q", got, want)
	}
	if r.Header.Get("Retry-After") != "" {
		t.Errorf("Retry-After %q on a 400", r.Header.Get("Retry-After"))
	}
}

// gqlgen's own validation errors answer 400, as the proxy's do, rather than
// gqlgen's 422.
func TestValidationStatus(t *testing.T) {
	e := newEnv(t, envOpts{})
	body, _ := json.Marshal(map[string]any{"query": `{ nope }`})
	r := e.raw(t, "POST", "/graphql", bytes.Clone(body), nil)
	if r.Status != 400 || r.Code() != gqllimit.CodeValidationFailed {
		t.Errorf("%d %s", r.Status, r.Body)
	}
}

type failingLookup struct{}

func (failingLookup) LookupAPIKey(context.Context, string) (identity.APIKey, bool, error) {
	return identity.APIKey{}, false, errors.New("the key database is down")
}

// When the API key cannot be checked, nobody's bucket can be read: the 503
// carries the price alone, and is counted.
func TestIdentityUnavailableCarriesCost(t *testing.T) {
	ids, err := identity.New(identity.Config{APIKeys: failingLookup{}, HashKey: []byte("gqllimit-test-hash-key")})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOpts{cfg: func(c *gqllimit.Config) { c.Identity = ids }})
	q := `{ products(first: 3) { nodes { id } } }`
	r := e.post(t, q, nil, map[string]string{"X-API-Key": "some-key"})
	if r.Status != http.StatusServiceUnavailable || r.Code() != gqllimit.CodeIdentityUnavailable {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	if c := r.Cost(t); c.RequestedQueryCost != price(t, q, nil) || c.ThrottleStatus != nil {
		t.Errorf("extensions.cost %+v, want the price and no bucket", c)
	}
	if got := e.rejections.get(gqllimit.CodeIdentityUnavailable); got != 1 {
		t.Errorf("counted %d, want 1", got)
	}
}

// A mutation over GET is refused before it is priced or charged (gqlgen
// refuses it only after the charge, and nothing would refund it).
func TestMutationOverGET(t *testing.T) {
	e := newEnv(t, envOpts{})
	before := e.available(t)
	q := `mutation { createReview(input: {productId: "p1", rating: 5, body: "x"}) { id } }`
	r := e.raw(t, "GET", "/graphql?query="+url.QueryEscape(q), nil, nil)
	if r.Status != http.StatusMethodNotAllowed || r.Code() != gqllimit.CodeBadRequest {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	if c := r.Cost(t); c.ThrottleStatus == nil || c.ThrottleStatus.CurrentlyAvailable != before {
		t.Errorf("extensions.cost %+v, want the bucket untouched (%d)", c, before)
	}
	if e.available(t) != before || e.resolved.get("createReview") != 0 || e.rejections.get(gqllimit.CodeBadRequest) != 1 {
		t.Errorf("charged %d, resolved %d times, counted %d", before-e.available(t), e.resolved.get("createReview"), e.rejections.get(gqllimit.CodeBadRequest))
	}
}

// A body read in one pass keeps the answers of the decoder it replaced:
// members of the wrong type, and a body that is not an object, are 400
// BAD_REQUEST with nothing run or charged; null is an empty request.
func TestBodyOfTheWrongShape(t *testing.T) {
	e := newEnv(t, envOpts{})
	before := e.available(t)
	for _, body := range []string{
		`null`, ` null `, `"{ __typename }"`, `1`, `true`, `{"query":1}`, `{"query":["{ __typename }"]}`,
		`{"query":"{ __typename }","operationName":1}`, `{"query":"{ __typename }","variables":[1]}`,
		`{"query":"{ __typename }","variables":"x"}`, `{"query":"{ __typename }","extensions":1}`, `{}`, `{"query":null}`,
	} {
		r := e.raw(t, "POST", "/graphql", []byte(body), nil)
		if r.Status != http.StatusBadRequest || r.Code() != gqllimit.CodeBadRequest {
			t.Errorf("%s: %d %s, want 400 %s", body, r.Status, r.Body, gqllimit.CodeBadRequest)
		}
	}
	if e.available(t) != before || e.resolved.get("__typename") != 0 {
		t.Errorf("charged %d", before-e.available(t))
	}
	// Escapes in the query text are decoded as encoding/json decodes them.
	r := e.raw(t, "POST", "/graphql", []byte(`{"query":"{ \u005f_typename\n}","operationName":null,"variables":null}`), nil)
	if r.Status != http.StatusOK || string(r.Res.Data) != `{"__typename":"Query"}` {
		t.Errorf("escaped query: %d %s", r.Status, r.Body)
	}
}
