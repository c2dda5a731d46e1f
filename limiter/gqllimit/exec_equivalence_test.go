package gqllimit_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/costgate/costgate/complexity"
	"github.com/costgate/costgate/graph"
	"github.com/costgate/costgate/internal/gqltest"
	"github.com/costgate/costgate/internal/pricecases"
	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/gqllimit"
	"github.com/costgate/costgate/limiter/identity"
	"github.com/costgate/costgate/limiter/memstore"
)

// The actual cost counted from gqlgen's execution is the price the reply gives, on every
// case of the price table, and differs only where the reply says something else than
// what ran: null propagation, a reply that does not name an item's type, a client's
// alias named __typename, a mutation whose fields ran (charged whole).

// measuring serves es behind a cost limit that rejects nothing (measure mode), so that
// any operation runs and reports its actual cost.
func measuring(t *testing.T, es *handler.Server) gqltest.Client {
	t.Helper()
	lim, err := limiter.New(memstore.New(nil), limiter.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	ids, err := identity.New(identity.Config{HashKey: []byte("equivalence-test-hash-key")})
	if err != nil {
		t.Fatal(err)
	}
	p := &limiter.Policy{Name: "graphql", Algorithm: limiter.TokenBucket, Limit: 1000, Period: time.Second, Key: []string{"ip"}}
	gl, err := gqllimit.New(gqllimit.Config{Limiter: lim, Policy: p, Identity: ids, Logger: slog.New(slog.DiscardHandler),
		Limits: gqllimit.Limits{Mode: limiter.Shadow, MaxFields: 1 << 40, MaxCost: complexity.MaxCost, MaxDepth: 64}}) // MaxDepth: the fragment bombs nest 30 deep
	if err != nil {
		t.Fatal(err)
	}
	es.AddTransport(transport.POST{})
	return gqltest.Client{Handler: gl.Handler(es)}
}

// run executes query and returns the actual cost counted and the reply's data.
func run(t *testing.T, c gqltest.Client, query string, vars map[string]any) (int64, json.RawMessage) {
	t.Helper()
	r := c.Post(t, query, vars, nil)
	cost := r.Cost(t)
	if r.Status != http.StatusOK || cost.ActualQueryCost == nil {
		t.Fatalf("%s: status %d, no actual cost: %s", query, r.Status, r.Body)
	}
	return *cost.ActualQueryCost, r.Res.Data
}

// replyPrice prices data, a reply to query, as complexity reads a reply.
func replyPrice(t *testing.T, s *complexity.Schema, query string, vars map[string]any, data []byte) int64 {
	t.Helper()
	doc, errs := gqlparser.LoadQueryWithRules(s.AST(), query, nil)
	if errs != nil {
		t.Fatalf("%s: %v", query, errs)
	}
	cost, err := s.ActualJSON(doc.Operations[0], vars, data)
	if err != nil {
		t.Fatalf("%s: pricing the reply %s: %v", query, data, err)
	}
	return cost
}

// fixtureServer runs gqlgen's execution over the cost tests' schema, its resolvers
// returning data. Items of the abstract types are Go values named after their types,
// as gqlgen's models are.
func fixtureServer(schemaAST *ast.Schema, data map[string]any) *handler.Server {
	type (
		Product struct{ gqltest.Object }
		Review  struct{ gqltest.Object }
		Shop    struct{ gqltest.Object }
		User    struct{ gqltest.Object }
	)
	return handler.New(&gqltest.Fixture{AST: schemaAST, Data: data, Types: map[string]func(gqltest.Object) any{
		"Product": func(o gqltest.Object) any { return &Product{o} },
		"Review":  func(o gqltest.Object) any { return &Review{o} },
		"Shop":    func(o gqltest.Object) any { return Shop{o} },
		"User":    func(o gqltest.Object) any { return &User{o} },
	}})
}

func priceSchema(t *testing.T) (*ast.Schema, *complexity.Schema) {
	t.Helper()
	s, err := complexity.LoadSDL("schema.graphql", pricecases.SDL)
	if err != nil {
		t.Fatal(err)
	}
	return s.AST(), s
}

// Each case of the table runs over gqlgen: the actual cost counted is the table's
// (the reply's price), but where the case says the execution knows better; and the
// reply gqlgen wrote prices the same, but where the case says it lies.
func TestExecutionCostMatchesThePriceTable(t *testing.T) {
	schemaAST, s := priceSchema(t)
	for _, tc := range pricecases.Actual {
		t.Run(tc.Name, func(t *testing.T) {
			fixture := tc.Fixture
			if fixture == "" {
				fixture = tc.Data
			}
			var data map[string]any
			if err := json.Unmarshal([]byte(fixture), &data); err != nil {
				t.Fatal(err)
			}
			got, reply := run(t, measuring(t, fixtureServer(schemaAST, data)), tc.Query, tc.Vars)
			want := tc.Want
			if tc.Exec != 0 {
				want = tc.Exec
			}
			if got != want {
				t.Errorf("counted %d, want %d (%s)", got, want, tc.Why)
			}
			switch replied := replyPrice(t, s, tc.Query, tc.Vars, reply); {
			case tc.Lies == "" && replied != got:
				t.Errorf("the reply %s prices %d, the execution %d", reply, replied, got)
			case tc.Lies != "" && replied == got:
				t.Errorf("the reply %s prices %d as the execution: the case says it lies (%s)", reply, replied, tc.Lies)
			}
		})
	}
}

// The operations whose replies complexity's tests generate, run over gqlgen with
// random data (lists of 0 to 3 items, nullable fields null a quarter of the time,
// abstract items of any possible type, named as gqlgen names them): the count is the
// price of the reply with every item's type named (the data itself), fragment bombs
// and repeated selections included, and never more than the reply's own price (which
// takes the costliest type where the reply does not name it). A mutation is charged
// its whole price, whatever its reply holds.
func TestExecutionCostMatchesRepliesOfRandomData(t *testing.T) {
	schemaAST, s := priceSchema(t)
	rng := rand.New(rand.NewPCG(7, 11))
	vars := pricecases.OperationVars()
	for qi, query := range pricecases.Operations {
		doc, errs := gqlparser.LoadQueryWithRules(schemaAST, query, nil)
		if errs != nil {
			t.Fatalf("%s: %v", query, errs)
		}
		op := doc.Operations[0]
		requested, err := s.AnalyzeOperation(op, vars)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 30 {
			g := dataGen{schema: schemaAST, doc: doc, vars: vars, rng: rng}
			data := g.object(op.SelectionSet, schemaAST.Types[rootName(op)])
			got, reply := run(t, measuring(t, fixtureServer(schemaAST, data)), query, vars)
			typed, _ := json.Marshal(named(data))
			want := replyPrice(t, s, query, vars, typed)
			if op.Operation == ast.Mutation {
				want = requested.Cost
			}
			if got != want {
				t.Fatalf("operation %d, data %d: counted %d, the data with its types prices %d\nquery %s\ndata %s\nreply %s", qi, i, got, want, query, typed, reply)
			}
			if replied := replyPrice(t, s, query, vars, reply); replied < got && op.Operation != ast.Mutation {
				t.Fatalf("operation %d: the reply %s prices %d, less than the %d counted", qi, reply, replied, got)
			}
		}
	}
}

// named is data with each object's "$type" as its __typename, as a reply that asks
// for every type would hold it.
func named(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			if k == "$type" {
				k = "__typename"
			}
			out[k] = named(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = named(x)
		}
		return out
	}
	return v
}

func rootName(op *ast.OperationDefinition) string {
	if op.Operation == ast.Mutation {
		return "Mutation"
	}
	return "Query"
}

// dataGen makes what resolvers return for a selection set: valid data (a non-null
// field always has a value), keyed by response key, selections under one key merged.
type dataGen struct {
	schema *ast.Schema
	doc    *ast.QueryDocument
	vars   map[string]any
	rng    *rand.Rand
}

func (g *dataGen) object(set ast.SelectionSet, def *ast.Definition) map[string]any {
	out := map[string]any{}
	type merged struct {
		field *ast.Field
		sets  ast.SelectionSet
	}
	var keys []string
	fields := map[string]*merged{}
	spread := map[*ast.FragmentDefinition]bool{} // once: the data does not depend on how often
	var collect func(set ast.SelectionSet)
	collect = func(set ast.SelectionSet) {
		for _, sel := range set {
			switch sel := sel.(type) {
			case *ast.Field:
				key := sel.Alias
				if fields[key] == nil {
					keys = append(keys, key)
					fields[key] = &merged{field: sel}
				}
				fields[key].sets = append(fields[key].sets, sel.SelectionSet...)
			case *ast.InlineFragment:
				if g.satisfies(def, sel.TypeCondition) {
					collect(sel.SelectionSet)
				}
			case *ast.FragmentSpread:
				if !spread[sel.Definition] && g.satisfies(def, sel.Definition.TypeCondition) {
					spread[sel.Definition] = true
					collect(sel.Definition.SelectionSet)
				}
			}
		}
	}
	collect(set)
	for _, key := range keys {
		m := fields[key]
		switch m.field.Name {
		case "__typename":
			continue
		case "__schema", "__type":
			if m.field.Name == "__schema" {
				out[key] = g.object(m.sets, g.schema.Types["__Schema"])
			} else {
				out[key] = g.object(m.sets, g.schema.Types["__Type"])
			}
			continue
		}
		out[key] = g.value(def.Fields.ForName(m.field.Name).Type, m.sets)
	}
	return out
}

func (g *dataGen) value(typ *ast.Type, sets ast.SelectionSet) any {
	if !typ.NonNull && g.rng.IntN(4) == 0 {
		return nil
	}
	if typ.Elem != nil {
		items := make([]any, g.rng.IntN(4))
		for i := range items {
			items[i] = g.value(typ.Elem, sets)
		}
		return items
	}
	def := g.schema.Types[typ.NamedType]
	switch def.Kind {
	case ast.Object:
		return g.object(sets, def)
	case ast.Interface, ast.Union:
		possible := g.schema.GetPossibleTypes(def)
		o := possible[g.rng.IntN(len(possible))]
		obj := g.object(sets, o)
		obj["$type"] = o.Name
		return obj
	case ast.Enum:
		return def.EnumValues[0].Name
	}
	switch typ.NamedType {
	case "Int":
		return g.rng.IntN(100)
	case "Boolean":
		return true
	}
	return fmt.Sprint("v", g.rng.IntN(100))
}

func (g *dataGen) satisfies(def *ast.Definition, condition string) bool {
	if condition == "" || condition == def.Name {
		return true
	}
	for _, t := range g.schema.GetPossibleTypes(g.schema.Types[condition]) {
		if t.Name == def.Name {
			return true
		}
	}
	return false
}

// The example shop, its generated server: the count and the reply's price agree on
// the operations gqllimit's tests price, and differ where the reply lies: a review
// whose body, aliased __typename, says "Product" is priced by the reply as a product
// (its review fields then cost nothing); a mutation whose last field fails a non-null
// check answers data: null after the 29 others wrote their reviews.
func TestExecutionCostOfTheShop(t *testing.T) {
	schema, err := complexity.NewSchema(graph.NewExecutableSchema(graph.Config{}).Schema())
	if err != nil {
		t.Fatal(err)
	}
	shop := graph.NewShop()
	if _, err := shop.AddReview("p2", 5, "Product"); err != nil {
		t.Fatal(err)
	}
	c := measuring(t, handler.New(graph.NewExecutableSchema(graph.Config{Resolvers: &graph.Resolver{Shop: shop}})))
	for _, q := range []struct {
		query string
		vars  map[string]any
	}{
		{query: `{ products(first: 10) { nodes { id title variants(first: 5) { id } } } }`}, // the worked example, 45
		{query: query30, vars: map[string]any{"first": 10}},
		{query: `query($v: Boolean!) { products(first: 4) { nodes { id variants(first: 3) @include(if: $v) { id } } } }`, vars: map[string]any{"v": true}},
		{query: `{ products(first: 3) { edges { node { ...P } } nodes { ...P ...P } } } fragment P on Product { reviews(first: 2) { author { id } } }`},
		{query: `{ a: product(id: "p3") { variants { id } } a: product(id: "p3") { reviews { id } } product(id: "nope") { id } }`},
		{query: `{ search(text: "lamp", first: 6) { __typename ... on Product { variants(first: 2) { id } } ... on Review { author { name } } } }`},
		{query: `{ search(text: "Product") { ... on Review { id product { variants(first: 5) { id } } } } }`},
		{query: `{ __schema { types { name } } }`},
	} {
		got, reply := run(t, c, q.query, q.vars)
		if want := replyPrice(t, schema, q.query, q.vars, reply); got != want {
			t.Errorf("%s: counted %d, the reply %s prices %d", q.query, got, reply, want)
		}
	}

	aliased := `{ search(text: "Product") { ... on Review { __typename: body product { variants(first: 5) { id } } } } }`
	honest := `{ search(text: "Product") { ... on Review { body product { variants(first: 5) { id } } } } }`
	got, reply := run(t, c, aliased, nil)
	want, _ := run(t, c, honest, nil)
	if got != want || want < 3 {
		t.Errorf("the __typename alias: counted %d, want %d as without it", got, want)
	}
	if replied := replyPrice(t, schema, aliased, nil, reply); replied >= got {
		t.Errorf("the reply %s prices %d: the test no longer shows the lie it counts past", reply, replied)
	}
}
