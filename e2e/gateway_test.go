package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/goccy/go-yaml"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/costgate/costgate/internal/demo"
	"github.com/costgate/costgate/internal/mdblock"
	"github.com/costgate/costgate/internal/nginxtest"
	"github.com/costgate/costgate/limiter/redistest"
)

// gatewaysPage holds the gateway configs the tests run as they are
// written, so that the page and what runs cannot drift.
const gatewaysPage = "docs/gateways.md"

// gatewayBlock is the fenced block of gatewaysPage after marker.
func gatewayBlock(t *testing.T, marker string) string {
	t.Helper()
	return mdblock.After(t, gatewaysPage, marker)
}

// substitute replaces each old text, which must occur exactly once.
func substitute(t testing.TB, s string, pairs ...string) string {
	t.Helper()
	for i := 0; i+1 < len(pairs); i += 2 {
		if n := strings.Count(s, pairs[i]); n != 1 {
			t.Fatalf("the snippet has %q %d times, want once", pairs[i], n)
		}
		s = strings.Replace(s, pairs[i], pairs[i+1], 1)
	}
	return s
}

// clientFrom is an HTTP client whose connections come from a loopback
// address of its own, so that each test client has its own address.
func clientFrom(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return d.DialContext(ctx, network, addr)
		},
		MaxIdleConnsPerHost: 200,
	}}
}

type reply struct {
	status int
	header http.Header
	body   string
}

func send(t *testing.T, c *http.Client, method, url, body string, header map[string]string) reply {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{status: res.StatusCode, header: res.Header, body: strings.TrimSpace(string(b))}
}

// gatewayConfig is the config of the gateway tests: the REST and login
// limits of the demo, refill negligible during a test, the gateway trusted.
const gatewayConfig = `
identity:
  trusted_proxies: ["127.0.0.1/32"]
  api_keys:
    demo-free: {tenant: acme, plan: free}
gateway: {username_header: X-Login-User}
policies:
  api:        {algorithm: token_bucket, limit: 150, period: 1h, burst: 150, key: [tenant, api_key]}
  login_ip:   {algorithm: sliding_log, limit: 10, period: 5m, key: [ip], on_store_error: deny}
  login_user: {algorithm: sliding_log, limit: 10, period: 5m, key: [username], on_store_error: deny}
routes:
  - {match: "POST /login", policies: [login_ip, login_user]}
  - {match: "/api/*", policies: [api]}
graphql: {path: ""}
`

// A real nginx, configured with docs/gateways.md's snippet, in front of a
// service, costgate as its auth_request: 150 at once, then 429 with
// Retry-After, the rate-limit headers and the JSON body reaching the
// client; the login limits per address and per username decision for
// decision what the embedded middleware answers; headers a client forges
// change nothing.
func TestNginxInFront(t *testing.T) {
	conf := gatewayBlock(t, "<!-- the nginx config of TestNginxInFront -->")
	up := startShop(t)
	at := start(t, nil, "-addr", "127.0.0.1:0", "-config", writeConfig(t, gatewayConfig))
	ngx := nginxtest.Start(t, func(listen string) string {
		return substitute(t, conf,
			"server 127.0.0.1:8080;", "server "+at.Host+";",
			"proxy_pass http://127.0.0.1:9000;", "proxy_pass "+up.URL+";",
			"listen 80;", "listen "+listen+";")
	})
	frontedLimits(t, "http://"+ngx.Addr, "http://"+at.Host, "through nginx")
	if strings.Contains(ngx.Log(), "auth request unexpected status") {
		t.Errorf("nginx could not relay a check:\n%s", ngx.Log())
	}
}

// startShop starts the service behind the gateways: the example's
// product list and its login, which answers 401 to a wrong password.
func startShop(t *testing.T) *httptest.Server {
	t.Helper()
	shop := http.NewServeMux()
	shop.HandleFunc("GET /api/products", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"products":[]}`)
	})
	shop.Handle("POST /login", demo.NewLogin())
	up := httptest.NewServer(shop)
	t.Cleanup(up.Close)
	return up
}

// frontedLimits asserts what a client sees through a gateway at front in
// front of a service, costgate (at direct) its forward auth: 150 at once,
// then 429 with Retry-After, the rate-limit headers and the JSON body; the
// login limits per address and per username decision for decision what the
// embedded middleware at direct answers; headers a client forges change
// nothing. gateway names the gateway in failure messages ("through nginx").
func frontedLimits(t *testing.T, front, direct, gateway string) {
	t.Run("burst", func(t *testing.T) {
		c := clientFrom("127.0.0.2")
		var wg sync.WaitGroup
		start := make(chan struct{})
		replies := make([]reply, 150)
		errs := make(chan error, 150)
		for i := range replies {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				res, err := c.Get(front + "/api/products")
				if err != nil {
					errs <- err
					return
				}
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
				replies[i] = reply{status: res.StatusCode, header: res.Header}
			}()
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		var remaining []int
		for i, r := range replies {
			if r.status != 200 || r.header.Get("RateLimit-Policy") != `"api";q=150;w=3600` {
				t.Fatalf("request %d of the burst: %d %v", i, r.status, r.header)
			}
			n, _ := strconv.Atoi(r.header.Get("X-RateLimit-Remaining"))
			remaining = append(remaining, n)
		}
		slices.Sort(remaining)
		for i, n := range remaining {
			if n != i {
				t.Fatalf("X-RateLimit-Remaining over the burst %v, want each of 0..149 once", remaining)
			}
		}
		r := send(t, c, "GET", front+"/api/products", "", nil)
		var body struct {
			Error         string `json:"error"`
			Policy        string `json:"policy"`
			RetryAfterSec int64  `json:"retry_after_sec"`
		}
		if err := json.Unmarshal([]byte(r.body), &body); err != nil {
			t.Fatalf("151st: %d body %q: %v", r.status, r.body, err)
		}
		if r.status != 429 || body.Error != "rate_limit" || body.Policy != "api" || body.RetryAfterSec < 1 ||
			r.header.Get("Retry-After") != strconv.FormatInt(body.RetryAfterSec, 10) ||
			r.header.Get("Content-Type") != "application/json" ||
			r.header.Get("X-RateLimit-Limit") != "150" || r.header.Get("X-RateLimit-Remaining") != "0" || r.header.Get("X-RateLimit-Reset") == "" ||
			r.header.Get("RateLimit-Policy") != `"api";q=150;w=3600` || r.header.Get("RateLimit") != fmt.Sprintf(`"api";r=0;t=%d`, body.RetryAfterSec) {
			t.Errorf("151st: %d %v %s", r.status, r.header, r.body)
		}
		// Another address has its own budget; an unknown key is nginx's 401 with costgate's body.
		if r := send(t, clientFrom("127.0.0.3"), "GET", front+"/api/products", "", nil); r.status != 200 || r.header.Get("X-RateLimit-Remaining") != "149" {
			t.Errorf("another address: %d %v", r.status, r.header)
		}
		if r := send(t, clientFrom("127.0.0.4"), "GET", front+"/api/products", "", map[string]string{"X-API-Key": "guessed"}); r.status != 401 || !strings.Contains(r.body, `"unauthorized"`) {
			t.Errorf("unknown key: %d %s", r.status, r.body)
		}
	})

	t.Run("login", func(t *testing.T) {
		type attempt struct {
			client int                      // the last byte of the client's loopback address
			user   func(word string) string // the username, from a word of each run's own
		}
		var attempts []attempt
		for i := range 12 { // one address, many usernames: login_ip
			attempts = append(attempts, attempt{client: 2, user: func(w string) string { return fmt.Sprintf("%s%d", w, i) }})
		}
		spellings := []func(string) string{ // one username, spelt as normalisation folds it
			func(w string) string { return w },
			func(w string) string { return " " + strings.ToUpper(w[:1]) + w[1:] + " " },
			strings.ToUpper,
			func(w string) string { // fullwidth letters (NFKC)
				return strings.Map(func(r rune) rune { return r + 0xFEE0 }, w)
			},
		}
		for i := range 12 { // one username from many addresses: login_user
			attempts = append(attempts, attempt{client: 10 + i, user: spellings[i%4]})
		}
		// Denied attempts charged nothing: this address still logs in.
		attempts = append(attempts, attempt{client: 20, user: func(w string) string { return "someone" + w }})
		forged := map[string]string{"X-Forwarded-For": "198.51.100.99", "X-Original-URI": "/healthz", "X-Forwarded-Uri": "/healthz", "X-Forwarded-Method": "GET"}
		// Each run has addresses and usernames of its own: the two doors share one budget.
		answers := func(net3 int, base, word string) []reply {
			var out []reply
			for _, a := range attempts {
				name := a.user(word)
				h := map[string]string{"X-Login-User": name}
				for k, v := range forged {
					h[k] = v
				}
				body, _ := json.Marshal(map[string]string{"username": name, "password": "guess"})
				out = append(out, send(t, clientFrom(fmt.Sprintf("127.0.%d.%d", net3, a.client)), "POST", base+"/login", string(body), h))
			}
			return out
		}
		direct := answers(1, direct, "victim") // the embedded middleware in front of the demo login
		via := answers(2, front, "quarry")
		// The runs happen one after the other on the real clock: the seconds
		// until a slot frees may differ by the time between them.
		seconds := regexp.MustCompile(`t=\d+|retry in \d+s|"retry_after_sec":\d+`)
		timeless := func(s string) string { return seconds.ReplaceAllString(s, "N") }
		for i := range attempts {
			d, v := direct[i], via[i]
			for _, h := range []string{"RateLimit-Policy", "RateLimit", "X-RateLimit-Limit", "X-RateLimit-Remaining", "Content-Type"} {
				if timeless(d.header.Get(h)) != timeless(v.header.Get(h)) {
					t.Errorf("attempt %d: %s %s %q, embedded %q", i, h, gateway, v.header.Get(h), d.header.Get(h))
				}
			}
			dr, _ := strconv.Atoi(d.header.Get("Retry-After"))
			vr, _ := strconv.Atoi(v.header.Get("Retry-After"))
			if (dr == 0) != (vr == 0) || vr > dr+30 || vr < dr-30 {
				t.Errorf("attempt %d: Retry-After %s %d, embedded %d", i, gateway, vr, dr)
			}
			if d.status != v.status || timeless(d.body) != timeless(v.body) {
				t.Errorf("attempt %d: %s %d %s, embedded %d %s", i, gateway, v.status, v.body, d.status, d.body)
			}
		}
		want := map[int]string{10: "login_ip", 11: "login_ip", 22: "login_user", 23: "login_user"}
		for i, v := range via {
			if p, denied := want[i]; denied {
				if v.status != 429 || !strings.Contains(v.body, `"policy":"`+p+`"`) {
					t.Errorf("attempt %d %s: %d %s, want 429 by %s", i, gateway, v.status, v.body, p)
				}
			} else if v.status != 401 || !strings.Contains(v.body, "invalid_credentials") {
				t.Errorf("attempt %d %s: %d %s, want the service's 401", i, gateway, v.status, v.body)
			}
		}
	})
}

// envoyRoutes loads docs/gateways.md's Envoy config into Envoy's own types
// (protojson, then the generated validation) and returns the domain of its
// rate-limit filter and its routes.
func envoyRoutes(t *testing.T) (string, []*routev3.Route) {
	domain, hcm := envoyListener(t)
	return domain, hcm.GetRouteConfig().GetVirtualHosts()[0].GetRoutes()
}

// envoyListener loads docs/gateways.md's Envoy config as envoyRoutes does and
// returns its HTTP connection manager.
func envoyListener(t *testing.T) (string, *hcmv3.HttpConnectionManager) {
	t.Helper()
	js, err := yaml.YAMLToJSON([]byte(gatewayBlock(t, "<!-- the Envoy config of TestGatewaysShareOneBudget -->")))
	if err != nil {
		t.Fatal(err)
	}
	var boot bootstrapv3.Bootstrap
	if err := protojson.Unmarshal(js, &boot); err != nil {
		t.Fatalf("docs/gateways.md's Envoy config: %v", err)
	}
	if err := boot.ValidateAll(); err != nil {
		t.Fatalf("docs/gateways.md's Envoy config: %v", err)
	}
	var hcm hcmv3.HttpConnectionManager
	if err := boot.GetStaticResources().GetListeners()[0].GetFilterChains()[0].GetFilters()[0].GetTypedConfig().UnmarshalTo(&hcm); err != nil {
		t.Fatal(err)
	}
	var rl ratelimitv3.RateLimit
	if err := hcm.GetHttpFilters()[0].GetTypedConfig().UnmarshalTo(&rl); err != nil {
		t.Fatal(err)
	}
	if rl.GetRateLimitService().GetGrpcService().GetEnvoyGrpc().GetClusterName() != "costgate" {
		t.Fatalf("the rate-limit filter calls %v", rl.GetRateLimitService())
	}
	return rl.GetDomain(), &hcm
}

// envoyRequest is what Envoy's actions read of a request.
type envoyRequest struct {
	method, path, remote string
	header               map[string]string // lower-case names
}

// envoyDescriptors produces, for r, the descriptors the rate_limits of the
// route Envoy would pick produce, as Envoy's generic_key, remote_address and
// request_headers actions do.
func envoyDescriptors(t *testing.T, routes []*routev3.Route, r envoyRequest) []*rlcommon.RateLimitDescriptor {
	t.Helper()
	for _, rt := range routes {
		if !envoyMatches(t, rt.GetMatch(), r) {
			continue
		}
		var out []*rlcommon.RateLimitDescriptor
	limits:
		for _, rl := range rt.GetRoute().GetRateLimits() {
			d := &rlcommon.RateLimitDescriptor{}
			add := func(k, v string) {
				d.Entries = append(d.Entries, &rlcommon.RateLimitDescriptor_Entry{Key: k, Value: v})
			}
			for _, a := range rl.GetActions() {
				switch {
				case a.GetGenericKey() != nil:
					add(cmpOr(a.GetGenericKey().GetDescriptorKey(), "generic_key"), a.GetGenericKey().GetDescriptorValue())
				case a.GetRemoteAddress() != nil:
					add("remote_address", r.remote)
				case a.GetRequestHeaders() != nil:
					rh := a.GetRequestHeaders()
					v, ok := r.header[strings.ToLower(rh.GetHeaderName())]
					switch {
					case ok:
						add(rh.GetDescriptorKey(), v)
					case !rh.GetSkipIfAbsent():
						continue limits // Envoy sends no descriptor
					}
				default:
					t.Fatalf("action %v is not simulated", a)
				}
			}
			out = append(out, d)
		}
		return out
	}
	return nil
}

// envoyMatches reports whether a route's match takes r, as Envoy's path,
// prefix, path_separated_prefix (both with case_sensitive), safe_regex
// (the whole path, no query) and exact header matchers decide.
func envoyMatches(t *testing.T, m *routev3.RouteMatch, r envoyRequest) bool {
	t.Helper()
	p, _, _ := strings.Cut(r.path, "?")
	fold := m.GetCaseSensitive() != nil && !m.GetCaseSensitive().GetValue()
	same := func(a, b string) bool { return a == b || fold && strings.EqualFold(a, b) }
	switch spec := m.GetPathSpecifier().(type) {
	case *routev3.RouteMatch_Path:
		if !same(p, spec.Path) {
			return false
		}
	case *routev3.RouteMatch_Prefix:
		if len(r.path) < len(spec.Prefix) || !same(r.path[:len(spec.Prefix)], spec.Prefix) {
			return false
		}
	case *routev3.RouteMatch_PathSeparatedPrefix:
		pre := spec.PathSeparatedPrefix
		if len(p) < len(pre) || !same(p[:len(pre)], pre) || len(p) > len(pre) && p[len(pre)] != '/' {
			return false
		}
	case *routev3.RouteMatch_SafeRegex:
		if !regexp.MustCompile(`^(?:` + spec.SafeRegex.GetRegex() + `)$`).MatchString(p) {
			return false
		}
	default:
		t.Fatalf("path matcher %T is not simulated", spec)
	}
	for _, h := range m.GetHeaders() {
		if h.GetName() != ":method" {
			t.Fatalf("header matcher on %s is not simulated", h.GetName())
		}
		sm := h.GetStringMatch()
		if sm.GetExact() != r.method && !(sm.GetIgnoreCase() && strings.EqualFold(sm.GetExact(), r.method)) {
			return false
		}
	}
	return true
}

// envoyPath is the path Envoy's HTTP connection manager routes for a
// request path: normalize_path (RFC 3986 dot segments, escapes of
// unreserved characters decoded), merge_slashes, and
// path_with_escaped_slashes_action (a redirect is followed: the path the
// client then sends is routed). rejected: Envoy answers 400 itself.
func envoyPath(hcm *hcmv3.HttpConnectionManager, target string) (path string, rejected bool) {
	p, query, hasQuery := strings.Cut(target, "?")
	for range 2 { // the request, and the one a redirect makes
		if hcm.GetNormalizePath().GetValue() {
			p = removeDotSegments(decodeUnreserved(p))
		}
		if hcm.GetMergeSlashes() {
			for strings.Contains(p, "//") {
				p = strings.ReplaceAll(p, "//", "/")
			}
		}
		escaped := regexp.MustCompile(`(?i)%2f|%5c`)
		if !escaped.MatchString(p) {
			break
		}
		switch hcm.GetPathWithEscapedSlashesAction() {
		case hcmv3.HttpConnectionManager_REJECT_REQUEST:
			return "", true
		case hcmv3.HttpConnectionManager_UNESCAPE_AND_REDIRECT, hcmv3.HttpConnectionManager_UNESCAPE_AND_FORWARD:
			p = escaped.ReplaceAllStringFunc(p, func(e string) string {
				if strings.EqualFold(e, "%2f") {
					return "/"
				}
				return `\`
			})
			continue
		}
		break
	}
	if hasQuery {
		p += "?" + query
	}
	return p, false
}

// decodeUnreserved decodes the escapes of unreserved characters (RFC 3986
// section 6.2.2.2), as Envoy's path normalisation does.
func decodeUnreserved(p string) string {
	return regexp.MustCompile(`%[0-9A-Fa-f]{2}`).ReplaceAllStringFunc(p, func(e string) string {
		b, _ := strconv.ParseUint(e[1:], 16, 8)
		if c := byte(b); c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-._~", c) >= 0 {
			return string(c)
		}
		return strings.ToUpper(e)
	})
}

// removeDotSegments is RFC 3986 section 5.2.4 on an absolute path.
func removeDotSegments(p string) string {
	var out []string
	segs := strings.Split(p, "/")[1:]
	for i, seg := range segs {
		last := i == len(segs)-1
		switch seg {
		case ".":
			if last {
				out = append(out, "")
			}
		case "..":
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
			if last {
				out = append(out, "")
			}
		default:
			out = append(out, seg)
		}
	}
	return "/" + strings.Join(out, "/")
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// The same limits through the embedded middleware, /v1/check and Envoy's
// gRPC share one budget: one key per client and policy in Redis, whichever
// door spends it. Both gateways run docs/gateways.md's configs: costgate's
// envoy section, and Envoy's own config, loaded into Envoy's types, whose
// actions produce the descriptors sent.
func TestGatewaysShareOneBudget(t *testing.T) {
	domain, routes := envoyRoutes(t)
	rds := redistest.StartServer(t)
	cfg := substitute(t, gatewayBlock(t, "<!-- the costgate config of TestGatewaysShareOneBudget -->"),
		`trusted_proxies: ["10.0.0.0/8"]`, `trusted_proxies: ["127.0.0.1/32"]`,
		`grpc_listen: ":8081"`, `grpc_listen: "127.0.0.1:0"`,
		`  hash_key: "a long random secret shared by every gateway"`,
		"  hash_key: \"a long random secret shared by every gateway\"\n  api_keys:\n    demo-free: {tenant: acme, plan: free}")
	cfg += strings.Replace(gatewayConfig, "identity:\n  trusted_proxies: [\"127.0.0.1/32\"]\n  api_keys:\n    demo-free: {tenant: acme, plan: free}\ngateway: {username_header: X-Login-User}\n", "", 1)
	env := []string{"COSTGATE_CONFIG=" + writeConfig(t, cfg), "COSTGATE_REDIS_URL=redis://" + rds.Addr() + "/0"}
	embedded := start(t, env, "-addr", "127.0.0.1:0") // its /api and /login: the middleware
	gw := start(t, env, "-addr", "127.0.0.1:0")       // its /v1/check and gRPC (grpc_listen)
	rls := dialGRPC(t, gw.GRPC(t))
	c := clientFrom("127.0.0.1") // a trusted proxy: X-Forwarded-For names the client

	type door func(client, apiKey string) (allowed bool, remaining string)
	middleware := func(client, apiKey string) (bool, string) {
		r := send(t, c, "GET", "http://"+embedded.Host+"/api/products", "", map[string]string{"X-Forwarded-For": client, "X-API-Key": apiKey})
		return r.status == 200, r.header.Get("X-RateLimit-Remaining")
	}
	check := func(client, apiKey string) (bool, string) {
		r := send(t, c, "GET", "http://"+gw.Host+"/v1/check", "", map[string]string{"X-Forwarded-Method": "GET",
			"X-Forwarded-Uri": "/api/products", "X-Forwarded-For": client, "X-API-Key": apiKey})
		return r.status == 200, r.header.Get("X-RateLimit-Remaining")
	}
	envoy := func(client, apiKey string) (bool, string) {
		h := map[string]string{}
		if apiKey != "" {
			h["x-api-key"] = apiKey
		}
		resp := callRLS(t, rls, domain, envoyDescriptors(t, routes, envoyRequest{method: "GET", path: "/api/products", remote: client, header: h}))
		return resp.GetOverallCode() == rlsv3.RateLimitResponse_OK, headerValue(resp, "X-RateLimit-Remaining")
	}
	doors := []struct {
		name string
		door door
	}{{"middleware", middleware}, {"/v1/check", check}, {"gRPC", envoy}}

	// 50 through each door, then every door denies: 150 in all.
	for _, d := range doors {
		for range 50 {
			if ok, rem := d.door("203.0.113.7", ""); !ok {
				t.Fatalf("%s: denied with %s remaining", d.name, rem)
			}
		}
	}
	for _, d := range doors {
		if ok, rem := d.door("203.0.113.7", ""); ok || rem != "0" {
			t.Errorf("%s after 150 through the three doors: allowed %v, remaining %s", d.name, ok, rem)
		}
	}
	// An API key is one budget, its tenant's, through each door too.
	for i, d := range doors {
		if ok, rem := d.door("198.51.100."+strconv.Itoa(i+1), "demo-free"); !ok || rem != strconv.Itoa(149-i) {
			t.Errorf("%s with demo-free from another address: allowed %v remaining %s, want %d", d.name, ok, rem, 149-i)
		}
	}

	// Login by username: 4 attempts through the middleware, 3 through the
	// check, 3 through Envoy, each from its own address, spelt differently:
	// the 11th, through any door, is over login_user.
	login := func(door int, client, user string) bool {
		switch door {
		case 0:
			body, _ := json.Marshal(map[string]string{"username": user, "password": "guess"})
			return send(t, c, "POST", "http://"+embedded.Host+"/login", string(body), map[string]string{"X-Forwarded-For": client}).status != 429
		case 1:
			return send(t, c, "GET", "http://"+gw.Host+"/v1/check", "", map[string]string{"X-Forwarded-Method": "POST",
				"X-Forwarded-Uri": "/login", "X-Forwarded-For": client, "X-Login-User": user}).status == 200
		}
		resp := callRLS(t, rls, domain, envoyDescriptors(t, routes, envoyRequest{method: "POST", path: "/login", remote: client,
			header: map[string]string{"x-login-user": user}}))
		return resp.GetOverallCode() == rlsv3.RateLimitResponse_OK
	}
	for i, door := range []int{0, 0, 0, 0, 1, 1, 1, 2, 2, 2} {
		if !login(door, fmt.Sprintf("192.0.2.%d", i+1), []string{"alice", "Alice", " ALICE "}[i%3]) {
			t.Fatalf("login attempt %d (door %d) denied", i, door)
		}
	}
	for door := range 3 {
		if login(door, fmt.Sprintf("192.0.2.%d", 100+door), "alice") {
			t.Errorf("login through door %d after 10 attempts at alice: allowed", door)
		}
	}

	// One key space: one state per client and policy, whichever door wrote it.
	keys, err := rds.Client().Keys(t.Context(), "rl:{*").Result()
	if err != nil {
		t.Fatal(err)
	}
	// A key is rl:{digest}SUFFIX, the suffix naming the algorithm: t for
	// api's token bucket, g and m for the logins' sliding logs.
	tags := map[string]bool{}
	for _, k := range keys {
		end := strings.IndexByte(k, '}')
		tags[k[:end+1]+k[end+1:end+2]] = true
	}
	var api, logins int
	for tag := range tags {
		switch tag[len(tag)-1] {
		case 't':
			api++
		case 'g':
			logins++
		}
	}
	// api: 203.0.113.7, the acme tenant; login_ip: the ten addresses whose
	// logins were allowed (the last three were denied and undone);
	// login_user: alice, however each door spelt her.
	if api != 2 || logins != 11 {
		t.Errorf("state for %d api and %d login identities, want 2 and 11: %v", api, logins, keys)
	}
}

func dialGRPC(t *testing.T, addr string) rlsv3.RateLimitServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return rlsv3.NewRateLimitServiceClient(conn)
}

func callRLS(t *testing.T, c rlsv3.RateLimitServiceClient, domain string, ds []*rlcommon.RateLimitDescriptor) *rlsv3.RateLimitResponse {
	t.Helper()
	if len(ds) == 0 {
		t.Fatal("the Envoy config produces no descriptor for the request")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	resp, err := c.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: domain, Descriptors: ds})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func headerValue(resp *rlsv3.RateLimitResponse, name string) string {
	for _, h := range resp.GetResponseHeadersToAdd() {
		if strings.EqualFold(h.GetKey(), name) {
			return h.GetValue()
		}
	}
	return ""
}

// rawRequest sends one request with its request line exactly as given (no
// client library to clean it) from a loopback address of its own.
func rawRequest(t *testing.T, from, addr, method, target string, header map[string]string, body string) reply {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 10 * time.Second}
	conn, err := d.DialContext(t.Context(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	var req strings.Builder
	fmt.Fprintf(&req, "%s %s HTTP/1.1\r\nHost: shop.example\r\nConnection: close\r\nContent-Length: %d\r\n", method, target, len(body))
	for k, v := range header {
		fmt.Fprintf(&req, "%s: %s\r\n", k, v)
	}
	req.WriteString("\r\n" + body)
	if _, err := io.WriteString(conn, req.String()); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return reply{status: res.StatusCode, header: res.Header, body: strings.TrimSpace(string(b))}
}

// A username locked out by ten failed POST /login stays locked out through
// docs/gateways.md's nginx config whatever the spelling of the path: every
// spelling nginx passes on, which a forgiving upstream (Express, a servlet
// container, IIS) routes to its login handler, is answered 429 with the
// rate-limit headers and never reaches the upstream; the ones nginx refuses
// itself, and the ones the check refuses (read as two limited routes, or
// not decodable), never reach it either. Envoy's path_prefix form, which passes the
// method as the client sent it, denies "post" too.
func TestNginxEverySpellingOfALockedLogin(t *testing.T) {
	conf := gatewayBlock(t, "<!-- the nginx config of TestNginxInFront -->")
	var mu sync.Mutex
	var reached []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		reached = append(reached, r.Method+" "+r.RequestURI)
		mu.Unlock()
		w.WriteHeader(http.StatusUnauthorized) // a login handler that routes every spelling: wrong password
	}))
	t.Cleanup(up.Close)
	at := start(t, nil, "-addr", "127.0.0.1:0", "-config", writeConfig(t, gatewayConfig))
	ngx := nginxtest.Start(t, func(listen string) string {
		return substitute(t, conf,
			"server 127.0.0.1:8080;", "server "+at.Host+";",
			"proxy_pass http://127.0.0.1:9000;", "proxy_pass "+up.URL+";",
			"listen 80;", "listen "+listen+";")
	})
	victim := map[string]string{"X-Login-User": "victim", "Content-Type": "application/json"}
	const body = `{"username":"victim","password":"guess"}`
	for i := range 10 {
		if r := rawRequest(t, fmt.Sprintf("127.0.3.%d", i+1), ngx.Addr, "POST", "/login", victim, body); r.status != 401 {
			t.Fatalf("attempt %d: %d %s, want the upstream's 401", i, r.status, r.body)
		}
	}
	mu.Lock()
	reached = nil
	mu.Unlock()

	denied := func(r reply) bool {
		return r.status == 429 && strings.Contains(r.body, `"policy":"login_user"`) && r.header.Get("X-RateLimit-Remaining") == "0" &&
			r.header.Get("Retry-After") != "" && strings.Contains(r.header.Get("RateLimit-Policy"), `"login_user"`)
	}
	for i, target := range []string{"/login", "/login/", "/LOGIN", "/Login/", "/login;x=1", "/login;jsessionid=A1", "/login%2f", "/login%2F",
		"/login%252f", "//login", "/./login", "/login/.", "/x/../login", "/x/..;/login", "/api%2f..%2flogin", `/login\`, `/api\..\login`,
		"/login%5C", "/%6Cogin", "/log%C4%B1n", "/login.json", "/login?next=/", "/login%3Fnext=x"} {
		r := rawRequest(t, fmt.Sprintf("127.0.4.%d", i+1), ngx.Addr, "POST", target, victim, body)
		if !denied(r) {
			t.Errorf("POST %s through nginx: %d %v %s, want 429 by login_user with the rate-limit headers", target, r.status, r.header, r.body)
		}
	}
	// nginx refuses these itself (400): a lower-case method, a NUL, a path above the root.
	for _, rq := range [][2]string{{"post", "/login"}, {"POST", "/login%00"}, {"POST", "/../login"}} {
		if r := rawRequest(t, "127.0.5.1", ngx.Addr, rq[0], rq[1], victim, body); r.status != 400 {
			t.Errorf("%s %s through nginx: %d %s, want nginx's own 400", rq[0], rq[1], r.status, r.body)
		}
	}
	// Paths servers read as two limited routes (POST /login to Tomcat, /api/*
	// to Express) and paths that do not decode: costgate refuses the check,
	// which nginx answers 500.
	for _, target := range []string{"/api/../login", "/api/..;/login", "/login%C0%AF", "/login%2525252f"} {
		if r := rawRequest(t, "127.0.5.2", ngx.Addr, "POST", target, victim, body); r.status != 500 {
			t.Errorf("POST %s through nginx: %d %s, want 500 (the check refused)", target, r.status, r.body)
		}
	}
	mu.Lock()
	if len(reached) > 0 {
		t.Errorf("the upstream was reached by %q", reached)
	}
	mu.Unlock()

	// Envoy's path_prefix form: the check's own method and path are the original's.
	trusted := map[string]string{"X-Forwarded-For": "198.51.100.1", "X-Login-User": "victim"}
	for _, method := range []string{"POST", "post", "Post"} {
		for _, path := range []string{"/login", "/LOGIN/", "/login;x=1", "/login%2f"} {
			if r := rawRequest(t, "127.0.0.1", at.Host, method, "/v1/check"+path, trusted, ""); !denied(r) {
				t.Errorf("%s /v1/check%s: %d %v %s, want 429 by login_user", method, path, r.status, r.header, r.body)
			}
		}
	}
}

// Every spelling of POST /login that docs/gateways.md's Envoy config lets reach
// a forgiving upstream produces the login descriptors, and every spelling
// of /api/* the api ones: a near miss never goes unlimited through the gRPC
// door, where costgate does not see the path.
func TestEnvoyConfigLimitsEverySpellingOfARoute(t *testing.T) {
	domain, hcm := envoyListener(t)
	routes := hcm.GetRouteConfig().GetVirtualHosts()[0].GetRoutes()
	header := map[string]string{"x-login-user": "victim"}
	want := func(method, path string) []*rlcommon.RateLimitDescriptor {
		ds := envoyDescriptors(t, routes, envoyRequest{method: method, path: path, remote: "192.0.2.1", header: header})
		if len(ds) == 0 {
			t.Fatalf("%s %s: no descriptor", method, path)
		}
		return ds
	}
	for _, tc := range []struct {
		canonical string
		spellings []string
	}{
		{"/login", []string{"/login", "/LOGIN", "/Login", "/login/", "/LOGIN/", "//login", "/./login", "/x/../login", "/login/.",
			"/%6Cogin", "/login%2F", "/login%2f", "/login;jsessionid=A1", "/login.json", "/login?next=/"}},
		{"/api/products", []string{"/api/products", "/API/products", "/Api/Products/", "/api", "//api//products", "/api/x/../products", "/api%2Fproducts"}},
	} {
		method := "GET"
		if tc.canonical == "/login" {
			method = "POST"
		}
		canonical := want(method, tc.canonical)
		for _, m := range []string{method, strings.ToLower(method)} {
			for _, spelling := range tc.spellings {
				path, rejected := envoyPath(hcm, spelling)
				if rejected {
					continue // Envoy's own 400: the upstream never sees it
				}
				got := envoyDescriptors(t, routes, envoyRequest{method: m, path: path, remote: "192.0.2.1", header: header})
				if !slices.EqualFunc(got, canonical, func(a, b *rlcommon.RateLimitDescriptor) bool { return proto.Equal(a, b) }) {
					t.Errorf("%s %s (routed as %s) in domain %s: descriptors %v, want those of %s %s: %v", m, spelling, path, domain, got, method, tc.canonical, canonical)
				}
			}
		}
	}
	// Near misses no common backend routes to a limited handler stay apart.
	for _, p := range []string{"/logins", "/apix", "/v1/login"} {
		if ds := envoyDescriptors(t, routes, envoyRequest{method: "POST", path: p, remote: "192.0.2.1"}); len(ds) != 0 {
			t.Errorf("POST %s: descriptors %v, want none", p, ds)
		}
	}
}
