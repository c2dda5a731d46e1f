package gqllimit_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// createReviews is a mutation of n createReview fields that write a review of p1,
// then one that fails a non-null check (rating 0 is refused: createReview is
// Review!, so data becomes null).
func createReviews(n int) string {
	var b strings.Builder
	b.WriteString("mutation {")
	for i := range n {
		fmt.Fprintf(&b, ` r%d: createReview(input: {productId: "p1", rating: 5, body: "fine"}) { id }`, i)
	}
	b.WriteString(` bad: createReview(input: {productId: "p1", rating: 0, body: "no"}) { id } }`)
	return b.String()
}

// reviewsOfP1 counts the reviews the example shop holds for p1.
func reviewsOfP1(t *testing.T, e *env) int {
	t.Helper()
	r := e.post(t, `{ product(id: "p1") { reviews(first: 100) { id } } }`, nil, map[string]string{"X-API-Key": "demo-free"})
	var data struct {
		Product struct {
			Reviews []struct{ ID string } `json:"reviews"`
		} `json:"product"`
	}
	if err := json.Unmarshal(r.Res.Data, &data); err != nil {
		t.Fatalf("%s: %v", r.Body, err)
	}
	return len(data.Product.Reviews)
}

// A mutation whose fields ran keeps its whole charge when a sibling fails a
// non-null check: the 29 reviews are written, data is null, and nothing of the
// 300 charged is refunded. Before, the reply's data: null priced it at 0 and all
// but 1 was refunded.
func TestMutationThatRanIsCharged(t *testing.T) {
	e := newEnv(t, envOpts{})
	before := reviewsOfP1(t, e)
	available := e.keyAvailable(t)
	r := e.post(t, createReviews(29), nil, map[string]string{"X-API-Key": "demo-free"})
	if string(r.Res.Data) != "null" || len(r.Res.Errors) == 0 {
		t.Fatalf("want data null and the failing field's error: %s", r.Body)
	}
	c := r.Cost(t)
	if c.RequestedQueryCost != 300 || c.ActualQueryCost == nil || *c.ActualQueryCost != 300 {
		t.Errorf("requested %d, actual %v: want 300 and 300 (30 root mutation fields of 10)", c.RequestedQueryCost, c.ActualQueryCost)
	}
	if got := available - e.keyAvailable(t); got != 300 {
		t.Errorf("charged %d after the refund, want 300", got)
	}
	if got := reviewsOfP1(t, e) - before; got != 29 {
		t.Errorf("%d reviews written, want 29", got)
	}
}
