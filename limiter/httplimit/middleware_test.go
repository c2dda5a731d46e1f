package httplimit_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/httplimit"
	"github.com/costgate/costgate/limiter/redistest"
)

// The API tier: an idle key sends 150 requests at once and all pass; the
// 151st is 429 with Retry-After 1. Then sustained traffic gets 1000 a
// minute, 16.67/s.
func TestAPITierBurstAndSustainedRate(t *testing.T) {
	key := map[string]string{"X-API-Key": "demo-free"}
	var s *testServer
	// The first requests' bucket lives 60ms on Redis's real clock (a token's
	// refill): where Redis expired it during the burst, the machine stalled
	// longer than that, and the burst is sent again on a fresh store.
	for attempt := 1; ; attempt++ {
		s = newTestServer(t, serverOpts{})
		expired := s.expiries(t)
		codes := make([]int, 150)
		var wg sync.WaitGroup
		for i := range codes {
			wg.Go(func() { codes[i] = s.do(request{path: "/api/products", header: key}).Code })
		}
		wg.Wait()
		for i, c := range codes {
			if c != http.StatusOK {
				t.Fatalf("request %d of the burst: status %d, want 200", i, c)
			}
		}
		keys := expired()
		if len(keys) == 0 {
			break
		}
		if attempt == 3 {
			t.Fatalf("Redis expired the bucket during each of %d bursts (%v): the machine is too slow for this test", attempt, keys)
		}
		t.Logf("burst %d: Redis expired %v meanwhile; sending it again", attempt, keys)
	}
	w := s.do(request{path: "/api/products/7", header: key})
	if w.Code != http.StatusTooManyRequests {
		t.Fatalf("151st request: status %d, want 429", w.Code)
	}
	if got := w.Header().Get("Retry-After"); got != "1" {
		t.Errorf("Retry-After = %q, want 1 (a token every 60ms, rounded up)", got)
	}
	e := decodeError(t, w)
	if e.Error != "rate_limit" || e.Policy != "api" || e.RetryAfterSec != 1 {
		t.Errorf("429 body %+v, want rate_limit, policy api, retry_after_sec 1", e)
	}
	for h, want := range map[string]string{
		"X-RateLimit-Limit":     "150",
		"X-RateLimit-Remaining": "0",
		"RateLimit-Policy":      `"api";q=150;w=9`,
		"RateLimit":             `"api";r=0;t=1`,
	} {
		if got := w.Header().Get(h); got != want {
			t.Errorf("%s = %q, want %q", h, got, want)
		}
	}

	// A minute of traffic at 100 requests a second, on the injected clock.
	allowed := 0
	for range 6000 {
		s.clock.Advance(10 * time.Millisecond)
		if s.do(request{path: "/api/products", header: key}).Code == http.StatusOK {
			allowed++
		}
	}
	if allowed != 1000 {
		t.Errorf("allowed %d in a minute of sustained traffic, want 1000 (16.67/s)", allowed)
	}
}

// Plans multiply limit and burst: the enterprise key gets 1500 at once.
func TestPlanMultipliesTheLimit(t *testing.T) {
	s := newTestServer(t, serverOpts{})
	key := map[string]string{"X-API-Key": "demo-enterprise"}
	w := s.do(request{path: "/api/products", header: key})
	if got := w.Header().Get("X-RateLimit-Limit"); got != "1500" {
		t.Errorf("enterprise X-RateLimit-Limit = %q, want 1500", got)
	}
	if got := w.Header().Get("RateLimit-Policy"); got != `"api";q=1500;w=9` {
		t.Errorf("enterprise RateLimit-Policy = %q", got)
	}
}

// Login: 10 attempts per IP in 5 minutes; the 11th is 429 with the wait
// until the oldest attempt leaves the window. And per username across many
// IPs, with the username normalized.
func TestLoginLimits(t *testing.T) {
	t.Run("per ip", func(t *testing.T) {
		s := newTestServer(t, serverOpts{})
		for i := range 10 {
			w := s.do(request{method: "POST", path: "/login", remote: "198.51.100.4:1000", body: fmt.Sprintf(`{"username":"user%d","password":"x"}`, i)})
			if w.Code != http.StatusUnauthorized {
				t.Fatalf("attempt %d: status %d, want the handler's 401", i, w.Code)
			}
			s.clock.Advance(time.Second)
		}
		w := s.do(request{method: "POST", path: "/login", remote: "198.51.100.4:1001", body: `{"username":"user99","password":"x"}`})
		if w.Code != http.StatusTooManyRequests {
			t.Fatalf("11th attempt: status %d, want 429", w.Code)
		}
		// The first attempt (t=0) leaves the window at 300s; now is 10s.
		if got := w.Header().Get("Retry-After"); got != "290" {
			t.Errorf("Retry-After = %q, want 290", got)
		}
		if e := decodeError(t, w); e.Policy != "login_ip" || e.RetryAfterSec != 290 {
			t.Errorf("body %+v, want policy login_ip, retry 290", e)
		}
	})
	t.Run("per username across IPs", func(t *testing.T) {
		s := newTestServer(t, serverOpts{})
		spellings := []string{"alice", "Alice", " ALICE ", "ａｌｉｃｅ", "alice\t"}
		for i := range 10 {
			body := fmt.Sprintf(`{"username":%q,"password":"x"}`, spellings[i%len(spellings)])
			w := s.do(request{method: "POST", path: "/login", remote: fmt.Sprintf("203.0.113.%d:1000", i), body: body})
			if w.Code != http.StatusUnauthorized {
				t.Fatalf("attempt %d: status %d, want 401", i, w.Code)
			}
		}
		w := s.do(request{method: "POST", path: "/login", remote: "192.0.2.200:1000", body: `{"username":"Alice","password":"x"}`})
		if w.Code != http.StatusTooManyRequests {
			t.Fatalf("11th attempt for alice from a new IP: status %d, want 429", w.Code)
		}
		if e := decodeError(t, w); e.Policy != "login_user" {
			t.Errorf("denied by %q, want login_user", e.Policy)
		}
		if got := w.Header().Get("RateLimit-Policy"); got != `"login_ip";q=10;w=300, "login_user";q=10;w=300` {
			t.Errorf("RateLimit-Policy = %q", got)
		}
		// The denied attempt consumed nothing from its IP's limit: 10 more
		// attempts for other users from that IP pass.
		for i := range 10 {
			w := s.do(request{method: "POST", path: "/login", remote: "192.0.2.200:1000", body: fmt.Sprintf(`{"username":"bob%d"}`, i)})
			if w.Code != http.StatusUnauthorized {
				t.Fatalf("attempt %d for bob from the same IP: status %d, want 401", i, w.Code)
			}
		}
	})
}

// X-Forwarded-For from an untrusted peer is ignored: 1000 random spoofed
// values from one peer share one bucket.
func TestSpoofedForwardedForSharesOneBucket(t *testing.T) {
	s := newTestServer(t, serverOpts{routes: []httplimit.Route{{Pattern: "/api/*", Policies: []*limiter.Policy{dayAPIPolicy()}}}})
	rng := rand.New(rand.NewPCG(1, 2))
	allowed := 0
	for range 1000 {
		xff := fmt.Sprintf("%d.%d.%d.%d", rng.IntN(256), rng.IntN(256), rng.IntN(256), rng.IntN(256))
		if s.do(request{path: "/api/products", remote: "203.0.113.50:4000", xff: xff}).Code == http.StatusOK {
			allowed++
		}
	}
	if allowed != 150 {
		t.Errorf("allowed %d of 1000 spoofed requests, want 150 (one bucket)", allowed)
	}
	if keys := s.storeKeys(t); len(keys) != 1 {
		t.Errorf("store keys %v, want exactly one", keys)
	}
}

// Through a trusted proxy, the right-most untrusted hop is the key: two
// clients behind one proxy get a bucket each.
func TestTrustedProxyForwardedFor(t *testing.T) {
	s := newTestServer(t, serverOpts{trusted: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
		routes: []httplimit.Route{{Pattern: "/api/*", Policies: []*limiter.Policy{dayAPIPolicy()}}}})
	for _, client := range []string{"198.51.100.1", "198.51.100.2"} {
		for i := range 150 {
			// The client prepends garbage of its own; the proxy appends what it saw.
			xff := fmt.Sprintf("1.2.3.%d, %s", i%250, client)
			if w := s.do(request{path: "/api/products", remote: "10.0.0.9:5000", xff: xff}); w.Code != http.StatusOK {
				t.Fatalf("%s request %d: status %d", client, i, w.Code)
			}
		}
		if w := s.do(request{path: "/api/products", remote: "10.0.0.9:5000", xff: client}); w.Code != http.StatusTooManyRequests {
			t.Errorf("%s 151st: status %d, want 429", client, w.Code)
		}
	}
}

// 100k random API keys: every answer is 401 (or 429 once the guessing
// address has spent its anonymous quota), and no limiter state is ever keyed
// by an unknown key: the store holds one key per guessing address.
func TestUnknownAPIKeysCreateNoState(t *testing.T) {
	// A day's period keeps an address's bucket for hours, however slowly a
	// busy machine gets through its thousand requests (a minute's kept it 9 s,
	// and two guesses too many were answered 401 on a loaded machine).
	slow := dayAPIPolicy()
	s := newTestServer(t, serverOpts{routes: []httplimit.Route{{Pattern: "/api/*", Policies: []*limiter.Policy{slow}}}})
	const addrs, perAddr, workers = 100, 1000, 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	counts := map[int]int{}
	next := make(chan int, addrs)
	for a := range addrs {
		next <- a
	}
	close(next)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for a := range next {
				rng := rand.New(rand.NewPCG(uint64(a), 7))
				local := map[int]int{}
				for range perAddr {
					key := strconv.FormatUint(rng.Uint64(), 36)
					w := s.do(request{path: "/api/products", remote: fmt.Sprintf("203.0.%d.%d:9", a/250, a%250), header: map[string]string{"X-API-Key": key}})
					local[w.Code]++
				}
				mu.Lock()
				for c, n := range local {
					counts[c] += n
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	// Each address: 150 guesses answered 401, then 429.
	if counts[http.StatusUnauthorized] != addrs*150 || counts[http.StatusTooManyRequests] != addrs*(perAddr-150) {
		t.Errorf("status counts %v, want %d×401 and %d×429", counts, addrs*150, addrs*(perAddr-150))
	}
	// Every key in the store is the anonymous bucket of a guessing address
	// (some may have expired already: a bucket's TTL is its refill time).
	want := map[string]bool{}
	for a := range addrs {
		r := httptest.NewRequest("GET", "/api/products", nil)
		r.RemoteAddr = fmt.Sprintf("203.0.%d.%d:9", a/250, a%250)
		id, err := s.ids.Resolve(r)
		if err != nil {
			t.Fatal(err)
		}
		want[s.store.Keys(slow, s.ids.Key(slow, id))[0]] = true
	}
	keys := s.storeKeys(t)
	if len(keys) == 0 {
		t.Fatal("no store keys at all: the guesses were not charged")
	}
	for _, k := range keys {
		if !want[k] {
			t.Errorf("store key %q is not the anonymous bucket of a guessing address", k)
		}
	}
}

// Shadow mode serves everything, counts would-be denials, and sends no
// rate-limit headers.
func TestShadowMode(t *testing.T) {
	p := dayAPIPolicy()
	p.Mode = limiter.Shadow
	s := newTestServer(t, serverOpts{routes: []httplimit.Route{{Pattern: "/api/*", Policies: []*limiter.Policy{p}}}})
	for i := range 200 {
		w := s.do(request{path: "/api/products"})
		if w.Code != http.StatusOK {
			t.Fatalf("request %d: status %d in shadow mode", i, w.Code)
		}
		for _, h := range []string{"X-RateLimit-Limit", "RateLimit", "RateLimit-Policy", "Retry-After"} {
			if v := w.Header().Get(h); v != "" {
				t.Fatalf("request %d: shadow mode sent %s: %s", i, h, v)
			}
		}
	}
	if got := s.events.count(limiter.ShadowDenied); got != 50 {
		t.Errorf("shadow denials counted: %d, want 50", got)
	}
}

// Malformed input answers 4xx with a JSON error, never a 500 or a panic,
// and the handler still gets an intact body when the limiter read it.
func TestMalformedInput(t *testing.T) {
	s := newTestServer(t, serverOpts{})
	tests := []struct {
		name string
		req  request
		code int
		err  string
	}{
		{"login body not JSON", request{method: "POST", path: "/login", body: "username=alice"}, 400, "bad_request"},
		{"login body JSON array", request{method: "POST", path: "/login", body: `["alice"]`}, 400, "bad_request"},
		{"login username not a string", request{method: "POST", path: "/login", body: `{"username":42}`}, 400, "bad_request"},
		{"login username missing", request{method: "POST", path: "/login", body: `{"password":"x"}`}, 400, "bad_request"},
		{"login username blank", request{method: "POST", path: "/login", body: `{"username":"  "}`}, 400, "bad_request"},
		{"login username invalid UTF-8", request{method: "POST", path: "/login", body: "{\"username\":\"\xff\"}"}, 400, "bad_request"},
		{"login empty body", request{method: "POST", path: "/login"}, 400, "bad_request"},
		{"login body too large", request{method: "POST", path: "/login", body: `{"username":"a","pad":"` + strings.Repeat("x", 70<<10) + `"}`}, 413, "body_too_large"},
		{"API key with control bytes", request{path: "/api/products", header: map[string]string{"X-API-Key": "demo-free\x01"}}, 401, "unauthorized"},
		{"API key with spaces", request{path: "/api/products", header: map[string]string{"X-API-Key": "demo free"}}, 401, "unauthorized"},
		{"API key empty", request{path: "/api/products", header: map[string]string{"X-API-Key": ""}}, 401, "unauthorized"},
		{"API key huge", request{path: "/api/products", header: map[string]string{"X-API-Key": strings.Repeat("k", 10000)}}, 401, "unauthorized"},
		{"API key non-ASCII", request{path: "/api/products", header: map[string]string{"X-API-Key": "démo"}}, 401, "unauthorized"},
		{"peer address garbage", request{path: "/api/products", remote: "not an address"}, 200, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := s.do(tc.req)
			if w.Code != tc.code {
				t.Fatalf("status %d, want %d; body %s", w.Code, tc.code, w.Body)
			}
			if tc.err != "" {
				if e := decodeError(t, w); e.Error != tc.err {
					t.Errorf("error %q, want %q", e.Error, tc.err)
				}
			}
		})
	}
	// A valid login body reaches the handler intact after the limiter read it.
	if w := s.do(request{method: "POST", path: "/login", body: `{"username":"carol","password":"pw"}`}); w.Code != http.StatusUnauthorized {
		t.Errorf("valid login: status %d, want the handler's 401 (%s)", w.Code, w.Body)
	}
}

// With Redis down, a fail-closed route (login) answers 503 with Retry-After
// and a JSON body; a fail-open route (api) serves.
func TestStoreDown(t *testing.T) {
	srv := redistest.StartServer(t)
	client := srv.Client(func(o *redis.Options) { o.ContextTimeoutEnabled = true; o.DialerRetries = 1 })
	s := newTestServer(t, serverOpts{redis: client})
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	w := s.do(request{method: "POST", path: "/login", body: `{"username":"dave"}`})
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
		t.Fatalf("login with Redis down: status %d, Retry-After %q; want 503 with Retry-After", w.Code, w.Header().Get("Retry-After"))
	}
	if e := decodeError(t, w); e.Error != "rate_limiter_unavailable" {
		t.Errorf("error %q, want rate_limiter_unavailable", e.Error)
	}
	if w := s.do(request{path: "/api/products"}); w.Code != http.StatusOK {
		t.Errorf("api with Redis down: status %d, want 200 (on_store_error: allow)", w.Code)
	}
}

// With the store down, on_store_error: local limits in process at
// limit/gateways and burst/gateways, and every header describes that local
// limit: X-RateLimit-Limit and RateLimit-Policy's q agree.
func TestLocalFallbackHeaders(t *testing.T) {
	srv := redistest.StartServer(t)
	client := srv.Client(func(o *redis.Options) { o.ContextTimeoutEnabled = true; o.DialerRetries = 1 })
	p := apiPolicy()
	p.OnStoreError = limiter.FailLocal
	s := newTestServer(t, serverOpts{redis: client, gateways: 3, routes: []httplimit.Route{{Pattern: "/api/*", Policies: []*limiter.Policy{p}}}})
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	// 150 / 3 = 50 at once; 1000 / 3 = 333 a minute: a whole bucket in ceil(50·60/333) = 10 s.
	admitted := 0
	for range 60 {
		w := s.do(request{path: "/api/products"})
		if w.Code == http.StatusOK {
			admitted++
		}
		if got := w.Header().Get("X-RateLimit-Limit"); got != "50" {
			t.Fatalf("X-RateLimit-Limit = %q in local mode, want 50", got)
		}
		if got := w.Header().Get("RateLimit-Policy"); got != `"api";q=50;w=10` {
			t.Fatalf("RateLimit-Policy = %q in local mode, want the local limit q=50;w=10", got)
		}
	}
	if admitted != 50 {
		t.Errorf("admitted %d in local mode, want 50 (burst/gateways)", admitted)
	}
}

// A leaky bucket shapes: a request over the rate waits for its turn
// instead of being rejected while the queue has room. At 2 a second with 3
// queued, three requests at once are served after 0, 500ms and 1s, and a
// fourth while they wait is refused. The store's clock is frozen, but Redis
// drops the queue's key on its own clock once it would have drained (500ms
// after the first request, 1.5s after the third): where the machine took
// longer than that to send the requests, the run is measured and not judged.
func TestLeakyBucketDelays(t *testing.T) {
	const interval = 500 * time.Millisecond
	p := &limiter.Policy{Name: "shape", Algorithm: limiter.LeakyBucket, Limit: 2, Period: 2 * interval, Burst: 3, Key: []string{"ip"}}
	s := newTestServer(t, serverOpts{routes: []httplimit.Route{{Pattern: "/api/*", Policies: []*limiter.Policy{p}}}})
	start := time.Now()
	var wg sync.WaitGroup
	codes, served := make([]int, 3), make([]time.Duration, 3)
	for i := range 3 {
		wg.Go(func() {
			codes[i] = s.do(request{path: "/api/products"}).Code
			served[i] = time.Since(start)
		})
	}
	// The three were decided (and wait their turn) once the observer saw them.
	for s.events.count(limiter.Allowed)+s.events.count(limiter.Denied) < 3 && time.Since(start) < time.Minute {
		time.Sleep(time.Millisecond)
	}
	decided := time.Since(start)
	fourth := s.do(request{path: "/api/products"}).Code
	fourthAt := time.Since(start)
	wg.Wait()
	slices.Sort(served)
	t.Logf("three requests decided within %s, served after %v; the fourth answered %d after %s", decided, served, fourth, fourthAt)
	for i, c := range codes {
		if c != http.StatusOK {
			t.Errorf("request %d of 3: status %d, want 200 after its wait", i, c)
		}
	}
	if decided < interval {
		for i, at := range served {
			if want := time.Duration(i) * interval; at < want {
				t.Errorf("request %d of 3 through a 2/s leaky bucket served after %s, want at least %s of shaping", i+1, at, want)
			}
		}
	} else {
		t.Logf("the machine took %s to send three requests, longer than the queue's key lives: their waits not judged", decided)
	}
	switch {
	case fourth == http.StatusTooManyRequests:
	case fourthAt >= 3*interval:
		t.Logf("the fourth request answered %d after %s, when the full queue's key may have expired: not judged", fourth, fourthAt)
	default:
		t.Errorf("fourth request with a full queue: status %d, want 429", fourth)
	}
}

// Requests no route matches are not limited and carry no headers.
func TestUnmatchedRoutePassesThrough(t *testing.T) {
	s := newTestServer(t, serverOpts{})
	for range 300 {
		w := s.do(request{path: "/healthz"})
		if w.Code != http.StatusOK || w.Header().Get("X-RateLimit-Limit") != "" {
			t.Fatalf("/healthz: %d with headers %v", w.Code, w.Header())
		}
	}
}
