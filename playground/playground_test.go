package playground_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	gqlplayground "github.com/99designs/gqlgen/graphql/playground"
	"github.com/go-chi/chi/v5"

	"github.com/costgate/costgate/graph"
	"github.com/costgate/costgate/playground"
	"github.com/costgate/costgate/playground/browsertest"
)

const testCost = 42

// withCostExtension stands in for costgate's limiter: it adds
// "extensions":{"cost":{"requestedQueryCost":42}} to every JSON response.
func withCostExtension(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		var resp map[string]json.RawMessage
		if err := json.Unmarshal(body, &resp); err == nil {
			resp["extensions"] = json.RawMessage(`{"cost":{"requestedQueryCost":42}}`)
			body, _ = json.Marshal(resp)
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.Header().Del("Content-Length")
		w.WriteHeader(rec.Code)
		_, _ = w.Write(body)
	})
}

// hits records the requests the test server received.
type hits struct {
	mu    sync.Mutex
	paths []string
}

func (h *hits) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.paths = append(h.paths, r.Method+" "+r.URL.RequestURI())
		h.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

func (h *hits) list() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.paths...)
}

// newServer mounts the playground at / (and /assets/*) and the example API,
// with the stand-in cost extension, at /graphql, as costgate's server does.
func newServer(t *testing.T) (*httptest.Server, *hits) {
	t.Helper()
	gql := handler.New(graph.NewExecutableSchema(graph.Config{Resolvers: &graph.Resolver{Shop: graph.NewShop()}}))
	gql.AddTransport(transport.GET{})
	gql.AddTransport(transport.POST{})
	gql.Use(extension.Introspection{})

	pg := playground.Handler("costgate", "/graphql")
	r := chi.NewRouter()
	r.Handle("/", pg)
	r.Handle("/assets/*", pg)
	r.Handle("/graphql", withCostExtension(gql))
	h := &hits{}
	srv := httptest.NewServer(h.wrap(r))
	t.Cleanup(srv.Close)
	return srv, h
}

// TestPlaygroundInBrowser runs a query in the playground in headless
// chromium with a closed network, and checks the result pane shows the whole
// response, extensions included, and that the page asked nothing of any host
// but the test server.
func TestPlaygroundInBrowser(t *testing.T) {
	srv, h := newServer(t)
	start := time.Now()
	text := browsertest.RunQuery(t, srv.URL+"/", `{ products(first: 2) { nodes { title } } }`)
	t.Logf("browser run took %v; result pane:\n%s", time.Since(start).Round(time.Millisecond), text)

	for _, want := range []string{`"extensions"`, `"requestedQueryCost": 42`, `"Quiet Kettle"`, `"Bright Backpack"`} {
		if !strings.Contains(text, want) {
			t.Errorf("result pane lacks %s:\n%s", want, text)
		}
	}
	var resp struct {
		Data struct {
			Products struct {
				Nodes []struct{ Title string }
			}
		}
		Extensions struct {
			Cost struct{ RequestedQueryCost int }
		}
	}
	if err := json.Unmarshal([]byte(text), &resp); err != nil {
		t.Errorf("result pane is not JSON: %v", err)
	} else if len(resp.Data.Products.Nodes) != 2 || resp.Extensions.Cost.RequestedQueryCost != testCost {
		t.Errorf("result pane = %+v", resp)
	}

	// What the server saw: the page, its four assets, the query (and
	// GraphiQL's introspection query), nothing else.
	got := h.list()
	t.Logf("server saw: %q", got)
	want := []string{"GET /"}
	for _, p := range assetURLs(t, srv.URL+"/") {
		want = append(want, "GET "+p)
	}
	want = append(want, "POST /graphql") // GraphiQL's introspection query, then ours
	for _, w := range want {
		if !contains(got, w) {
			t.Errorf("server never got %q; got %q", w, got)
		}
	}
	for _, g := range got {
		if !contains(want, g) {
			t.Errorf("server got an unexpected request %q", g)
		}
	}
}

// TestBrowserNetworkIsClosed checks the test harness itself: a page that
// tries to load a CDN script and fetch an outside host gets nothing, and
// RunQuery's bookkeeping sees the attempts.
func TestBrowserNetworkIsClosed(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, `<!DOCTYPE html><html><body>
<script src="https://cdn.jsdelivr.net/npm/react@18.2.0/umd/react.production.min.js"></script>
<script>
fetch('http://example.invalid/').catch(() => {});
</script></body></html>`)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	res, err := browsertest.Run(t.Context(), srv.URL+"/", "", browsertest.Options{Timeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	for _, u := range []string{"https://cdn.jsdelivr.net/", "http://example.invalid/"} {
		var seen *browsertest.Request
		for i := range res.Requests {
			if strings.HasPrefix(res.Requests[i].URL, u) {
				seen = &res.Requests[i]
			}
		}
		switch {
		case seen == nil:
			t.Errorf("no request to %s recorded: %+v", u, res.Requests)
		case seen.Failed == "":
			t.Errorf("request to %s did not fail: %+v", u, seen)
		case !contains(res.External, seen.URL):
			t.Errorf("request to %s not listed as external: %q", u, res.External)
		default:
			t.Logf("%s blocked: %s", seen.URL, seen.Failed)
		}
	}
}

func contains(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}

// assetRE matches a script or stylesheet link with its integrity.
var assetRE = regexp.MustCompile(`(?s)(?:src|href)="([^"]+)"\s+integrity="([^"]+)"`)

// assetURLs fetches the page and returns the paths of its assets, resolved
// against pageURL.
func assetURLs(t *testing.T, pageURL string) []string {
	t.Helper()
	body, _ := get(t, pageURL)
	base, _ := url.Parse(pageURL)
	var out []string
	for _, m := range assetRE.FindAllStringSubmatch(body, -1) {
		u, err := base.Parse(m[1])
		if err != nil {
			t.Fatalf("bad asset URL %q: %v", m[1], err)
		}
		out = append(out, u.RequestURI())
	}
	if len(out) != 4 {
		t.Fatalf("page links %d assets, want 4: %q", len(out), out)
	}
	return out
}

func get(t *testing.T, u string) (string, *http.Response) {
	t.Helper()
	res, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), res
}

func sri(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256-" + base64.StdEncoding.EncodeToString(sum[:])
}

// TestPageAndAssets checks the page and every asset without a browser:
// headers, caching, integrity, relative URLs wherever the page is mounted,
// and that nothing in them points outside.
func TestPageAndAssets(t *testing.T) {
	pg := playground.Handler("costgate <API>", "/graphql")
	r := chi.NewRouter()
	r.Handle("/", pg)
	r.Handle("/assets/*", pg)
	r.Handle("/sub/play", pg)
	r.Handle("/sub/play/assets/*", pg)
	r.Handle("/sub/dir/", pg)
	r.Handle("/sub/dir/assets/*", pg)
	srv := httptest.NewServer(r)
	defer srv.Close()

	for _, pagePath := range []string{"/", "/sub/play", "/sub/dir/"} {
		body, res := get(t, srv.URL+pagePath)
		if res.StatusCode != 200 {
			t.Fatalf("GET %s: %d", pagePath, res.StatusCode)
		}
		if ct := res.Header.Get("Content-Type"); ct != "text/html; charset=UTF-8" {
			t.Errorf("page Content-Type %q", ct)
		}
		if cc := res.Header.Get("Cache-Control"); cc != "no-cache" {
			t.Errorf("page Cache-Control %q", cc)
		}
		csp := res.Header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "script-src 'self' 'nonce-") {
			t.Errorf("page CSP %q", csp)
		}
		if !strings.Contains(body, "<title>costgate &lt;API&gt;</title>") {
			t.Errorf("page title not escaped/present")
		}
		if !strings.Contains(body, `const url = location.protocol + '//' + location.host + "/graphql";`) {
			t.Errorf("page does not send to /graphql:\n%s", body)
		}
		if strings.Contains(body, "https://") || strings.Contains(body, "http://") || strings.Contains(body, "//cdn") {
			t.Errorf("page names an outside URL:\n%s", body)
		}
		// Every script/link: relative, served here, integrity matching.
		integrity := assetRE.FindAllStringSubmatch(body, -1)
		if len(integrity) != 4 {
			t.Fatalf("%s: %d assets with integrity, want 4", pagePath, len(integrity))
		}
		base, _ := url.Parse(srv.URL + pagePath)
		for _, m := range integrity {
			if !strings.HasPrefix(m[1], "./") {
				t.Errorf("asset URL %q is not relative", m[1])
			}
			u, _ := base.Parse(m[1])
			if !strings.HasPrefix(u.Path, strings.TrimSuffix(pagePath, "/")+"/assets/") {
				t.Errorf("page %s: asset %s resolves to %s", pagePath, m[1], u.Path)
			}
			ab, ares := get(t, u.String())
			if ares.StatusCode != 200 {
				t.Fatalf("GET %s: %d", u, ares.StatusCode)
			}
			if got := sri([]byte(ab)); got != html.UnescapeString(m[2]) {
				t.Errorf("%s: integrity %s, served %s", u, m[2], got)
			}
			wantCT := "text/javascript; charset=utf-8"
			if strings.HasSuffix(u.Path, ".css") {
				wantCT = "text/css; charset=utf-8"
			}
			if ct := ares.Header.Get("Content-Type"); ct != wantCT {
				t.Errorf("%s: Content-Type %q, want %q", u, ct, wantCT)
			}
			if cc := ares.Header.Get("Cache-Control"); cc != "public, max-age=31536000, immutable" {
				t.Errorf("%s: Cache-Control %q", u, cc)
			}
			if ares.Header.Get("ETag") == "" {
				t.Errorf("%s: no ETag", u)
			}
			// Revalidation answers 304.
			req, _ := http.NewRequest("GET", u.String(), nil)
			req.Header.Set("If-None-Match", ares.Header.Get("ETag"))
			rr, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			rr.Body.Close()
			if rr.StatusCode != http.StatusNotModified {
				t.Errorf("%s with If-None-Match: %d, want 304", u, rr.StatusCode)
			}
			if strings.HasSuffix(u.Path, ".css") && (strings.Contains(ab, "url(http") || strings.Contains(ab, "url(//") || strings.Contains(ab, "@import")) {
				t.Errorf("%s loads something from outside", u)
			}
		}
	}

	// Licences are served beside the files.
	v := playground.Versions()
	for _, pkg := range []string{"graphiql", "react", "react-dom"} {
		body, res := get(t, srv.URL+"/assets/"+pkg+"-"+v[pkg]+"/LICENSE")
		if res.StatusCode != 200 || !strings.Contains(body, "MIT License") {
			t.Errorf("%s LICENSE: %d %.60q", pkg, res.StatusCode, body)
		}
		if ct := res.Header.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
			t.Errorf("%s LICENSE Content-Type %q", pkg, ct)
		}
	}
	for _, p := range []string{"/assets/nope.js", "/assets/graphiql-0.0.0/graphiql.min.js", "/assets/graphiql-" + v["graphiql"] + "/graphiql.min.js.map"} {
		if _, res := get(t, srv.URL+p); res.StatusCode != 404 {
			t.Errorf("GET %s: %d, want 404", p, res.StatusCode)
		}
	}

	// HEAD works; other methods do not.
	res, err := http.Head(srv.URL + "/")
	if err != nil || res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/html; charset=UTF-8" {
		t.Errorf("HEAD /: %v %v", res, err)
	}
	rec := httptest.NewRecorder()
	pg.ServeHTTP(rec, httptest.NewRequest("POST", "/", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /: %d", rec.Code)
	}
}

// TestAbsoluteEndpoint: an endpoint on another origin is used as is, and the
// CSP lets the page reach it (and only it).
func TestAbsoluteEndpoint(t *testing.T) {
	rec := httptest.NewRecorder()
	playground.Handler("x", "https://api.example.org/graphql").ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	body := rec.Body.String()
	if !strings.Contains(body, `const url = "https://api.example.org/graphql";`) ||
		!strings.Contains(body, `const subscriptionUrl = "wss://api.example.org/graphql";`) {
		t.Errorf("absolute endpoint not used:\n%s", body)
	}
	csp := rec.Header().Get("Content-Security-Policy")
	if !strings.Contains(csp, "connect-src 'self' https://api.example.org wss://api.example.org;") {
		t.Errorf("CSP %q", csp)
	}
}

// TestSameFilesAsGqlgen: the embedded files are byte for byte the ones gqlgen's
// own GraphiQL page loads from its CDN (same SRI), for every package whose
// version matches; and VERSIONS agrees with the files.
func TestSameFilesAsGqlgen(t *testing.T) {
	rec := httptest.NewRecorder()
	gqlplayground.Handler("x", "/graphql").ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	theirs := regexp.MustCompile(`(?s)(?:src|href)="https://cdn\.jsdelivr\.net/npm/([^@"]+)@([^/"]+)/([^"]+)"\s+integrity="([^"]+)"`).
		FindAllStringSubmatch(rec.Body.String(), -1)
	if len(theirs) == 0 {
		t.Fatalf("found no CDN asset in gqlgen's page")
	}
	v := playground.Versions()
	for _, m := range theirs {
		pkg, version, file, integrity := m[1], m[2], m[3], m[4]
		if v[pkg] != version {
			t.Logf("gqlgen's page loads %s@%s, the embedded one is %s: run assets/update.sh to follow", pkg, version, v[pkg])
			continue
		}
		b, err := os.ReadFile(filepath.Join("assets", pkg, filepath.Base(file)))
		if err != nil {
			t.Errorf("%s@%s/%s: %v", pkg, version, file, err)
			continue
		}
		if got := sri(b); got != html.UnescapeString(integrity) {
			t.Errorf("assets/%s/%s: %s, gqlgen's CDN file is %s", pkg, filepath.Base(file), got, integrity)
		}
	}
	vf, err := os.ReadFile("assets/VERSIONS")
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range []string{"graphiql", "react", "react-dom"} {
		if !bytes.Contains(vf, []byte("\n"+pkg+" "+v[pkg]+" sha512-")) {
			t.Errorf("VERSIONS lacks %s %s", pkg, v[pkg])
		}
	}
}
