package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"
)

// The persisted-query attack of the stock binary with its demo config, as a
// user meets it with curl: register a cheap query, try to register a dear
// one (refused, over max_cost), then name the dear hash by the exact key and
// the cheap one by another case. Before, the last answered 200 with the
// dear data at the cheap price, and poisoned the price of the cheap query
// for every tenant. Now it is refused and nothing is registered unpaid.
func TestBinaryPersistedQueryReadOneWay(t *testing.T) {
	base := start(t, nil, "-addr", "127.0.0.1:0").Base
	hash := func(q string) string { s := sha256.Sum256([]byte(q)); return hex.EncodeToString(s[:]) }
	cheap := `{ __typename }`
	dear := `{ products(first: 100) { nodes { id variants(first: 100) { sku } } } }`
	send := func(key, body string) (int, map[string]any) {
		t.Helper()
		res, text := postGraphQL(t, base, body, "X-API-Key", key)
		var out map[string]any
		if err := json.Unmarshal([]byte(text), &out); err != nil {
			t.Fatalf("%s: not JSON: %s", body, text)
		}
		return res.StatusCode, out
	}
	code := func(out map[string]any) string {
		errs, _ := out["errors"].([]any)
		if len(errs) == 0 {
			return ""
		}
		c, _ := errs[0].(map[string]any)["extensions"].(map[string]any)["code"].(string)
		return c
	}
	pq := func(query, inner string) string {
		q := ""
		if query != "" {
			b, _ := json.Marshal(query)
			q = `"query":` + string(b) + `,`
		}
		return `{` + q + `"extensions":{"persistedQuery":{"version":1,` + inner + `}}}`
	}
	if status, out := send("demo-free", pq(cheap, `"sha256Hash":"`+hash(cheap)+`"`)); status != 200 {
		t.Fatalf("registering the cheap query: %d %v", status, out)
	}
	if status, out := send("demo-free", pq(dear, `"sha256Hash":"`+hash(dear)+`"`)); status != 400 || code(out) != "MAX_COST_EXCEEDED" {
		t.Fatalf("the dear query: %d %v", status, out)
	}
	for range 5 {
		status, out := send("demo-free", pq("", `"sha256Hash":"`+hash(dear)+`","SHA256HASH":"`+hash(cheap)+`"`))
		if status != 400 || code(out) != "BAD_REQUEST" || out["data"] != nil {
			t.Fatalf("the dear hash beside the cheap one in another case: %d %v, want 400 BAD_REQUEST", status, out)
		}
	}
	if status, out := send("demo-free", pq("", `"sha256Hash":"`+hash(dear)+`"`)); code(out) != "PERSISTED_QUERY_NOT_FOUND" {
		t.Errorf("the dear query, refused, was registered: %d %v", status, out)
	}
	// Another tenant's cheap query still costs what it costs.
	status, out := send("demo-enterprise", pq("", `"sha256Hash":"`+hash(cheap)+`"`))
	cost, _ := out["extensions"].(map[string]any)["cost"].(map[string]any)
	if status != 200 || cost["requestedQueryCost"] != float64(1) {
		t.Errorf("another tenant's cheap query: %d %v, want 200 at cost 1", status, out)
	}
}
