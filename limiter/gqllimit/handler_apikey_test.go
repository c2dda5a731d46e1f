package gqllimit_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql/handler/transport"

	"github.com/costgate/costgate/limiter/gqllimit"
	"github.com/costgate/costgate/limiter/identity"
)

// withKey is a POST of `{ __typename }` from addr, sending key as X-API-Key.
func withKey(addr, key string) *http.Request {
	req := postFrom(addr, map[string]any{"query": `{ __typename }`})
	if key != "" {
		req.Header.Set("X-API-Key", key)
	}
	return req
}

// An application that already sends X-API-Key for its own use keeps
// working when it adds Handler without configuring API keys: the header is
// not an identity, gqlgen answers as it does without costgate, and the
// request is charged to its client address like any other (issue 28).
func TestHandlerWithoutKeysIgnoresAPIKeyHeader(t *testing.T) {
	var resolved atomic.Int64
	h := gqllimit.Handler(initServer(&resolved), gqllimit.Budget(1, time.Hour, 10))

	steps := []struct {
		addr, key, remaining string
	}{
		{"192.0.2.1:1", "the-apps-own-token", "9"},
		{"192.0.2.1:2", "", "8"},                   // the same address, without the header: the same bucket
		{"192.0.2.1:3", "another-token", "7"},      // another value: still the address's bucket
		{"192.0.2.2:1", "the-apps-own-token", "9"}, // the same value from another address: its own bucket
		{"192.0.2.3:1", "", "9"},
	}
	for i, s := range steps {
		a := serve(t, h, withKey(s.addr, s.key))
		if a.status != http.StatusOK || len(a.Errors) > 0 || string(a.Data) != `{"__typename":"Query"}` {
			t.Fatalf("step %d (%s, key %q): %d %+v %s, want gqlgen's answer", i, s.addr, s.key, a.status, a.Errors, a.Data)
		}
		if got := a.header.Get("X-RateLimit-Remaining"); got != s.remaining {
			t.Fatalf("step %d (%s, key %q): X-RateLimit-Remaining %q, want %s", i, s.addr, s.key, got, s.remaining)
		}
	}
	if resolved.Load() != int64(len(steps)) {
		t.Fatalf("%d operations ran, want %d", resolved.Load(), len(steps))
	}
	// An over-long or non-ASCII value is no key either: still the address's bucket.
	if a := serve(t, h, withKey("192.0.2.3:2", "caf\u00e9 \x7f")); a.status != http.StatusOK || a.header.Get("X-RateLimit-Remaining") != "8" {
		t.Fatalf("a value that cannot be a key: %d %+v remaining %q, want 200 charged to the address", a.status, a.Errors, a.header.Get("X-RateLimit-Remaining"))
	}
	// Limiting stays on: the address's budget runs out, header or not.
	for range 8 {
		serve(t, h, withKey("192.0.2.3:3", "the-apps-own-token"))
	}
	if a := serve(t, h, withKey("192.0.2.3:4", "yet-another")); a.status != http.StatusTooManyRequests || a.code() != gqllimit.CodeThrottled {
		t.Fatalf("over the address's budget with the header: %d %s, want 429 THROTTLED", a.status, a.code())
	}
}

// A websocket upgrade carrying the application's X-API-Key is served by
// gqlgen's transport when no API key is configured.
func TestHandlerWithoutKeysUpgradesWithAPIKeyHeader(t *testing.T) {
	var resolved atomic.Int64
	srv := initServer(&resolved)
	srv.AddTransport(transport.Websocket{})
	hs := httptest.NewServer(gqllimit.Handler(srv, gqllimit.Budget(1, time.Hour, 10)))
	t.Cleanup(hs.Close)
	dialWS(t, hs.URL, transportWS, "the-apps-own-token") // fails the test without connection_ack
}

// With API keys configured (WithIdentity), X-API-Key is an identity as
// before: a known key pays from its own bucket, an unknown one is answered
// 401 and charged to its address, over HTTP and at a websocket upgrade.
func TestHandlerWithKeysRefusesUnknownAPIKey(t *testing.T) {
	ids, err := identity.New(identity.Config{HashKey: []byte("handler-test-hash-key"),
		APIKeys: identity.Table{"demo-free": {Tenant: "acme", Plan: "free"}}})
	if err != nil {
		t.Fatal(err)
	}
	var resolved atomic.Int64
	srv := initServer(&resolved)
	srv.AddTransport(transport.Websocket{})
	h := gqllimit.Handler(srv, gqllimit.Budget(1, time.Hour, 10), gqllimit.WithIdentity(ids))

	if a := serve(t, h, withKey("192.0.2.1:1", "guess")); a.status != http.StatusUnauthorized || a.code() != gqllimit.CodeUnauthenticated {
		t.Fatalf("an unknown key: %d %s, want 401 UNAUTHENTICATED", a.status, a.code())
	}
	if a := serve(t, h, withKey("192.0.2.1:2", "")); a.status != http.StatusOK || a.header.Get("X-RateLimit-Remaining") != "8" {
		t.Fatalf("the guesser's address without a key: %d remaining %q, want 200 and 8 (the guess charged 1)", a.status, a.header.Get("X-RateLimit-Remaining"))
	}
	if a := serve(t, h, withKey("192.0.2.1:3", "demo-free")); a.status != http.StatusOK || len(a.Errors) > 0 || a.header.Get("X-RateLimit-Remaining") != "9" {
		t.Fatalf("a known key: %d %+v remaining %q, want 200 from its own bucket (9)", a.status, a.Errors, a.header.Get("X-RateLimit-Remaining"))
	}
	if resolved.Load() != 2 {
		t.Fatalf("%d operations ran, want 2 (the unknown key's did not)", resolved.Load())
	}
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	if _, err := tryDialWS(t, hs.URL, transportWS, "guess"); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("upgrade with an unknown key: %v, want a 401", err)
	}
}
