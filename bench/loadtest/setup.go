package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// The limits of the load test: a token bucket so deep that it never runs
// dry during a run (1e9 tokens) and refilled 1 per second, so that every
// request is an allowed check that writes state, costgate and the
// reference alike. (Tokens scaled by the period stay far below 2^53.)
const (
	bucketLimit  = 1
	bucketPeriod = "1s"
	bucketBurst  = 1_000_000_000
)

// apiKeyName is the i-th API key of the load test; every server gets the
// same table.
func apiKeyName(i int) string { return fmt.Sprintf("loadtest-key-%04d", i) }

// tenants is how many tenants the API keys are spread over.
const tenants = 10

func tenantName(i int) string { return "tenant-" + strconv.Itoa(i%tenants) }

// hashKey keys costgate's identity hash (required with Redis).
const hashKey = "costgate load test hash key, not a secret"

// costgateConfig is the costgate config file of the load test: the REST
// route and the GraphQL endpoint each behind a bucket that never denies,
// the Redis store when redisURL is set, else memory. With sync set (a
// duration), the policies decide locally and reconcile with the store that
// often, under the key prefix "rs:".
func costgateConfig(redisURL string, keys int, sync string) string {
	var b strings.Builder
	b.WriteString("listen: \"127.0.0.1:0\"\n")
	// Every request of the load generator comes from 127.0.0.1, and the
	// reference caps nothing: the cap is set past the open-file limit, so
	// that both servers are bound by that limit alone (an open-loop client
	// opens a connection per request in flight, thousands in a stall).
	b.WriteString("server: {max_conns_per_ip: 1000000}\n")
	if redisURL != "" {
		prefix := "rl:"
		if sync != "" {
			prefix = "rs:"
		}
		fmt.Fprintf(&b, "store:\n  key_prefix: %q\n  redis: {url: %q}\n", prefix, redisURL)
	}
	syncPart := ""
	if sync != "" {
		syncPart = ", sync: " + sync
	}
	fmt.Fprintf(&b, "identity:\n  hash_key: %q\n  api_keys:\n", hashKey)
	for i := range keys {
		fmt.Fprintf(&b, "    %s: {tenant: %s, plan: free}\n", apiKeyName(i), tenantName(i))
	}
	b.WriteString("plans: {free: 1}\npolicies:\n")
	for _, name := range []string{"api", "graphql"} {
		fmt.Fprintf(&b, "  %s: {algorithm: token_bucket, limit: %d, period: %s, burst: %d, key: [tenant, api_key], on_store_error: allow%s}\n",
			name, bucketLimit, bucketPeriod, bucketBurst, syncPart)
	}
	b.WriteString("routes:\n  - {match: \"GET /api/*\", policies: [api]}\n")
	b.WriteString("graphql: {path: /graphql, policy: graphql}\n")
	return b.String()
}

// refserverArgs are the reference server's flags for the same limit.
// go-limiter's memorystore refills at interval ticks, and after the first
// tick only interval/tokens tokens (1 here): its interval is an hour, so
// that no tick comes during the run, and it never denies either.
func refserverArgs(store, redisURL, keysPath string) []string {
	period := bucketPeriod
	if store == "memory" {
		period = "1h"
	}
	args := []string{"-addr", "127.0.0.1:0", "-store", store, "-api-keys", keysPath,
		"-limit", strconv.Itoa(bucketLimit), "-period", period, "-burst", strconv.Itoa(bucketBurst)}
	if redisURL != "" {
		args = append(args, "-redis", redisURL)
	}
	return args
}

// writeAPIKeys writes the reference server's API-key table.
func writeAPIKeys(path string, keys int) error {
	table := make(map[string]map[string]string, keys)
	for i := range keys {
		table[apiKeyName(i)] = map[string]string{"tenant": tenantName(i), "plan": "free"}
	}
	data, err := json.Marshal(table)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

func writeFile(dir, name, content string) (string, error) {
	path := filepath.Join(dir, name)
	return path, os.WriteFile(path, []byte(content), 0o644)
}

// products is how many product IDs the REST requests cycle through (the
// example shop has 250).
const products = 50

// restTargeter asks for GET /api/products/{id}, cycling through the API
// keys and the product IDs.
func restTargeter(base string, keys int) vegeta.Targeter {
	headers := keyHeaders(keys, nil)
	var n atomic.Uint64
	return func(t *vegeta.Target) error {
		i := n.Add(1)
		t.Method = http.MethodGet
		t.URL = base + "/api/products/" + strconv.Itoa(int(i%products)+1)
		t.Header = headers[i%uint64(len(headers))]
		t.Body = nil
		return nil
	}
}

// graphqlQuery selects 30 fields of the example API; it costs 44 and
// returns about 1.7 kB.
const graphqlQuery = `query Load {
  products(first: 3) {
    totalCount
    pageInfo { hasNextPage endCursor }
    nodes {
      id title priceCents description inventory
      variants(first: 2) { id sku color size priceCents }
      reviews(first: 2) { id rating body author { id name } }
    }
  }
  product(id: "p7") { id title priceCents description inventory }
}`

// graphqlTargeter POSTs graphqlQuery to /graphql, cycling through the API keys.
func graphqlTargeter(base string, keys int) (vegeta.Targeter, error) {
	body, err := json.Marshal(map[string]string{"query": graphqlQuery})
	if err != nil {
		return nil, err
	}
	headers := keyHeaders(keys, http.Header{"Content-Type": {"application/json"}})
	var n atomic.Uint64
	return func(t *vegeta.Target) error {
		i := n.Add(1)
		t.Method = http.MethodPost
		t.URL = base + "/graphql"
		t.Header = headers[i%uint64(len(headers))]
		t.Body = body
		return nil
	}, nil
}

// keyHeaders returns one header set per API key, each with extra. vegeta
// copies a target's headers into each request, so they can be shared.
func keyHeaders(keys int, extra http.Header) []http.Header {
	out := make([]http.Header, keys)
	for i := range out {
		h := extra.Clone()
		if h == nil {
			h = http.Header{}
		}
		h.Set("X-API-Key", apiKeyName(i))
		out[i] = h
	}
	return out
}
