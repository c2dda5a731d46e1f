package server

import (
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/costgate/costgate/internal/config"
	"github.com/costgate/costgate/limiter/redistest"
)

// /readyz tells anyone whether the server is ready and the store's state;
// the store's addresses and error texts only a client on loopback or a
// trusted proxy itself sees, the client as the trusted-proxy walk resolves
// it: a public client a trusted proxy forwards does not (before, the TCP
// peer decided, and it did), and X-Forwarded-For from anyone else is not
// read.
func TestReadyzShowsStoreDetailsOnlyToTrustedPeers(t *testing.T) {
	RedisLogger(slog.New(slog.DiscardHandler)) // go-redis's dial errors, expected here
	redis := redistest.StartServer(t)
	cfg, err := config.Parse("test.yaml", []byte(`
store: {redis: {url: "redis://`+redis.Addr()+`/0"}}
identity:
  hash_key: "a-test-secret-of-32-bytes-length"
  trusted_proxies: ["192.0.2.0/24"]
policies:
  api: {algorithm: token_bucket, limit: 5, period: 1m, key: [ip]}
routes:
  - {match: "/api/*", policies: [api]}
graphql: {path: ""}
`))
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if err := redis.Stop(); err != nil {
		t.Fatal(err)
	}
	readyz := func(peer string, header map[string]string) (int, string) {
		t.Helper()
		r := httptest.NewRequest("GET", "/readyz", nil)
		r.RemoteAddr = peer
		for k, v := range header {
			r.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		var body struct {
			Status string
			Store  struct{ Kind, State string }
		}
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || body.Status != "ready" || body.Store.Kind != "redis" || body.Store.State != "down" {
			t.Errorf("/readyz from %s: %d %s; want ready, reporting redis down", peer, w.Code, w.Body)
		}
		return w.Code, w.Body.String()
	}
	for _, tc := range []struct {
		peer   string
		header map[string]string
	}{
		{"127.0.0.1:40000", nil},
		{"[::1]:40000", nil},
		{"192.0.2.7:40000", nil},
		{"192.0.2.7:40000", map[string]string{"X-Forwarded-For": "127.0.0.1"}},
		{"127.0.0.1:40000", map[string]string{"X-Forwarded-For": "198.51.100.9"}}, // an untrusted peer is the client
	} {
		if _, body := readyz(tc.peer, tc.header); !strings.Contains(body, redis.Addr()) || !strings.Contains(body, `"error":`) {
			t.Errorf("/readyz from %s %v (trusted) lacks the node's address or error: %s", tc.peer, tc.header, body)
		}
	}
	for _, tc := range []struct {
		peer   string
		header map[string]string
	}{
		{"198.51.100.7:40000", nil},
		{"[2001:db8::1]:40000", nil},
		{"198.51.100.7:40000", map[string]string{"X-Forwarded-For": "127.0.0.1", "X-Real-IP": "127.0.0.1"}},
		{"192.0.2.7:40000", map[string]string{"X-Forwarded-For": "198.51.100.9"}},
	} {
		code, body := readyz(tc.peer, tc.header)
		if code != 200 || strings.Contains(body, redis.Addr()) || strings.Contains(body, "refused") || strings.Contains(body, `"error"`) || strings.Contains(body, `"addr"`) {
			t.Errorf("/readyz from %s %v: %d %s; want 200 without addresses or error texts", tc.peer, tc.header, code, body)
		}
	}
}
