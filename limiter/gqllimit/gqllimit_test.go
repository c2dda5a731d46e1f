package gqllimit_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/costgate/costgate/graph"
	"github.com/costgate/costgate/internal/gqltest"
	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/gqllimit"
	"github.com/costgate/costgate/limiter/identity"
	"github.com/costgate/costgate/limiter/memstore"
)

// docs/graphql.md's worked example ("The price"), end to end: it costs 61, the bucket is charged
// 61, and what was not used (the shop has fewer variants than asked for) is
// refunded: currentlyAvailable goes back up by exactly requested − actual.
func TestChargeAndRefund(t *testing.T) {
	e := newEnv(t, envOpts{})
	before := e.available(t)
	r := e.post(t, `{ products(first: 10) { nodes { id title variants(first: 5) { id } } } }`, nil, nil)
	if r.Status != http.StatusOK || r.Res.Extensions.Cost == nil {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	c := r.Res.Extensions.Cost
	// products 1 + 10 × (1 + variants); the shop's first ten products have
	// 2,3,4,5,5,5,1,2,3,4 variants: 34. Actual = 1 + 10 + 34 = 45.
	must(t, c.RequestedQueryCost == 61, "requested %d, want 61", c.RequestedQueryCost)
	must(t, c.ActualQueryCost != nil && *c.ActualQueryCost == 45, "actual %v, want 45", c.ActualQueryCost)
	must(t, c.ThrottleStatus.MaximumAvailable == 1000 && c.ThrottleStatus.RestoreRate == 0.1, "throttleStatus %+v", c.ThrottleStatus)
	must(t, c.ThrottleStatus.CurrentlyAvailable == before-45, "currentlyAvailable %d, want %d − 45 (charged 61, refunded 16)", c.ThrottleStatus.CurrentlyAvailable, before)
	must(t, e.available(t) == before-45, "bucket %d after the query, want %d", e.available(t), before-45)
	// The headers tell the same story.
	must(t, r.Header.Get("X-RateLimit-Remaining") == fmt.Sprint(before-45), "X-RateLimit-Remaining %q", r.Header.Get("X-RateLimit-Remaining"))
	must(t, r.Header.Get("RateLimit-Policy") == `"graphql";q=1000;w=10000`, "RateLimit-Policy %q", r.Header.Get("RateLimit-Policy"))
}

// When the bucket is short: HTTP 429 with Retry-After and the rate-limit
// headers, THROTTLED in the body, data null, actualQueryCost null, and
// nothing executed or charged.
func TestThrottled(t *testing.T) {
	e := newEnv(t, envOpts{})
	q := `{ products(first: 100) { nodes { id variants(first: 8) { id } } } }` // 1 + 100 × (1 + 8) = 901
	r := e.post(t, q, nil, nil)
	if r.Status != 200 || r.Res.Extensions.Cost.RequestedQueryCost != 901 {
		t.Fatalf("first: %d %s", r.Status, r.Body)
	}
	left := r.Res.Extensions.Cost.ThrottleStatus.CurrentlyAvailable
	r = e.post(t, q, nil, nil)
	if r.Status != http.StatusTooManyRequests {
		t.Fatalf("second: status %d, want 429: %s", r.Status, r.Body)
	}
	// 901 − left tokens at 0.1/s: Retry-After is that, in whole seconds.
	wantRetry := (901 - left) * 10
	must(t, r.Header.Get("Retry-After") == fmt.Sprint(wantRetry), "Retry-After %q, want %d", r.Header.Get("Retry-After"), wantRetry)
	must(t, r.Code() == gqllimit.CodeThrottled && r.Res.Errors[0].Message == "Throttled", "errors %+v", r.Res.Errors)
	must(t, r.Res.Errors[0].Extensions["retryAfterSec"] == float64(wantRetry), "retryAfterSec %v", r.Res.Errors[0].Extensions["retryAfterSec"])
	must(t, string(r.Res.Data) == "null", "data %s, want null", r.Res.Data)
	must(t, strings.Contains(r.Body, `"actualQueryCost":null`), "body %s lacks actualQueryCost null", r.Body)
	must(t, r.Header.Get("X-RateLimit-Remaining") == fmt.Sprint(left), "X-RateLimit-Remaining %q", r.Header.Get("X-RateLimit-Remaining"))
	must(t, e.available(t) == left, "a throttled query consumed tokens")
	// After the wait it passes.
	e.clock.Advance(time.Duration(wantRetry) * time.Second)
	if r := e.post(t, q, nil, nil); r.Status != 200 {
		t.Errorf("after Retry-After: %d %s", r.Status, r.Body)
	}
}

// Rejections before execution are charged the rejection cost and execute nothing;
// the limits hold over the whole document, a fragment no operation spreads included.
func TestRejectionsChargeRejectionCost(t *testing.T) {
	e := newEnv(t, envOpts{cfg: func(c *gqllimit.Config) { c.MaxDepth = 4; c.RejectionCost = 3 }})
	tests := []struct {
		name   string
		query  string
		status int
		code   string
	}{
		{"over max_cost", `{ products(first: 100) { nodes { variants(first: 100) { id } } } }`, 400, gqllimit.CodeMaxCostExceeded},
		{"too deep", `{ products { nodes { reviews { author { name } } } } }`, 400, gqllimit.CodeMaxDepthExceeded},
		{"too deep in a fragment no operation spreads", `{ __typename } fragment F on Query { products { nodes { reviews { author { name } } } } }`, 400, gqllimit.CodeMaxDepthExceeded},
		{"parse error", `{ products( }`, 400, gqllimit.CodeParseFailed},
		{"validation", `{ products { nodes { nope } } }`, 400, gqllimit.CodeValidationFailed},
		{"batch", ``, 400, gqllimit.CodeBatchNotSupported},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := e.available(t)
			var r *gqltest.Result
			if tc.code == gqllimit.CodeBatchNotSupported {
				r = e.raw(t, "POST", "/graphql", []byte(`[{"query":"{ __typename }"},{"query":"{ __typename }"}]`), nil)
			} else {
				r = e.post(t, tc.query, nil, nil)
			}
			must(t, r.Status == tc.status && r.Code() == tc.code, "status %d code %q, want %d %q: %s", r.Status, r.Code(), tc.status, tc.code, r.Body)
			must(t, string(r.Res.Data) == "null", "data %s", r.Res.Data)
			must(t, before-e.available(t) == 3, "charged %d, want the rejection cost, 3", before-e.available(t))
		})
	}
	r := e.post(t, `{ products(first: 100) { nodes { variants(first: 100) { id } } } }`, nil, nil)
	must(t, r.Res.Errors[0].Extensions["cost"] == float64(10101) && r.Res.Errors[0].Extensions["maxCost"] == float64(1000), "MAX_COST_EXCEEDED extensions %v", r.Res.Errors[0].Extensions)
	must(t, r.Res.Extensions.Cost != nil && r.Res.Extensions.Cost.RequestedQueryCost == 10101, "extensions.cost %+v", r.Res.Extensions.Cost)
	if p := e.post(t, `{ products( }`, nil, nil); strings.Contains(p.Body, `"cost"`) {
		t.Errorf("a document that did not parse got extensions.cost: %s", p.Body)
	}
}

// A request the bucket cannot pay for is throttled and charged nothing,
// whatever else is wrong with it: a client that backs off recovers.
func TestThrottledRefusalChargesNothing(t *testing.T) {
	p := graphqlPolicy()
	p.Burst = 5
	e := newEnv(t, envOpts{policy: p, cfg: func(c *gqllimit.Config) { c.RejectionCost = 3 }})
	if r := e.post(t, `{ products( }`, nil, nil); r.Status != 400 || e.available(t) != 2 {
		t.Fatalf("the first refusal: %d, %d left, want 400 and 2 left", r.Status, e.available(t))
	}
	before := e.available(t)
	for _, q := range []string{`{ products( }`, `{ products { nodes { nope } } }`} {
		r := e.post(t, q, nil, nil)
		must(t, r.Status == 429 && r.Code() == gqllimit.CodeThrottled, "%s: %d %s, want 429 THROTTLED", q, r.Status, r.Body)
		must(t, r.Header.Get("Retry-After") != "", "%s: no Retry-After", q)
	}
	must(t, e.available(t) == before, "charged %d", before-e.available(t))
}

// 100 aliased copies of a field cost 100 times one.
func TestAliasesEachCounted(t *testing.T) {
	e := newEnv(t, envOpts{cfg: func(c *gqllimit.Config) { c.MaxAliases = 100 }})
	one := e.post(t, `{ a0: products(first: 3) { nodes { id } } }`, nil, map[string]string{gqllimit.HeaderDryRun: "1"})
	var b strings.Builder
	b.WriteString("{")
	for i := range 100 {
		fmt.Fprintf(&b, " a%d: products(first: 3) { nodes { id } }", i)
	}
	b.WriteString(" }")
	hundred := e.post(t, b.String(), nil, map[string]string{gqllimit.HeaderDryRun: "1"})
	must(t, one.Res.Extensions.Cost.RequestedQueryCost == 4, "one costs %d, want 1 + 3 = 4", one.Res.Extensions.Cost.RequestedQueryCost)
	must(t, hundred.Res.Extensions.Cost.RequestedQueryCost == 400, "100 aliases cost %d, want 400", hundred.Res.Extensions.Cost.RequestedQueryCost)
	// And with the default of 30 aliases, the document is turned away before validation.
	d := newEnv(t, envOpts{})
	if r := d.post(t, b.String(), nil, nil); r.Status != 400 || r.Code() != gqllimit.CodeMaxAliasesExceeded {
		t.Errorf("100 aliases with max_aliases 30: %d %s", r.Status, r.Code())
	}
}

// A cost the bucket can never hold is a 400, not a 429: retrying won't help.
func TestCostExceedsCapacity(t *testing.T) {
	p := graphqlPolicy()
	p.Burst = 100
	e := newEnv(t, envOpts{policy: p})
	r := e.post(t, `{ products(first: 20) { nodes { id variants(first: 5) { id } } } }`, nil, nil) // 1 + 20 × 6 = 121
	must(t, r.Status == 400 && r.Code() == gqllimit.CodeCostExceedsCapacity && r.Header.Get("Retry-After") == "", "%d %q Retry-After %q", r.Status, r.Code(), r.Header.Get("Retry-After"))
}

// Measure mode rejects nothing for cost or throttling, yet reports what
// enforcement would do.
func TestMeasureMode(t *testing.T) {
	e := newEnv(t, envOpts{cfg: func(c *gqllimit.Config) { c.Mode = limiter.Shadow; c.MaxDepth = 2 }})
	q := `{ products(first: 100) { nodes { id variants(first: 100) { id } } } }` // 10101 > max_cost, > capacity, depth 3
	r := e.post(t, q, nil, nil)
	must(t, r.Status == 200 && len(r.Res.Errors) == 0 && r.Res.Extensions.Cost.RequestedQueryCost == 10101, "measure: %d %s", r.Status, r.Body[:min(len(r.Body), 300)])
	must(t, r.Header.Get("X-RateLimit-Limit") == "", "measure mode sent rate-limit headers")
}

// Debug: Costgate-Cost-Debug: 1 adds the per-field breakdown.
func TestCostDebug(t *testing.T) {
	e := newEnv(t, envOpts{})
	r := e.post(t, `{ products(first: 10) { nodes { id variants(first: 5) { id } } } }`, nil, map[string]string{gqllimit.HeaderCostDebug: "1"})
	got := map[string]int64{}
	for _, f := range r.Res.Extensions.Cost.Fields {
		got[f.Path] = f.RequestedTotal
	}
	must(t, got["products"] == 61 && got["products.nodes"] == 60 && got["products.nodes.variants"] == 50, "breakdown %v", got)
}

// An unknown API key is answered 401 and charged to the anonymous bucket of
// the client address.
func TestUnknownAPIKey(t *testing.T) {
	e := newEnv(t, envOpts{})
	before := e.available(t)
	r := e.post(t, `{ __typename }`, nil, map[string]string{"X-API-Key": "guess"})
	must(t, r.Status == http.StatusUnauthorized && r.Code() == gqllimit.CodeUnauthenticated, "%d %s", r.Status, r.Body)
	must(t, e.available(t) == before-1, "the guess was not charged to the anonymous bucket")
}

// Redis down with on_store_error: deny: 503, RATE_LIMITER_UNAVAILABLE.
func TestFailClosed(t *testing.T) {
	p := graphqlPolicy()
	p.OnStoreError = limiter.FailDeny
	e := newEnv(t, envOpts{policy: p, client: startStoppedRedis(t)})
	r := e.post(t, `{ __typename }`, nil, nil)
	must(t, r.Status == http.StatusServiceUnavailable && r.Code() == gqllimit.CodeLimiterUnavailable && r.Header.Get("Retry-After") == "1", "%d %s", r.Status, r.Body)
}

// fanOut is a document in which each fragment spreads the next one twice,
// depth levels deep: 2^depth field selections once expanded.
func fanOut(depth int) string {
	var b strings.Builder
	b.WriteString("{ products(first: 1) { nodes { ...F0 } } }\n")
	for i := range depth {
		fmt.Fprintf(&b, "fragment F%d on Product { id reviews(first: 10) { product { ...F%d ...F%d } } }\n", i, i+1, i+1)
	}
	fmt.Fprintf(&b, "fragment F%d on Product { id }\n", depth)
	return b.String()
}

// The fan-out document is turned away before validation by its field count,
// in time linear in its size; with the field limit lifted it is priced,
// linearly too, at a saturated cost and rejected as MAX_COST_EXCEEDED.
// It is charged what reading it took: the rejection cost, 1, when refused
// before validation; 6 when validated too (fragments nested 30 deep, each
// walked again for every fragment above it: some 2,500 visits). Never its
// 2^30 fields expanded, which nothing read.
func TestFanOutDocument(t *testing.T) {
	e := newEnv(t, envOpts{cfg: func(c *gqllimit.Config) { c.MaxDepth = 1 << 20 }})
	before := e.available(t)
	r := e.post(t, fanOut(30), nil, nil)
	must(t, r.Status == 400 && r.Code() == gqllimit.CodeMaxFieldsExceeded, "fan-out: %d %s", r.Status, r.Body)

	lifted := newEnv(t, envOpts{cfg: func(c *gqllimit.Config) { c.MaxDepth = 1 << 20; c.MaxFields = 1 << 40 }})
	r = lifted.post(t, fanOut(30), nil, nil)
	must(t, r.Status == 400 && r.Code() == gqllimit.CodeMaxCostExceeded, "fan-out with max_fields lifted: %d %s", r.Status, r.Body)
	must(t, r.Res.Errors[0].Extensions["cost"] == float64(1<<53-1), "cost %v, want saturated 2^53−1", r.Res.Errors[0].Extensions["cost"])
	must(t, e.available(t) == before-1 && lifted.available(t) == before-6, "the fan-out was charged %d and, lifted, %d; want 1 and 6", before-e.available(t), before-lifted.available(t))
}

// A cost limit that would charge nothing is refused when it is built.
func TestNewRefusesSetupsThatLimitNothing(t *testing.T) {
	lim, err := limiter.New(memstore.New(nil))
	if err != nil {
		t.Fatal(err)
	}
	ids, err := identity.New(identity.Config{HashKey: []byte("refusal-test-hash-key")})
	if err != nil {
		t.Fatal(err)
	}
	window := &limiter.Policy{Name: "gql", Algorithm: limiter.FixedWindow, Limit: 10, Period: time.Second, Key: []string{"ip"}}
	noKey := &limiter.Policy{Name: "gql", Algorithm: limiter.TokenBucket, Limit: 10, Period: time.Second}
	tests := []struct {
		name  string
		cfg   gqllimit.Config
		field string
	}{
		{"no policy", gqllimit.Config{Limiter: lim, Identity: ids}, "Policy"},
		{"no identity", gqllimit.Config{Limiter: lim, Policy: graphqlPolicy()}, "Identity"},
		{"no limiter", gqllimit.Config{Identity: ids, Policy: graphqlPolicy()}, "Limiter"},
		{"not a token bucket", gqllimit.Config{Limiter: lim, Identity: ids, Policy: window}, "algorithm"},
		{"policy without a key", gqllimit.Config{Limiter: lim, Identity: ids, Policy: noKey}, "key"},
		{"negative limit", gqllimit.Config{Limiter: lim, Identity: ids, Policy: graphqlPolicy(), Limits: gqllimit.Limits{MaxDepth: -1}}, "MaxDepth"},
		{"unknown mode", gqllimit.Config{Limiter: lim, Identity: ids, Policy: graphqlPolicy(), Limits: gqllimit.Limits{Mode: "audit"}}, "Mode"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := gqllimit.New(tc.cfg)
			var fe *limiter.FieldError
			var pe *limiter.PolicyError
			if !(errors.As(err, &fe) && fe.Field == tc.field) && !(errors.As(err, &pe) && pe.Field == tc.field) {
				t.Errorf("New error = %v, want one on %s", err, tc.field)
			}
		})
	}
}

// Middleware around a gqlgen server that does not run the extension would
// serve unpriced, uncharged GraphQL: it answers 500 instead, until the
// extension is installed.
func TestMiddlewareWithoutExtensionRefusesToServe(t *testing.T) {
	e := newEnv(t, envOpts{})
	gl, err := gqllimit.New(e.gl.Config())
	if err != nil {
		t.Fatal(err)
	}
	srv := handler.New(graph.NewExecutableSchema(graph.Config{Resolvers: &graph.Resolver{Shop: graph.NewShop()}}))
	srv.AddTransport(transport.POST{})
	c := gqltest.Client{Handler: gl.Middleware(srv)} // srv.Use(gl.Extension()) forgotten
	if r := c.Post(t, `{ products(first: 3) { nodes { id } } }`, nil, nil); r.Status != http.StatusInternalServerError || len(r.Res.Data) > 0 && string(r.Res.Data) != "null" {
		t.Fatalf("without the extension: %d %s; want 500 and nothing executed", r.Status, r.Body)
	}
	srv.Use(gl.Extension())
	if r := c.Post(t, `{ products(first: 3) { nodes { id } } }`, nil, nil); r.Status != http.StatusOK || r.Cost(t).RequestedQueryCost != 4 {
		t.Fatalf("with the extension: %d %s", r.Status, r.Body)
	}
}
