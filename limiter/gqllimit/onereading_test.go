package gqllimit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"

	"github.com/costgate/costgate/complexity"
	"github.com/costgate/costgate/graph"
	"github.com/costgate/costgate/internal/gqltest"
	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/gqllimit"
)

// Queries of the differential test: cheap, dear, a mutation, and a
// document of two named operations that cost differently.
const (
	cheapQuery = `{ __typename }`
	dearQuery  = `{ products(first: 20) { nodes { id variants(first: 20) { sku } } } }`
	mutation   = `mutation { createReview(input: {productId: "p1", rating: 5, body: "ok"}) { id } }`
	twoOps     = `query A { __typename } query B { products(first: 30) { nodes { id } } }`
	varQuery   = `query($n: Int) { products(first: $n) { nodes { id } } }`
)

// executed is what gqlgen ran, seen from an operation interceptor.
type executed struct {
	mu  sync.Mutex
	ops []ranOp
}

type ranOp struct {
	query, operationName string
	variables            map[string]any
}

func (x *executed) take() []ranOp {
	x.mu.Lock()
	defer x.mu.Unlock()
	ops := x.ops
	x.ops = nil
	return ops
}

// newRecordingEnv serves the example API behind costgate with APQ on, a
// bucket that does not run dry and refills a token every 3.6 s (its key lives
// as long as the real time to refill what was taken, so it must be slow), and a record of every operation gqlgen ran.
func newRecordingEnv(t testing.TB) (*env, *executed, gqllimit.Config) {
	t.Helper()
	ran := &executed{}
	var cfg gqllimit.Config
	e := newEnv(t, envOpts{
		policy: &limiter.Policy{Name: "graphql", Algorithm: limiter.TokenBucket, Limit: 1000, Period: time.Hour,
			Burst: 1_000_000, Key: []string{"tenant", "api_key"}, OnStoreError: limiter.FailDeny},
		cfg: func(c *gqllimit.Config) {
			c.PersistedQueries = gqllimit.NewPersistedQueryCache(100, 0)
			cfg = *c
		},
		server: func(srv *handler.Server) {
			srv.AroundOperations(func(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
				rc := graphql.GetOperationContext(ctx)
				ran.mu.Lock()
				ran.ops = append(ran.ops, ranOp{rc.RawQuery, rc.OperationName, rc.Variables})
				ran.mu.Unlock()
				return next(ctx)
			})
		},
	})
	return e, ran, cfg
}

// register sends q with its hash, so that the hash alone may name it.
func register(t *testing.T, e *env, q string) {
	t.Helper()
	if r := e.raw(t, "POST", "/graphql", persistedBody(q, sha(q)), nil); r.Status != 200 || len(r.Res.Errors) > 0 {
		t.Fatalf("registering %q: %d %s", q, r.Status, r.Body)
	}
}

// The attacks of a persisted query read two ways: each names the dear
// query by its exact keys and the cheap one by a case variant or a
// duplicate. Each is refused 400 BAD_REQUEST before anything runs or is
// charged; before, gqlgen ran the dear one at the cheap one's price.
func TestPersistedQueryReadOneWay(t *testing.T) {
	e, ran, _ := newRecordingEnv(t)
	register(t, e, cheapQuery)
	register(t, e, dearQuery)
	register(t, e, mutation)
	ran.take()
	hc, hd, hm := sha(cheapQuery), sha(dearQuery), sha(mutation)
	pq := func(inner string) string { return `{"persistedQuery":` + inner + `}` }
	attacks := map[string]string{
		"sha256Hash twice, another case":   `{"extensions":` + pq(`{"version":1,"sha256Hash":"`+hd+`","SHA256HASH":"`+hc+`"}`) + `}`,
		"sha256Hash twice":                 `{"extensions":` + pq(`{"version":1,"sha256Hash":"`+hd+`","sha256Hash":"`+hc+`"}`) + `}`,
		"sha256Hash escaped":               `{"extensions":` + pq(`{"version":1,"sha256Hash":"`+hd+`","\u0073ha256Hash":"`+hc+`"}`) + `}`,
		"sha256Hash with a long s":         `{"extensions":` + pq(`{"version":1,"sha256Hash":"`+hd+`","\u017fha256Hash":"`+hc+`"}`) + `}`,
		"persistedQuery in another case":   `{"extensions":{"persistedQuery":{"version":1,"sha256Hash":"` + hd + `"},"PersistedQuery":{"version":1,"sha256Hash":"` + hc + `"}}}`,
		"persistedQuery twice":             `{"extensions":{"persistedQuery":{"version":1,"sha256Hash":"` + hd + `"},"persistedQuery":{"version":1,"sha256Hash":"` + hc + `"}}}`,
		"extensions twice":                 `{"extensions":` + pq(`{"version":1,"sha256Hash":"`+hd+`"}`) + `,"extensions":` + pq(`{"version":1,"sha256Hash":"`+hc+`"}`) + `}`,
		"extensions in another case":       `{"extensions":` + pq(`{"version":1,"sha256Hash":"`+hd+`"}`) + `,"Extensions":` + pq(`{"version":1,"sha256Hash":"`+hc+`"}`) + `}`,
		"query twice":                      `{"query":` + quote(dearQuery) + `,"query":` + quote(cheapQuery) + `}`,
		"query in another case":            `{"query":` + quote(dearQuery) + `,"QUERY":` + quote(cheapQuery) + `}`,
		"operationName in another case":    `{"query":` + quote(twoOps) + `,"operationName":"B","operationname":"A"}`,
		"mutation: sha256Hash, other case": `{"extensions":` + pq(`{"version":1,"sha256Hash":"`+hm+`","SHA256HASH":"`+hc+`"}`) + `}`,
		"version twice":                    `{"extensions":` + pq(`{"version":1,"sha256Hash":"`+hd+`","version":2}`) + `}`,
		"a second object after the first":  `{"query":` + quote(dearQuery) + `} {"query":` + quote(cheapQuery) + `}`,
	}
	for name, body := range attacks {
		t.Run(name, func(t *testing.T) {
			before := e.available(t)
			r := e.raw(t, "POST", "/graphql", []byte(body), nil)
			if r.Status != 400 || r.Code() != gqllimit.CodeBadRequest {
				t.Errorf("got %d %s, want 400 %s", r.Status, r.Body, gqllimit.CodeBadRequest)
			}
			if ops := ran.take(); len(ops) > 0 {
				t.Errorf("gqlgen ran %q", ops[0].query)
			}
			if after := e.available(t); after != before {
				t.Errorf("charged %d", before-after)
			}
		})
	}
	t.Run("GET", func(t *testing.T) {
		ext := pq(`{"version":1,"sha256Hash":"` + hd + `","SHA256HASH":"` + hc + `"}`)
		r := e.raw(t, "GET", "/graphql?extensions="+url.QueryEscape(ext), nil, nil)
		if r.Status != 400 || r.Code() != gqllimit.CodeBadRequest {
			t.Errorf("got %d %s", r.Status, r.Body)
		}
		r = e.raw(t, "GET", "/graphql?query="+url.QueryEscape(dearQuery)+"&query="+url.QueryEscape(cheapQuery), nil, nil)
		if r.Status != 400 || r.Code() != gqllimit.CodeBadRequest {
			t.Errorf("query twice: got %d %s", r.Status, r.Body)
		}
		if ops := ran.take(); len(ops) > 0 {
			t.Errorf("gqlgen ran %q", ops[0].query)
		}
	})
	// The same hash alone, unambiguous, runs the dear query at its price.
	r := e.raw(t, "POST", "/graphql", persistedBody("", hd), nil)
	if got, want := r.Cost(t).RequestedQueryCost, price(t, dearQuery, nil); got != want {
		t.Errorf("the dear query by its hash costs %d, want %d", got, want)
	}
}

// A persisted query is registered only once its operation was charged: one
// refused by validation or by a limit leaves no entry, so its hash alone is
// not found.
func TestPersistedQueryRegisteredOnlyWhenCharged(t *testing.T) {
	e, ran, _ := newRecordingEnv(t)
	refused := map[string]string{
		"validation": `{ products(first: 1) { nodes { nosuchfield } } }`,
		"max cost":   `{ products(first: 100) { nodes { id variants(first: 100) { sku } } } }`,
		"dry run":    `{ products(first: 2) { nodes { id } } }`,
	}
	for name, q := range refused {
		var header map[string]string
		if name == "dry run" {
			header = map[string]string{gqllimit.HeaderDryRun: "1"}
		}
		if r := e.raw(t, "POST", "/graphql", persistedBody(q, sha(q)), header); name != "dry run" && r.Status != 400 {
			t.Fatalf("%s: %d %s", name, r.Status, r.Body)
		}
		if r := e.raw(t, "POST", "/graphql", persistedBody("", sha(q)), nil); r.Code() != gqllimit.CodePersistedQueryNotFound {
			t.Errorf("%s: by its hash: %d %s, want %s", name, r.Status, r.Body, gqllimit.CodePersistedQueryNotFound)
		}
	}
	if ops := ran.take(); len(ops) > 0 {
		t.Errorf("gqlgen ran %q", ops[0].query)
	}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// body builds a GraphQL request body from a stream of choices: members in
// any order, in exact, other-case, escaped and duplicated spellings, with
// persisted-query extensions naming registered, unknown and mismatched
// hashes, a BOM, trailing data, and null values.
type bodyGen struct{ next func(n int) int }

func (g bodyGen) pick(options ...string) string { return options[g.next(len(options))] }

func (g bodyGen) name(exact string) string {
	switch g.next(24) {
	case 0:
		return strings.ToUpper(exact)
	case 1:
		return strings.ToUpper(exact[:1]) + exact[1:]
	case 2:
		return `\u00` + fmt.Sprintf("%02x", exact[0]) + exact[1:] // the same name, escaped
	case 3:
		if strings.ContainsRune(exact, 's') {
			return strings.Replace(exact, "s", `\u017f`, 1) // ſ folds to s
		}
	}
	return exact
}

// members gives name k times with values from value: the first spelled
// mostly exactly, a second one in any spelling (the ambiguous case).
func (g bodyGen) members(k int, name string, value func() string) []string {
	var ms []string
	for i := range k {
		n := g.name(name)
		if i > 0 {
			n = g.pick(name, strings.ToUpper(name), strings.ToUpper(name[:1])+name[1:], `\u00`+fmt.Sprintf("%02x", name[0])+name[1:])
		}
		ms = append(ms, `"`+n+`":`+value())
	}
	return ms
}

func (g bodyGen) object(members func() []string) string {
	ms := members()
	if g.next(8) == 0 && len(ms) > 0 { // a member twice
		ms = append(ms, ms[g.next(len(ms))])
	}
	for i := len(ms) - 1; i > 0; i-- { // any order
		j := g.next(i + 1)
		ms[i], ms[j] = ms[j], ms[i]
	}
	return "{" + strings.Join(ms, ",") + "}"
}

func (g bodyGen) persistedQuery(hashes []string) string {
	return g.object(func() []string {
		var ms []string
		ms = append(ms, g.members(g.count(), "sha256Hash", func() string { return quote(g.pick(hashes...)) })...)
		ms = append(ms, g.members(g.count(), "version", func() string { return g.pick("1", "1", "1", "1", "2", `"1"`) })...)
		return ms
	})
}

// count is how many times a member is given: mostly once, else none or twice.
func (g bodyGen) count() int { return []int{1, 1, 1, 1, 1, 1, 0, 2}[g.next(8)] }

func (g bodyGen) extensions(hashes []string) string {
	return g.object(func() []string {
		var ms []string
		ms = append(ms, g.members(g.count(), "persistedQuery", func() string { return g.pick(g.persistedQuery(hashes), g.persistedQuery(hashes), "null", "{}") })...)
		if g.next(6) == 0 {
			ms = append(ms, `"other":{"persistedQuery":1}`)
		}
		return ms
	})
}

func (g bodyGen) body(queries, hashes []string) string {
	b := g.object(func() []string {
		var ms []string
		// Half the time a hash alone, mostly.
		ms = append(ms, g.members(g.count()-g.next(2), "query", func() string { return g.pick(append(quoted(queries), "null", `""`)...) })...)
		ms = append(ms, g.members(g.count()-1, "operationName", func() string { return g.pick(`"A"`, `"B"`, "null") })...)
		ms = append(ms, g.members(g.count()-1, "variables", func() string { return g.pick(`{"n":3}`, `{"n":40}`, `{"n":3,"n":40}`, "null", "{}") })...)
		ms = append(ms, g.members(g.count(), "extensions", func() string { return g.extensions(hashes) })...)
		return ms
	})
	switch g.next(24) {
	case 0:
		b = "\ufeff" + b
	case 1:
		b += ` {"query":"{ __typename }"}`
	case 2:
		b = " \n" + b + "\n "
	}
	return b
}

func quoted(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = quote(s)
	}
	return out
}

// The differential test: for generated request bodies, POST and GET, the
// price costgate answers and charges is the price of the document gqlgen
// executed (worked out apart, from what gqlgen ran), or nothing ran and the
// refusal was charged its rejection cost, or nothing.
func TestOneReadingDifferential(t *testing.T) {
	e, ran, _ := newRecordingEnv(t)
	queries := []string{cheapQuery, dearQuery, mutation, twoOps, varQuery}
	for _, q := range queries[:3] {
		register(t, e, q)
	}
	ran.take()
	hashes := []string{sha(cheapQuery), sha(dearQuery), sha(mutation), sha(cheapQuery), sha(dearQuery), sha(twoOps), sha("unknown")}
	rng := rand.New(rand.NewPCG(1, 2))
	n := 3000
	if testing.Short() {
		n = 300
	}
	for i := range n {
		g := bodyGen{next: func(k int) int { return rng.IntN(k) }}
		checkOneReading(t, e, ran, g, queries, hashes, fmt.Sprint(i))
	}
}

// FuzzOneReading is the differential test driven by the fuzzer's bytes.
func FuzzOneReading(f *testing.F) {
	for _, seed := range []string{"", "\x00\x01\x02", "\x05\x03\x01\x00\x07\x02\x02\x01", strings.Repeat("\x01\x02\x03", 20)} {
		f.Add([]byte(seed))
	}
	e, ran, _ := newRecordingEnv(f)
	for _, q := range []string{cheapQuery, dearQuery, mutation} {
		if r := e.Raw(f, "POST", "/graphql", persistedBody(q, sha(q)), nil); r.Status != 200 {
			f.Fatalf("registering %q: %d %s", q, r.Status, r.Body)
		}
	}
	ran.take()
	queries := []string{cheapQuery, dearQuery, mutation, twoOps, varQuery}
	hashes := []string{sha(cheapQuery), sha(dearQuery), sha(mutation), sha(twoOps), sha("unknown")}
	f.Fuzz(func(t *testing.T, choices []byte) {
		i := 0
		g := bodyGen{next: func(k int) int {
			if i >= len(choices) {
				return 0
			}
			i++
			return int(choices[i-1]) % k
		}}
		checkOneReading(t, e, ran, g, queries, hashes, "fuzz")
	})
}

func checkOneReading(t *testing.T, e *env, ran *executed, g bodyGen, queries, hashes []string, name string) {
	t.Helper()
	body := g.body(queries, hashes)
	before := e.available(t)
	var r *gqltest.Result
	if g.next(3) == 0 {
		body = getTarget(g, queries, hashes)
		r = e.raw(t, "GET", body, nil, nil)
	} else {
		r = e.raw(t, "POST", "/graphql", []byte(body), nil)
	}
	ops := ran.take()
	charged := before - e.available(t)
	switch {
	case len(ops) > 1:
		t.Fatalf("%s: %s: gqlgen ran %d operations", name, body, len(ops))
	case len(ops) == 0:
		if want := refusalCharge(r); charged != want {
			t.Errorf("%s: %s: nothing ran, %d charged, want %d (%d %s)", name, body, charged, want, r.Status, r.Body)
		}
	default:
		op := ops[0]
		want := priceOp(t, op)
		got := r.Res.Extensions.Cost
		if got == nil || got.RequestedQueryCost != want {
			t.Fatalf("%s: %s: gqlgen ran %q (operation %q) costing %d; costgate answered %d %s", name, body, op.query, op.operationName, want, r.Status, r.Body)
		}
		if got.ActualQueryCost != nil && charged != max(*got.ActualQueryCost, 1) {
			t.Errorf("%s: %s: charged %d after the refund, actual cost %d", name, body, charged, *got.ActualQueryCost)
		}
	}
}

// refusalCharge is what a refusal is charged: the rejection cost (1) for a
// document that did not parse, validate or pass a limit; nothing for a
// request refused before anything is charged (ambiguous, a persisted query
// not found) or throttled.
func refusalCharge(r *gqltest.Result) int64 {
	switch r.Code() {
	case gqllimit.CodeParseFailed, gqllimit.CodeValidationFailed, gqllimit.CodeMaxTokensExceeded,
		gqllimit.CodeMaxDepthExceeded, gqllimit.CodeMaxAliasesExceeded, gqllimit.CodeMaxFieldsExceeded,
		gqllimit.CodeMaxCostExceeded, gqllimit.CodeCostExceedsCapacity, gqllimit.CodeSlicingArgumentRequired,
		gqllimit.CodeBodyTooLarge, gqllimit.CodeBatchNotSupported, gqllimit.CodeIntrospectionDisabled:
		return 1
	}
	return 0
}

// getTarget is a GET request's target: the parameters in exact, other-case
// and repeated spellings.
func getTarget(g bodyGen, queries, hashes []string) string {
	q := url.Values{}
	add := func(name, value string) {
		if g.next(6) == 0 {
			name = strings.ToUpper(name[:1]) + name[1:]
		}
		q.Add(name, value)
	}
	for range g.next(3) {
		add("query", g.pick(queries...))
	}
	if g.next(3) == 0 {
		add("operationName", g.pick("A", "B"))
	}
	if g.next(3) == 0 {
		add("variables", g.pick(`{"n":3}`, `{"n":40}`, `{"n":3,"n":40}`, "{}"))
	}
	for range g.next(3) {
		add("extensions", g.extensions(hashes))
	}
	return "/graphql?" + q.Encode()
}

// priceOp is what op costs, worked out apart from the middleware and its caches.
func priceOp(t *testing.T, op ranOp) int64 {
	t.Helper()
	doc, err := parser.ParseQuery(&ast.Source{Input: op.query})
	if err != nil {
		t.Fatalf("gqlgen ran %q, which does not parse: %v", op.query, err)
	}
	res, err := pricingSchema(t).Analyze(doc, op.operationName, op.variables)
	if err != nil {
		t.Fatalf("pricing %q: %v", op.query, err)
	}
	return max(res.Cost, 1)
}

var (
	pricingOnce sync.Once
	pricingS    *complexity.Schema
	pricingErr  error
)

func pricingSchema(t *testing.T) *complexity.Schema {
	t.Helper()
	pricingOnce.Do(func() {
		pricingS, pricingErr = complexity.NewSchema(graph.NewExecutableSchema(graph.Config{Resolvers: &graph.Resolver{}}).Schema())
	})
	if pricingErr != nil {
		t.Fatal(pricingErr)
	}
	return pricingS
}

// OPTIONS is answered as gqlgen's transport.Options answers it (the methods
// served), charging nothing; another method is 405 with the same Allow.
func TestOptionsAndOtherMethods(t *testing.T) {
	e, ran, _ := newRecordingEnv(t)
	before := e.available(t)
	for _, tc := range []struct {
		method string
		status int
	}{{"OPTIONS", http.StatusOK}, {"PUT", http.StatusMethodNotAllowed}, {"DELETE", http.StatusMethodNotAllowed}} {
		req := httptest.NewRequest(tc.method, "/graphql", nil)
		w := httptest.NewRecorder()
		e.handler.ServeHTTP(w, req)
		if w.Code != tc.status || w.Header().Get("Allow") != "OPTIONS, GET, POST" {
			t.Errorf("%s: %d Allow %q, want %d and the methods served", tc.method, w.Code, w.Header().Get("Allow"), tc.status)
		}
	}
	if ops := ran.take(); len(ops) > 0 || e.available(t) != before {
		t.Errorf("ran %d operations, charged %d", len(ops), before-e.available(t))
	}
}
