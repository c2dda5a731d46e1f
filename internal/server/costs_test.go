package server

import (
	"log/slog"
	"testing"

	"github.com/costgate/costgate/internal/config"
)

const costsPolicy = `
policies:
  graphql: {algorithm: token_bucket, limit: 50, period: 1s, burst: 1000, key: [tenant, api_key]}
`

// graphql.costs prices the example API over its SDL's own directives.
func TestExampleAPICostsOverlay(t *testing.T) {
	// docs/graphql.md's worked example ("The price"), 61 from the SDL; with Product weighing 3 and
	// variants assumed at 2 whatever first says:
	// 1 × (1 + 10 × (3 + 2 × 1)) = 51.
	const q = `{ products(first: 10) { nodes { id title variants(first: 5) { id } } } }`
	for _, tc := range []struct {
		name  string
		costs string
		want  int64
	}{
		{"no overlay", "", 61},
		{"overlay", `  costs:
    "Product": {cost: 3}
    "Product.variants": {listSize: {assumedSize: 2}}
`, 51},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, c := newGraphQLServer(t, costsPolicy+"graphql:\n  max_cost: 1000\n"+tc.costs)
			r := c.Post(t, q, nil, nil)
			if got := r.Cost(t).RequestedQueryCost; r.Status != 200 || got != tc.want {
				t.Errorf("%d: requestedQueryCost %d, want %d (%s)", r.Status, got, tc.want, r.Body)
			}
		})
	}
}

// An entry of graphql.costs the example API's schema refuses stops the
// server, naming the entry and its line.
func TestExampleAPICostsOverlayRefused(t *testing.T) {
	cfg, err := config.Parse("test.yaml", []byte(costsPolicy+"graphql:\n  costs:\n    \"Product\": {cost: 3}\n    \"Product.varaints\": {cost: 1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(cfg, slog.New(slog.DiscardHandler))
	want := `test.yaml:7: graphql.costs["Product.varaints"]: names nothing: type Product has no field varaints`
	if err == nil || err.Error() != want {
		t.Fatalf("New: %v\nwant: %s", err, want)
	}
}
