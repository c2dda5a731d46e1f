// Package playground serves gqlgen's GraphiQL page with its JavaScript and CSS
// embedded in the binary, so that the page works with no internet access, and
// costgate's Cost panel in GraphiQL's sidebar (costpanel.js): it prices the
// editor's document with a dry run as the user types and shows each run's
// extensions.cost (docs/graphql.md, "Dry runs and debugging").
//
//	pg := playground.Handler("costgate", "/graphql")
//	r.Handle("/", pg)
//	r.Handle("/assets/*", pg)
//
// The page is the one github.com/99designs/gqlgen/graphql/playground.Handler
// serves with no options (same GraphiQL, React and ReactDOM builds), except
// that its <script> and <link> tags point at copies of those files, taken
// unchanged from the npm packages (see assets/VERSIONS and assets/update.sh),
// which the same handler serves under "assets/" next to the page. Each
// package's LICENSE is served beside its files. A Content-Security-Policy
// keeps the page from loading anything from any other origin.
package playground

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"
)

//go:embed assets/VERSIONS assets/graphiql assets/react assets/react-dom
var assetFS embed.FS

// asset is one embedded file, served at assets/<Dir>/<Name>.
type asset struct {
	body        []byte
	contentType string
	etag        string
	sri         string // "sha256-<base64>", for the integrity attribute
}

// assetSet is every embedded file, by its path below "assets/" (the package
// directory carries the package's version, "graphiql-4.1.2/graphiql.min.js",
// so that a new version gets a new URL and the files can be cached forever).
type assetSet struct {
	files    map[string]*asset
	versions map[string]string // npm package -> version
}

// Asset paths below "assets/" (versions filled in from assets/VERSIONS).
type assetPaths struct {
	GraphiQLJS, GraphiQLCSS, React, ReactDOM string
}

var assets = mustLoadAssets()

func mustLoadAssets() *assetSet {
	s, err := loadAssets(assetFS)
	if err != nil {
		panic("playground: " + err.Error())
	}
	return s
}

func loadAssets(fsys fs.FS) (*assetSet, error) {
	s := &assetSet{files: map[string]*asset{}, versions: map[string]string{}}
	vf, err := fs.ReadFile(fsys, "assets/VERSIONS")
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(bytes.NewReader(vf))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			return nil, fmt.Errorf("assets/VERSIONS: bad line %q", line)
		}
		s.versions[f[0]] = f[1]
	}
	for pkg, version := range s.versions {
		entries, err := fs.ReadDir(fsys, "assets/"+pkg)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if e.IsDir() {
				continue
			}
			body, err := fs.ReadFile(fsys, "assets/"+pkg+"/"+e.Name())
			if err != nil {
				return nil, err
			}
			sum := sha256.Sum256(body)
			s.files[pkg+"-"+version+"/"+e.Name()] = &asset{
				body:        body,
				contentType: contentType(e.Name()),
				etag:        `"` + hex.EncodeToString(sum[:16]) + `"`,
				sri:         "sha256-" + base64.StdEncoding.EncodeToString(sum[:]),
			}
		}
	}
	for _, p := range []string{"graphiql", "react", "react-dom"} {
		if s.versions[p] == "" {
			return nil, fmt.Errorf("assets/VERSIONS: no version for %s", p)
		}
	}
	for _, p := range s.paths().all() {
		if s.files[p] == nil {
			return nil, fmt.Errorf("missing asset %s", p)
		}
	}
	return s, nil
}

func (s *assetSet) paths() assetPaths {
	dir := func(pkg string) string { return pkg + "-" + s.versions[pkg] + "/" }
	return assetPaths{
		GraphiQLJS:  dir("graphiql") + "graphiql.min.js",
		GraphiQLCSS: dir("graphiql") + "graphiql.min.css",
		React:       dir("react") + "react.production.min.js",
		ReactDOM:    dir("react-dom") + "react-dom.production.min.js",
	}
}

func (p assetPaths) all() []string {
	return []string{p.GraphiQLJS, p.GraphiQLCSS, p.React, p.ReactDOM}
}

func contentType(name string) string {
	switch {
	case strings.HasSuffix(name, ".js"):
		return "text/javascript; charset=utf-8"
	case strings.HasSuffix(name, ".css"):
		return "text/css; charset=utf-8"
	default: // LICENSE
		return "text/plain; charset=utf-8"
	}
}

// Versions returns the npm packages whose files the page embeds, with their
// versions (from assets/VERSIONS): graphiql, react and react-dom.
func Versions() map[string]string {
	m := make(map[string]string, len(assets.versions))
	for k, v := range assets.versions {
		m[k] = v
	}
	return m
}

type pageData struct {
	Title                string
	Endpoint             string
	EndpointIsAbsolute   bool
	SubscriptionEndpoint string
	StoragePrefix        string
	DefaultQuery         string
	Headers              map[string]string // nil: none
	Nonce                string
	CostPanelJS          template.JS
	// Asset URLs, relative to the page's own URL.
	JsUrl, CssUrl, ReactUrl, ReactDOMUrl template.URL
	JsSRI, CssSRI, ReactSRI, ReactDOMSRI string
}

// Handler returns the GraphiQL page for the GraphQL endpoint (a path on the
// same host such as "/graphql", or an absolute http(s) URL), titled title.
// It serves GET and HEAD: the page (not cached: Cache-Control: no-cache) at
// any path not below an "assets/" segment, and the embedded files at
// "<page path>/assets/<package>-<version>/<file>" (immutable, cached for a
// year).
// It serves the page at whatever path it is mounted on and
// the assets below "<that path>/assets/", so it must receive both: with chi,
// r.Handle("/", pg) and r.Handle("/assets/*", pg) for the page at "/" (as in
// the package comment), or for the page at "/playground" (or "/playground/"):
// r.Handle("/playground", pg) and r.Handle("/playground/assets/*", pg).
// (r.Handle rather than r.Get, so that HEAD works too; the handler answers
// 405 to other methods.) The page links its assets with relative URLs, so it
// also works behind a proxy that strips a path prefix.
func Handler(title, endpoint string, opts ...Option) http.Handler {
	h := &handler{
		data: pageData{
			Title:                title,
			Endpoint:             endpoint,
			EndpointIsAbsolute:   endpointHasScheme(endpoint),
			SubscriptionEndpoint: getSubscriptionEndpoint(endpoint),
		},
		csp: contentSecurityPolicy(endpoint),
	}
	h.data.CostPanelJS = template.JS(costPanelJS)
	for _, opt := range opts {
		opt(&h.data)
	}
	p := assets.paths()
	h.data.JsSRI = assets.files[p.GraphiQLJS].sri
	h.data.CssSRI = assets.files[p.GraphiQLCSS].sri
	h.data.ReactSRI = assets.files[p.React].sri
	h.data.ReactDOMSRI = assets.files[p.ReactDOM].sri
	return h
}

// Option configures the page.
type Option func(*pageData)

// WithDefaultQuery opens the editor with query when the browser has none of
// its own stored.
func WithDefaultQuery(query string) Option { return func(d *pageData) { d.DefaultQuery = query } }

// WithHeaders fills the headers editor, e.g. with a demo API key, so that
// the first query a newcomer runs is charged to it and shows its budget.
func WithHeaders(h map[string]string) Option {
	return func(d *pageData) {
		d.Headers = make(map[string]string, len(h))
		for k, v := range h {
			d.Headers[k] = v
		}
	}
}

type handler struct {
	data pageData
	csp  string // without the script nonce
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	p := r.URL.Path
	if i := strings.LastIndex(p, "/assets/"); i >= 0 {
		h.serveAsset(w, r, p[i+len("/assets/"):])
		return
	}
	h.servePage(w, r)
}

func (h *handler) serveAsset(w http.ResponseWriter, r *http.Request, name string) {
	a := assets.files[name]
	if a == nil {
		http.NotFound(w, r)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", a.contentType)
	hd.Set("Cache-Control", "public, max-age=31536000, immutable")
	hd.Set("ETag", a.etag)
	hd.Set("X-Content-Type-Options", "nosniff")
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.body))
}

func (h *handler) servePage(w http.ResponseWriter, r *http.Request) {
	// Asset URLs are relative to the page: "./assets/…" when the page's path
	// ends in "/", else "./<last segment>/assets/…".
	base := "./"
	if ep := r.URL.EscapedPath(); !strings.HasSuffix(ep, "/") {
		base += path.Base(ep) + "/"
	}
	base += "assets/"
	data := h.data
	p := assets.paths()
	data.JsUrl = template.URL(base + p.GraphiQLJS)
	data.CssUrl = template.URL(base + p.GraphiQLCSS)
	data.ReactUrl = template.URL(base + p.React)
	data.ReactDOMUrl = template.URL(base + p.ReactDOM)
	var nonce [16]byte
	_, _ = rand.Read(nonce[:])
	data.Nonce = base64.StdEncoding.EncodeToString(nonce[:])

	var buf bytes.Buffer
	if err := page.Execute(&buf, data); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", "text/html; charset=UTF-8")
	hd.Set("Cache-Control", "no-cache")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Content-Security-Policy", strings.ReplaceAll(h.csp, "{nonce}", data.Nonce))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(buf.Bytes())
	}
}

// contentSecurityPolicy keeps the page from loading anything from anywhere
// but its own origin (and the endpoint's, when that is an absolute URL): no
// CDN, font or analytics request can leave even if a bundled file asked for
// one. GraphiQL's CSS inlines its fonts and images as data: URLs, and its
// components set inline styles, hence data: and 'unsafe-inline' for styles.
func contentSecurityPolicy(endpoint string) string {
	connect := "'self'" // also matches ws(s):// to the page's own host
	if u, err := url.Parse(endpoint); err == nil && u.Scheme != "" && u.Host != "" {
		ws := "ws"
		if u.Scheme == "https" {
			ws = "wss"
		}
		connect += " " + u.Scheme + "://" + u.Host + " " + ws + "://" + u.Host
	}
	return strings.Join([]string{
		"default-src 'none'",
		"script-src 'self' 'nonce-{nonce}'",
		"style-src 'self' 'unsafe-inline'",
		"img-src 'self' data:",
		"font-src 'self' data:",
		"connect-src " + connect,
		"base-uri 'none'",
		"form-action 'none'",
	}, "; ")
}

// endpointHasScheme checks if the endpoint has a scheme.
func endpointHasScheme(endpoint string) bool {
	u, err := url.Parse(endpoint)
	return err == nil && u.Scheme != ""
}

// getSubscriptionEndpoint returns the subscription endpoint for the given
// endpoint if it is parsable as a URL, or an empty string.
func getSubscriptionEndpoint(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil {
		return ""
	}
	switch u.Scheme {
	case "https":
		u.Scheme = "wss"
	default:
		u.Scheme = "ws"
	}
	return u.String()
}
