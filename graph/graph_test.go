package graph_test

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/transport"

	"github.com/costgate/costgate/graph"
)

func query(t *testing.T, q string) map[string]any {
	t.Helper()
	srv := handler.New(graph.NewExecutableSchema(graph.Config{Resolvers: &graph.Resolver{Shop: graph.NewShop()}}))
	srv.AddTransport(transport.POST{})
	body, _ := json.Marshal(map[string]string{"query": q})
	req := httptest.NewRequest("POST", "/graphql", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	srv.ServeHTTP(w, req)
	var res map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &res); err != nil {
		t.Fatalf("%s: %v", w.Body, err)
	}
	return res
}

// The resolvers honour `first`, and return fewer items than asked when the
// data has fewer: that is what makes the actual cost differ from the
// requested one.
func TestResolversHonourFirst(t *testing.T) {
	res := query(t, `{ products(first: 3) { nodes { id variants(first: 5) { id } reviews(first: 5) { id } } pageInfo { hasNextPage endCursor } } }`)
	conn := res["data"].(map[string]any)["products"].(map[string]any)
	nodes := conn["nodes"].([]any)
	if len(nodes) != 3 {
		t.Fatalf("products(first: 3): %d nodes", len(nodes))
	}
	// product i has 1+i%7 variants and i%4 reviews: p1 → 2 and 1, p2 → 3 and 2, p3 → 4 and 3
	for i, n := range nodes {
		node := n.(map[string]any)
		if got, want := len(node["variants"].([]any)), 1+(i+1)%7; got != want {
			t.Errorf("p%d variants: %d, want %d", i+1, got, want)
		}
		if got, want := len(node["reviews"].([]any)), (i+1)%4; got != want {
			t.Errorf("p%d reviews: %d, want %d", i+1, got, want)
		}
	}
	if pi := conn["pageInfo"].(map[string]any); pi["hasNextPage"] != true || pi["endCursor"] != "p3" {
		t.Errorf("pageInfo %v", pi)
	}
	next := query(t, `{ products(first: 2, after: "p3") { nodes { id } } }`)
	if ids := next["data"].(map[string]any)["products"].(map[string]any)["nodes"].([]any); len(ids) != 2 || ids[0].(map[string]any)["id"] != "p4" {
		t.Errorf("after p3: %v", ids)
	}
}

func TestSearchAndMutation(t *testing.T) {
	res := query(t, `{ search(text: "lamp", first: 4) { __typename ... on Product { title } ... on Review { body } } }`)
	hits := res["data"].(map[string]any)["search"].([]any)
	if len(hits) != 4 {
		t.Fatalf("search: %d hits, want 4", len(hits))
	}
	res = query(t, `mutation { createReview(input: {productId: "p1", rating: 9, body: "x"}) { id } }`)
	if errs, _ := res["errors"].([]any); len(errs) != 1 || !strings.Contains(errs[0].(map[string]any)["message"].(string), "between 1 and 5") {
		t.Errorf("rating 9: %v", res)
	}
	res = query(t, `mutation { createReview(input: {productId: "p1", rating: 5, body: "Lovely"}) { rating product { id } } }`)
	if r := res["data"].(map[string]any)["createReview"].(map[string]any); r["rating"] != float64(5) {
		t.Errorf("createReview: %v", res)
	}
}
