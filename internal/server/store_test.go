package server

import (
	"log/slog"
	"net"
	"strings"
	"testing"

	"github.com/costgate/costgate/internal/config"
	"github.com/costgate/costgate/internal/syncbuf"
)

// A Redis that does not answer at start does not stop the server, but the
// log says so in costgate's own words: which store and address, that it
// keeps trying, and what each policy does meanwhile.
func TestUnreachableRedisAtStartIsLogged(t *testing.T) {
	RedisLogger(slog.New(slog.DiscardHandler)) // go-redis's dial errors, expected here
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: connections are refused
	cfg, err := config.Parse("test.yaml", []byte(`
store: {redis: {url: "redis://:secret-password@`+addr+`/0"}}
identity: {hash_key: "a-test-secret-of-32-bytes-length"}
policies:
  api:      {algorithm: token_bucket, limit: 5, period: 1m, key: [ip]}
  login_ip: {algorithm: sliding_log, limit: 5, period: 1m, key: [ip], on_store_error: deny}
  search:   {algorithm: token_bucket, limit: 5, period: 1m, key: [ip], on_store_error: local}
routes:
  - {match: "/api/*", policies: [api]}
  - {match: "POST /login", policies: [login_ip]}
  - {match: "/search", policies: [search]}
graphql: {path: ""}
`))
	if err != nil {
		t.Fatal(err)
	}
	var log syncbuf.Buffer // the store logs from goroutines of its own too
	s, err := New(cfg, slog.New(slog.NewTextHandler(&log, nil)))
	if err != nil {
		t.Fatalf("the server refused to start without Redis: %v", err)
	}
	t.Cleanup(s.Close)
	var line string
	for l := range strings.Lines(log.String()) {
		if strings.Contains(l, "Redis does not answer at start") {
			line = l
		}
	}
	if line == "" {
		t.Fatalf("no line of costgate's own about Redis; the log:\n%s", log.String())
	}
	for _, want := range []string{"store=redis", "addr=" + addr, "keeps trying", "allow=api", "deny=login_ip", "local=search", "connection refused"} {
		if !strings.Contains(line, want) {
			t.Errorf("the line lacks %q:\n%s", want, line)
		}
	}
	if strings.Contains(log.String(), "secret-password") {
		t.Errorf("the log shows the Redis password:\n%s", log.String())
	}
}
