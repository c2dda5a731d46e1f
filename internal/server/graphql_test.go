package server

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/costgate/costgate/internal/config"
	"github.com/costgate/costgate/internal/gqltest"
	"github.com/costgate/costgate/limiter/gqllimit"
)

func newGraphQLServer(t *testing.T, yaml string) (*Server, *gqltest.Client) {
	t.Helper()
	cfg := config.Demo()
	if yaml != "" {
		var err error
		if cfg, err = config.Parse("test.yaml", []byte(yaml)); err != nil {
			t.Fatal(err)
		}
	}
	s, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, &gqltest.Client{Handler: s}
}

// rejections reads costgate_graphql_rejections_total{code} from /metrics.
func rejections(t *testing.T, s *Server, code string) string {
	t.Helper()
	w := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/metrics", nil)
	req.RemoteAddr = "127.0.0.1:4321" // /metrics answers loopback only
	s.ServeHTTP(w, req)
	prefix := `costgate_graphql_rejections_total{code="` + code + `"} `
	for line := range strings.Lines(w.Body.String()) {
		if v, ok := strings.CutPrefix(line, prefix); ok {
			return strings.TrimSpace(v)
		}
	}
	return "absent"
}

// /metrics counts GraphQL rejections by code, in enforce mode and, as
// would-be rejections, in measure mode.
func TestGraphQLRejectionsMetric(t *testing.T) {
	const policies = `
policies:
  graphql: {algorithm: token_bucket, limit: 50, period: 1s, burst: 1000, key: [tenant, api_key]}
`
	deep := `{ products { nodes { reviews { author { name } } } } }`
	for _, tc := range []struct {
		mode   string
		status int
	}{{"enforce", 400}, {"measure", 200}} {
		t.Run(tc.mode, func(t *testing.T) {
			s, c := newGraphQLServer(t, policies+"graphql: {max_depth: 4, mode: "+tc.mode+"}\n")
			r := c.Post(t, deep, nil, nil)
			if r.Status != tc.status {
				t.Fatalf("%d %s", r.Status, r.Body)
			}
			if got := rejections(t, s, gqllimit.CodeMaxDepthExceeded); got != "1" {
				t.Errorf("MAX_DEPTH_EXCEEDED counted %s, want 1", got)
			}
			c.Post(t, `{ products { nope } }`, nil, nil)
			if got := rejections(t, s, gqllimit.CodeValidationFailed); got != "1" {
				t.Errorf("GRAPHQL_VALIDATION_FAILED counted %s, want 1", got)
			}
		})
	}
}

// The example API serves Automatic Persisted Queries (gqlgen's extension,
// over the cache gqllimit reads) and GitHub's rateLimit(dryRun: true).
func TestExampleAPIPersistedQueriesAndDryRun(t *testing.T) {
	_, c := newGraphQLServer(t, "")
	q := `{ products(first: 3) { nodes { id title } } }`
	sum := sha256.Sum256([]byte(q))
	hash := hex.EncodeToString(sum[:])
	body := func(query string) []byte {
		b, _ := json.Marshal(map[string]any{"query": query, "extensions": map[string]any{"persistedQuery": map[string]any{"version": 1, "sha256Hash": hash}}})
		if query == "" {
			b, _ = json.Marshal(map[string]any{"extensions": map[string]any{"persistedQuery": map[string]any{"version": 1, "sha256Hash": hash}}})
		}
		return b
	}
	if r := c.Raw(t, "POST", "/graphql", body(""), nil); r.Code() != gqllimit.CodePersistedQueryNotFound {
		t.Fatalf("unknown hash: %d %s", r.Status, r.Body)
	}
	full := c.Raw(t, "POST", "/graphql", body(q), nil)
	byHash := c.Raw(t, "POST", "/graphql", body(""), nil)
	if full.Status != 200 || byHash.Status != 200 || string(full.Res.Data) != string(byHash.Res.Data) ||
		full.Cost(t).RequestedQueryCost != byHash.Cost(t).RequestedQueryCost {
		t.Errorf("full: %d %s\nby hash: %d %s", full.Status, full.Body, byHash.Status, byHash.Body)
	}

	dry := c.Post(t, `{ rateLimit(dryRun: true) { cost remaining } products(first: 3) { nodes { id title } } }`, nil, nil)
	var data struct {
		RateLimit *struct{ Cost, Remaining int64 }
	}
	if err := json.Unmarshal(dry.Res.Data, &data); err != nil || data.RateLimit == nil || data.RateLimit.Cost != dry.Cost(t).RequestedQueryCost {
		t.Errorf("dry run: %d %s", dry.Status, dry.Body)
	}
	if strings.Contains(string(dry.Res.Data), "products") {
		t.Errorf("the dry run answered products: %s", dry.Res.Data)
	}
	if got, want := fmt.Sprint(data.RateLimit.Remaining), fmt.Sprint(c.Available(t, nil)); got != want {
		t.Errorf("rateLimit.remaining %s, bucket %s", got, want)
	}
}

// graphql.persisted_queries: false turns the protocol off: a hash alone is
// PERSISTED_QUERY_NOT_SUPPORTED, on which Apollo's clients stop sending hashes.
func TestPersistedQueriesOff(t *testing.T) {
	_, c := newGraphQLServer(t, `
policies:
  graphql: {algorithm: token_bucket, limit: 50, period: 1s, burst: 1000, key: [tenant, api_key]}
graphql: {persisted_queries: false}
`)
	body := []byte(`{"extensions":{"persistedQuery":{"version":1,"sha256Hash":"` + strings.Repeat("0", 64) + `"}}}`)
	if r := c.Raw(t, "POST", "/graphql", body, nil); r.Status != 400 || r.Code() != gqllimit.CodePersistedQueryNotSupported {
		t.Errorf("%d %s", r.Status, r.Body)
	}
}
