package playground_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/go-chi/chi/v5"

	"github.com/costgate/costgate/graph"
	"github.com/costgate/costgate/limiter/gqllimit"
	"github.com/costgate/costgate/limiter/identity"
	"github.com/costgate/costgate/playground"
	"github.com/costgate/costgate/playground/browsertest"
)

const panelAPIKey = "panel-test-key"

// gqlRequest is one request to /graphql, as the server saw it.
type gqlRequest struct {
	DryRun, Debug, APIKey string
	Query                 string
}

// costServer is the playground in front of the example API behind a real
// cost budget (gqllimit, in-process store): 1000 points, refilled over 30
// days (one point in 43 minutes), so that the bucket stands still during the test.
type costServer struct {
	url       string
	resolvers atomic.Int64 // root fields resolved, introspection left out
	mu        sync.Mutex
	requests  []gqlRequest
}

func newCostServer(t *testing.T) *costServer {
	t.Helper()
	cs := &costServer{}
	gql := handler.New(graph.NewExecutableSchema(graph.Config{Resolvers: &graph.Resolver{Shop: graph.NewShop()}}))
	gql.AddTransport(transport.POST{})
	gql.Use(extension.Introspection{})
	gql.AroundRootFields(func(ctx context.Context, next graphql.RootResolver) graphql.Marshaler {
		if rf := graphql.GetRootFieldContext(ctx); rf != nil && !strings.HasPrefix(rf.Field.Name, "__") {
			cs.resolvers.Add(1)
		}
		return next(ctx)
	})
	ids, err := identity.New(identity.Config{
		HashKey: []byte("cost panel test hash key"),
		APIKeys: identity.Table{panelAPIKey: {Tenant: "panel", Plan: "free"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	api := gqllimit.Handler(gql, gqllimit.Budget(1000, 30*24*time.Hour, 1000), gqllimit.WithIdentity(ids))

	r := chi.NewRouter()
	pg := playground.Handler("costgate", "/graphql", playground.WithHeaders(map[string]string{"X-API-Key": panelAPIKey}))
	r.Handle("/", pg)
	r.Handle("/assets/*", pg)
	r.Handle("/graphql", http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var body struct{ Query string }
		b, _ := readAll(req)
		_ = json.Unmarshal(b, &body)
		cs.mu.Lock()
		cs.requests = append(cs.requests, gqlRequest{
			DryRun: req.Header.Get("Costgate-Dry-Run"), Debug: req.Header.Get("Costgate-Cost-Debug"),
			APIKey: req.Header.Get("X-API-Key"), Query: body.Query,
		})
		cs.mu.Unlock()
		req.Body = readCloser(b)
		api.ServeHTTP(w, req)
	}))
	srv := httptestServer(t, r)
	cs.url = srv
	return cs
}

func (cs *costServer) seen() []gqlRequest {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return append([]gqlRequest(nil), cs.requests...)
}

// dryRun prices query for the panel's API key, as the test sees it.
func (cs *costServer) dryRun(t *testing.T, query string) gqllimit.Cost {
	t.Helper()
	b, _ := json.Marshal(map[string]string{"query": query})
	req, _ := http.NewRequest("POST", cs.url+"/graphql", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", panelAPIKey)
	req.Header.Set("Costgate-Dry-Run", "1")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out struct {
		Extensions struct{ Cost gqllimit.Cost }
	}
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil || out.Extensions.Cost.ThrottleStatus == nil || out.Extensions.Cost.RequestedQueryCost == 0 {
		t.Fatalf("test dry run: %v %+v", err, out)
	}
	return out.Extensions.Cost
}

func atoi(s string) int64 {
	n, err := strconv.ParseInt(strings.ReplaceAll(strings.TrimSpace(s), ",", ""), 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// The cost panel in a real headless chromium: typing a query prices it
// with a dry run (nothing resolved, nothing charged), the breakdown puts
// the costliest field first, and a run shows the requested and actual cost
// and the budget left. With COSTGATE_PANEL_SCREENSHOT=<file> it saves a
// screenshot of the page (docs/playground-cost-panel.png).
func TestCostPanelInBrowser(t *testing.T) {
	cs := newCostServer(t)
	s, err := browsertest.Open(t.Context(), cs.url+"/", browsertest.Options{Timeout: 90 * time.Second})
	if err != nil {
		t.Fatalf("browsertest: %v", err)
	}
	defer s.Close()
	defer s.Check(t)

	if err := s.Click(`.graphiql-sidebar button[aria-label="Show Cost"]`); err != nil {
		t.Fatalf("no Cost button in GraphiQL's sidebar: %v", err)
	}
	if _, err := s.WaitText(`[data-costgate="panel"]`, func(string) bool { return true }); err != nil {
		t.Fatalf("the cost panel did not open: %v", err)
	}
	if err := s.WaitIdle(); err != nil {
		t.Fatal(err)
	}
	// The product comes first in the document, the product list costs more.
	const query = `{ product(id: "1") { title } products(first: 10) { nodes { id title variants(first: 5) { id } } } }`
	before := cs.dryRun(t, query)
	resolvedBefore := cs.resolvers.Load()

	if err := s.TypeQuery(query); err != nil {
		t.Fatal(err)
	}
	want := strconv.FormatInt(before.RequestedQueryCost, 10)
	if got, err := s.WaitText(`[data-costgate="estimate"]`, func(s string) bool { return atoi(s) == before.RequestedQueryCost }); err != nil {
		t.Fatalf("the panel's estimate never showed %s: %v", want, err)
	} else {
		t.Logf("estimate shown without running: %s", got)
	}
	if n := cs.resolvers.Load(); n != resolvedBefore {
		t.Errorf("typing resolved %d root fields; a dry run must run nothing", n-resolvedBefore)
	}
	if after := cs.dryRun(t, query); after.ThrottleStatus.CurrentlyAvailable != before.ThrottleStatus.CurrentlyAvailable {
		t.Errorf("typing charged the bucket: %d before, %d after", before.ThrottleStatus.CurrentlyAvailable, after.ThrottleStatus.CurrentlyAvailable)
	}
	if got, _ := s.WaitText(`[data-costgate="estimate-budget-available"]`, func(string) bool { return true }); atoi(got) != before.ThrottleStatus.CurrentlyAvailable {
		t.Errorf("the estimate shows %s available, the bucket holds %d", got, before.ThrottleStatus.CurrentlyAvailable)
	}
	var priced bool
	for _, r := range cs.seen() {
		if r.Query == query && r.Debug != "" { // the test's own dry runs send no Costgate-Cost-Debug
			if r.DryRun != "1" || r.Debug != "1" {
				t.Errorf("the page sent the typed query without running it, but not as a dry run: %+v", r)
			}
			if r.APIKey != panelAPIKey {
				t.Errorf("the dry run went without the page's API key header: %+v", r)
			}
			priced = true
		}
	}
	if !priced {
		t.Errorf("the server never saw the typed query: %+v", cs.seen())
	}

	var rows []struct {
		Path  string
		Total string
	}
	if err := s.Eval(`Array.from(document.querySelectorAll('[data-costgate="breakdown"] tbody tr')).map(r => ({path: r.dataset.path, total: r.cells[2].innerText}))`, &rows); err != nil {
		t.Fatal(err)
	}
	t.Logf("breakdown: %+v", rows)
	if len(rows) < 4 || rows[0].Path != "products" {
		t.Errorf("the breakdown does not start with products, the costliest field: %+v", rows)
	}
	for i := 1; i < len(rows); i++ {
		if atoi(rows[i].Total) > atoi(rows[i-1].Total) {
			t.Errorf("breakdown row %d (%+v) costs more than the one before (%+v)", i, rows[i], rows[i-1])
		}
	}

	if err := s.ClickRun(); err != nil {
		t.Fatal(err)
	}
	var ran struct {
		Extensions struct{ Cost gqllimit.Cost }
	}
	text, err := s.WaitResult(func(text string) bool { return strings.Contains(text, "actualQueryCost") })
	if err != nil || json.Unmarshal([]byte(text), &ran) != nil || ran.Extensions.Cost.ActualQueryCost == nil || ran.Extensions.Cost.ThrottleStatus == nil {
		t.Fatalf("result pane: %v\n%s", err, text)
	}
	c := ran.Extensions.Cost
	if cs.resolvers.Load() == resolvedBefore {
		t.Errorf("the run resolved nothing")
	}
	for sel, want := range map[string]int64{
		`[data-costgate="run-requested"]`:        c.RequestedQueryCost,
		`[data-costgate="run-actual"]`:           *c.ActualQueryCost,
		`[data-costgate="run-budget-available"]`: c.ThrottleStatus.CurrentlyAvailable,
		`[data-costgate="run-budget-maximum"]`:   1000,
	} {
		if got, err := s.WaitText(sel, func(s string) bool { return atoi(s) == want }); err != nil {
			t.Errorf("%s shows %q, want %d: %v", sel, got, want, err)
		}
	}
	t.Logf("run: requested %d, actual %d, %d of %d left", c.RequestedQueryCost, *c.ActualQueryCost,
		c.ThrottleStatus.CurrentlyAvailable, c.ThrottleStatus.MaximumAvailable)
	if c.ThrottleStatus.CurrentlyAvailable >= before.ThrottleStatus.CurrentlyAvailable {
		t.Errorf("the run charged nothing: %d available before, %d after", before.ThrottleStatus.CurrentlyAvailable, c.ThrottleStatus.CurrentlyAvailable)
	}

	if file := os.Getenv("COSTGATE_PANEL_SCREENSHOT"); file != "" {
		png, err := s.Screenshot()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func readAll(r *http.Request) ([]byte, error) {
	defer r.Body.Close()
	var b bytes.Buffer
	_, err := b.ReadFrom(r.Body)
	return b.Bytes(), err
}

func readCloser(b []byte) io.ReadCloser { return io.NopCloser(bytes.NewReader(b)) }

func httptestServer(t *testing.T, h http.Handler) string {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}
