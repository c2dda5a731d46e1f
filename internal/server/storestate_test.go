package server

import (
	"net/http"
	"testing"

	"github.com/costgate/costgate/internal/metricstest"
	"github.com/costgate/costgate/limiter/redistest"
)

// costgate_store_state says whether the store is up, and when its breaker
// has opened after repeated errors.
func TestStoreStateMetric(t *testing.T) {
	redis := redistest.StartServer(t)
	url := serve(t, `
identity: {hash_key: "a-test-secret-of-32-bytes-length"}
store: {redis: {url: "redis://`+redis.Addr()+`/0"}}
policies:
  api: {algorithm: token_bucket, limit: 100, period: 1h, key: [ip], on_store_error: allow}
routes:
  - {match: "/api/*", policies: [api]}
graphql: {path: ""}
`)
	state := func(state string) float64 {
		t.Helper()
		v, ok := metricstest.Scrape(t, url+"/metrics").Value("costgate_store_state", map[string]string{"store": "redis", "state": state})
		if !ok {
			t.Fatalf("no costgate_store_state{state=%q}", state)
		}
		return v
	}
	if up := state("up"); up != 1 {
		t.Fatalf("store up: costgate_store_state{state=up} = %v, want 1", up)
	}
	if err := redis.Stop(); err != nil {
		t.Fatal(err)
	}
	for range 50 { // each a store error, failing open, until the breaker opens
		resp, err := http.Get(url + "/api/products")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if open, up := state("breaker_open"), state("up"); open != 1 || up != 0 {
		t.Errorf("after 50 store errors: breaker_open %v, up %v; want 1 and 0", open, up)
	}
}
