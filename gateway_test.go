package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/costgate/costgate/internal/demo"
	"github.com/costgate/costgate/internal/nginxtest"
)

// readmeBlock returns the fenced block of README.md that follows marker:
// the tests run the README's configs as they are, so the two cannot drift.
func readmeBlock(t *testing.T, marker string) string {
	t.Helper()
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), marker)
	if !ok {
		t.Fatalf("README.md has no %q", marker)
	}
	_, rest, ok = strings.Cut(rest, "```")
	if ok {
		_, rest, ok = strings.Cut(rest, "\n") // the info string
	}
	block, _, closed := strings.Cut(rest, "\n```")
	if !ok || !closed {
		t.Fatalf("no fenced block after %q in README.md", marker)
	}
	return block + "\n"
}

// substitute replaces each old text, which must occur exactly once.
func substitute(t testing.TB, s string, pairs ...string) string {
	t.Helper()
	for i := 0; i+1 < len(pairs); i += 2 {
		if n := strings.Count(s, pairs[i]); n != 1 {
			t.Fatalf("the README snippet has %q %d times, want once", pairs[i], n)
		}
		s = strings.Replace(s, pairs[i], pairs[i+1], 1)
	}
	return s
}

// startServerAt is startServer returning every address run listens on.
func startServerAt(t *testing.T, args []string, env map[string]string) listening {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan listening, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, args, func(k string) string { return env[k] }, io.Discard, nil, ready)
	}()
	select {
	case at := <-ready:
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("server stopped with %v", err)
			}
		})
		return at
	case err := <-done:
		cancel()
		t.Fatalf("server did not start: %v", err)
	}
	return listening{}
}

func writeConfig(t *testing.T, yaml string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "costgate.yaml")
	if err := os.WriteFile(f, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
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
		req.Header.Set(k, v)
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

// A real nginx, configured with the README's snippet, in front of a
// service, costgate as its auth_request: 150 at once, then 429 with
// Retry-After, the rate-limit headers and the JSON body reaching the
// client; the login limits per address and per username decision for
// decision what the embedded middleware answers; headers a client forges
// change nothing.
func TestNginxInFront(t *testing.T) {
	conf := readmeBlock(t, "<!-- the nginx config of TestNginxInFront -->")
	shop := http.NewServeMux()
	shop.HandleFunc("GET /api/products", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"products":[]}`)
	})
	shop.Handle("POST /login", demo.NewLogin())
	up := httptest.NewServer(shop)
	t.Cleanup(up.Close)
	at := startServerAt(t, []string{"-addr", "127.0.0.1:0", "-config", writeConfig(t, gatewayConfig)}, nil)
	ngx := nginxtest.Start(t, func(listen string) string {
		return substitute(t, conf,
			"server 127.0.0.1:8080;", "server "+at.HTTP+";",
			"proxy_pass http://127.0.0.1:9000;", "proxy_pass "+up.URL+";",
			"listen 80;", "listen "+listen+";")
	})
	front := "http://" + ngx.Addr

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
		direct := answers(1, "http://"+at.HTTP, "victim") // the embedded middleware in front of the demo login
		via := answers(2, front, "quarry")
		// The runs happen one after the other on the real clock: the seconds
		// until a slot frees may differ by the time between them.
		seconds := regexp.MustCompile(`t=\d+|retry in \d+s|"retry_after_sec":\d+`)
		timeless := func(s string) string { return seconds.ReplaceAllString(s, "N") }
		for i := range attempts {
			d, v := direct[i], via[i]
			for _, h := range []string{"RateLimit-Policy", "RateLimit", "X-RateLimit-Limit", "X-RateLimit-Remaining", "Content-Type"} {
				if timeless(d.header.Get(h)) != timeless(v.header.Get(h)) {
					t.Errorf("attempt %d: %s through nginx %q, embedded %q", i, h, v.header.Get(h), d.header.Get(h))
				}
			}
			dr, _ := strconv.Atoi(d.header.Get("Retry-After"))
			vr, _ := strconv.Atoi(v.header.Get("Retry-After"))
			if (dr == 0) != (vr == 0) || vr > dr+30 || vr < dr-30 {
				t.Errorf("attempt %d: Retry-After through nginx %d, embedded %d", i, vr, dr)
			}
			if d.status != v.status || timeless(d.body) != timeless(v.body) {
				t.Errorf("attempt %d: through nginx %d %s, embedded %d %s", i, v.status, v.body, d.status, d.body)
			}
		}
		want := map[int]string{10: "login_ip", 11: "login_ip", 22: "login_user", 23: "login_user"}
		for i, v := range via {
			if p, denied := want[i]; denied {
				if v.status != 429 || !strings.Contains(v.body, `"policy":"`+p+`"`) {
					t.Errorf("attempt %d through nginx: %d %s, want 429 by %s", i, v.status, v.body, p)
				}
			} else if v.status != 401 || !strings.Contains(v.body, "invalid_credentials") {
				t.Errorf("attempt %d through nginx: %d %s, want the service's 401", i, v.status, v.body)
			}
		}
	})
	if strings.Contains(ngx.Log(), "auth request unexpected status") {
		t.Errorf("nginx could not relay a check:\n%s", ngx.Log())
	}
}
