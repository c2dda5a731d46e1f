package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"github.com/costgate/costgate/graph"
)

// What ran is charged, tried from outside as the repros were: the
// stock binary, real connections, the example shop's rows counted.

// embeddedConfig serves the example shop with a GraphQL bucket of burst that
// refills nothing in a test's time, and extra lines under graphql.
func embeddedConfig(t *testing.T, burst int, extra string) string {
	t.Helper()
	return writeConfig(t, fmt.Sprintf(`listen: "127.0.0.1:0"
policies:
  graphql: {algorithm: token_bucket, limit: 1, period: 24h, burst: %d, key: [tenant, api_key], on_store_error: allow}
graphql:
  policy: graphql
%s`, burst, extra))
}

// proxyTo is a proxy-mode config in front of upstream (a base URL) with the
// shop's schema and the same bucket.
func proxyTo(t *testing.T, upstream string, burst int) string {
	t.Helper()
	return embeddedConfig(t, burst, fmt.Sprintf("  schema: %q\n  upstream: %q\n", repoFile("graph/schema.graphqls"), upstream+"/graphql"))
}

// shopUpstream is the example shop as a plain gqlgen server, no limiter.
func shopUpstream(t *testing.T) *httptest.Server {
	t.Helper()
	srv := handler.New(graph.NewExecutableSchema(graph.Config{Resolvers: &graph.Resolver{Shop: graph.NewShop()}}))
	srv.AddTransport(transport.POST{})
	up := httptest.NewServer(srv)
	t.Cleanup(up.Close)
	return up
}

func graphQL(t *testing.T, base, query string, headers ...string) (int, answer) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query})
	res, text := postGraphQL(t, base, string(body), headers...)
	return res.StatusCode, readAnswer(t, text)
}

// reviewsOfP1 counts the rows the shop holds for p1's reviews.
func reviewsOfP1(t *testing.T, base string) int {
	t.Helper()
	_, a := graphQL(t, base, `{ product(id: "p1") { reviews(first: 100) { id } } }`)
	var data struct {
		Product struct{ Reviews []struct{ ID string } }
	}
	if err := json.Unmarshal(a.Data, &data); err != nil {
		t.Fatalf("reviews: %s", a.Data)
	}
	return len(data.Product.Reviews)
}

// reviewMutation is 29 createReview fields, then one that fails a non-null
// check (rating 0 is refused; createReview is Review!, so data is null).
func reviewMutation() string {
	var b strings.Builder
	b.WriteString("mutation {")
	for i := range 29 {
		fmt.Fprintf(&b, ` r%d: createReview(input: {productId: "p1", rating: 5, body: "fine"}) { id }`, i)
	}
	b.WriteString(` bad: createReview(input: {productId: "p1", rating: 0, body: "no"}) { id } }`)
	return b.String()
}

// The mutation repro, over every transport the binary serves, embedded and
// in proxy mode: the 29 reviews are written, data is null, and the 300
// charged (30 root mutation fields of 10) stay charged. Before, the reply's
// data: null priced it at 0 and all but 1 was refunded: 20 such requests
// wrote 580 reviews for about 20 tokens.
func TestBinaryMutationThatRanIsCharged(t *testing.T) {
	for _, tr := range []struct {
		name  string
		proxy bool
		send  func(t *testing.T, base, query string) answer
	}{
		{"POST", false, postAnswer},
		{"SSE", false, sseAnswer},
		{"graphql-transport-ws", false, wsAnswer("graphql-transport-ws")},
		{"graphql-ws", false, wsAnswer("graphql-ws")},
		{"proxy", true, postAnswer},
	} {
		t.Run(tr.name, func(t *testing.T) {
			cfg := embeddedConfig(t, 5000, "")
			if tr.proxy {
				cfg = proxyTo(t, shopUpstream(t).URL, 5000)
			}
			base := start(t, nil, "-config", cfg).Base
			rows := reviewsOfP1(t, base)
			before := available(t, base)
			a := tr.send(t, base, reviewMutation())
			if string(a.Data) != "null" || len(a.Errors) == 0 {
				t.Fatalf("want data null and the failing field's error: %+v", a)
			}
			if got := before - available(t, base); got != 300 {
				t.Errorf("charged %d, want the 300 of the 30 fields that ran", got)
			}
			if got := reviewsOfP1(t, base) - rows; got != 29 {
				t.Errorf("%d reviews written, want 29", got)
			}
		})
	}
}

func postAnswer(t *testing.T, base, query string) answer {
	t.Helper()
	_, a := graphQL(t, base, query)
	return a
}

// sseAnswer sends query over SSE and returns its first event.
func sseAnswer(t *testing.T, base, query string) answer {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query})
	req, _ := http.NewRequest(http.MethodPost, base+"/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	events := sseEvents(t, res.Body)
	if len(events) == 0 || events[0].name != "next" {
		t.Fatalf("SSE: %d %v", res.StatusCode, events)
	}
	var a answer
	if err := json.Unmarshal([]byte(events[0].data), &a); err != nil {
		t.Fatalf("SSE event %s: %v", events[0].data, err)
	}
	return a
}

type sseEvent struct{ name, data string }

// sseEvents reads an SSE stream until complete (or its end).
func sseEvents(t *testing.T, r io.Reader) []sseEvent {
	t.Helper()
	var events []sseEvent
	var ev sseEvent
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			ev.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			ev.data = strings.TrimPrefix(line, "data: ")
		case line == "" && ev.name != "":
			events = append(events, ev)
			if ev.name == "complete" {
				return events
			}
			ev = sseEvent{}
		}
	}
	return events
}

// wsConn is a websocket client of the binary, speaking proto.
type wsConn struct {
	t     *testing.T
	conn  *websocket.Conn
	proto string
}

type wsMessage struct {
	ID      string          `json:"id,omitempty"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

func dialWS(t *testing.T, base, proto string) *wsConn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/graphql", &websocket.DialOptions{Subprotocols: []string{proto}})
	if err != nil {
		t.Fatalf("dial %s: %v", proto, err)
	}
	conn.SetReadLimit(4 << 20)
	t.Cleanup(func() { conn.CloseNow() })
	c := &wsConn{t: t, conn: conn, proto: proto}
	c.send(wsMessage{Type: "connection_init"})
	if m := c.read(); m.Type != "connection_ack" {
		t.Fatalf("got %+v, want connection_ack", m)
	}
	return c
}

func (c *wsConn) send(m wsMessage) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := wsjson.Write(ctx, c.conn, m); err != nil {
		c.t.Fatalf("send: %v", err)
	}
}

// read returns the next message but keep-alives (the timeout bounds a failing test).
func (c *wsConn) read() wsMessage {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		var m wsMessage
		if err := wsjson.Read(ctx, c.conn, &m); err != nil {
			c.t.Fatalf("read: %v", err)
		}
		if m.Type != "ka" && m.Type != "ping" && m.Type != "pong" {
			return m
		}
	}
}

func (c *wsConn) subscribe(query string) {
	c.t.Helper()
	kind := "subscribe"
	if c.proto == "graphql-ws" {
		kind = "start"
	}
	payload, _ := json.Marshal(map[string]any{"query": query})
	c.send(wsMessage{ID: "1", Type: kind, Payload: payload})
}

// isEvent reports a message carrying a result: next, or graphql-ws's data.
func isEvent(m wsMessage) bool { return m.Type == "next" || m.Type == "data" }

// wsAnswer sends query over proto and returns its result.
func wsAnswer(proto string) func(t *testing.T, base, query string) answer {
	return func(t *testing.T, base, query string) answer {
		t.Helper()
		c := dialWS(t, base, proto)
		c.subscribe(query)
		m := c.read()
		if !isEvent(m) {
			t.Fatalf("%s: got %s %s, want a result", proto, m.Type, m.Payload)
		}
		var a answer
		if err := json.Unmarshal(m.Payload, &a); err != nil {
			t.Fatalf("%s: %s: %v", proto, m.Payload, err)
		}
		if m := c.read(); m.Type != "complete" {
			t.Errorf("%s: got %s after the result, want complete", proto, m.Type)
		}
		return a
	}
}

// The proxy disconnect repro: five 601-cost operations, each abandoned by its
// client once the upstream holds it, keep their whole charge while the
// upstream finishes them. Before, each was refunded all but 1: the five left
// the bucket where it was.
func TestBinaryProxyClientThatLeavesKeepsItsCharge(t *testing.T) {
	shop := handler.New(graph.NewExecutableSchema(graph.Config{Resolvers: &graph.Resolver{Shop: graph.NewShop()}}))
	shop.AddTransport(transport.POST{})
	got, release := make(chan struct{}, 5), make(chan struct{})
	var finished atomic.Int64
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !strings.Contains(string(body), "products(first: 100)") {
			r.Body = io.NopCloser(bytes.NewReader(body))
			shop.ServeHTTP(w, r)
			return
		}
		got <- struct{}{}
		<-release
		// The upstream finishes what it started, whoever still listens.
		req := httptest.NewRequestWithContext(context.WithoutCancel(r.Context()), http.MethodPost, "/", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		shop.ServeHTTP(rec, req)
		if rec.Code == http.StatusOK && !strings.Contains(rec.Body.String(), `"errors"`) {
			finished.Add(1)
		}
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	base := start(t, nil, "-config", proxyTo(t, slow.URL, 5000)).Base
	before := available(t, base)
	body, _ := json.Marshal(map[string]any{"query": `{ products(first: 100) { nodes { variants(first: 5) { id } } } }`}) // 1 + 100 × (1 + 5)
	for range 5 {
		ctx, leave := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/graphql", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		done := make(chan struct{})
		go func() {
			defer close(done)
			if res, err := http.DefaultClient.Do(req); err == nil {
				res.Body.Close()
			}
		}()
		<-got // forwarded: the upstream holds it
		leave()
		<-done
	}
	close(release)
	for deadline := time.Now().Add(10 * time.Second); finished.Load() < 5 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond) // the upstream's goroutines: no clock to inject
	}
	if n := finished.Load(); n != 5 {
		t.Fatalf("the upstream finished %d of the 5", n)
	}
	// The gateway settles each as it notices its client gone: wait for the
	// bucket to stop moving.
	var charged int64
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if charged = before - available(t, base); charged == 5*601 {
			break
		}
	}
	if charged != 5*601 {
		t.Errorf("charged %d for five abandoned operations, want 5 × 601", charged)
	}
}

// The __typename alias repro. Embedded, a review whose body is "Product",
// aliased __typename, costs what the same selection costs without the
// alias: the execution counts what ran. In proxy mode the alias is refused
// before anything is forwarded. Before, the reply was priced as if the item
// were the product its body named: 25 instead of 278 embedded, 2 instead of
// 19 in proxy mode.
func TestBinaryTypenameAliasSetsNoPrice(t *testing.T) {
	const (
		aliased = `{ search(text: "Product", first: 5) { ... on Review { __typename: body product { variants(first: 5) { id } reviews(first: 5) { id author { name } } } } } }`
		honest  = `{ search(text: "Product", first: 5) { ... on Review { body product { variants(first: 5) { id } reviews(first: 5) { id author { name } } } } } }`
		write   = `mutation { createReview(input: {productId: "p2", rating: 4, body: "Product"}) { id } }`
	)
	t.Run("embedded", func(t *testing.T) {
		base := start(t, nil, "-config", embeddedConfig(t, 5000, "")).Base
		graphQL(t, base, write)
		_, a := graphQL(t, base, aliased)
		_, b := graphQL(t, base, honest)
		if a.Extensions.Cost == nil || b.Extensions.Cost == nil || a.Extensions.Cost.ActualQueryCost == nil || b.Extensions.Cost.ActualQueryCost == nil || *b.Extensions.Cost.ActualQueryCost < 4 {
			t.Fatalf("no actual cost: %+v, %+v", a, b)
		}
		if got, want := *a.Extensions.Cost.ActualQueryCost, *b.Extensions.Cost.ActualQueryCost; got != want {
			t.Errorf("with the alias the actual cost is %d, without it %d", got, want)
		}
	})
	t.Run("proxy", func(t *testing.T) {
		base := start(t, nil, "-config", proxyTo(t, shopUpstream(t).URL, 5000)).Base
		graphQL(t, base, write)
		before := available(t, base)
		status, a := graphQL(t, base, aliased)
		if status != http.StatusBadRequest || a.code() != "BAD_REQUEST" {
			t.Errorf("got %d %+v, want 400 BAD_REQUEST", status, a)
		}
		if got := before - available(t, base); got > 1 {
			t.Errorf("charged %d for a refused operation", got)
		}
	})
}

// Subscription events cost what they ran, from the binary's config: with a
// bucket of 300 a subscription of 51-cost ticks every 100 ms is charged its
// opening, then its events, until THROTTLED ends it (then complete);
// graphql.subscription_events: free leaves the events free, as before.
func TestBinarySubscriptionEventsCharged(t *testing.T) {
	const ticks = `subscription { ticker(intervalMs: 100) { n products(first: 50) { id } } }` // 1 + 50
	t.Run("charge", func(t *testing.T) {
		base := start(t, nil, "-config", embeddedConfig(t, 300, "")).Base
		c := dialWS(t, base, "graphql-transport-ws")
		c.subscribe(ticks)
		events := 0
		for {
			m := c.read()
			if !isEvent(m) {
				t.Fatalf("got %s %s after %d events, want THROTTLED first", m.Type, m.Payload, events)
			}
			var a answer
			json.Unmarshal(m.Payload, &a)
			if a.code() == "THROTTLED" {
				break
			}
			if events++; events > 50 { // 5 s of events cost 2550, the bucket holds 300
				t.Fatalf("%d events and no THROTTLED", events)
			}
		}
		if m := c.read(); m.Type != "complete" {
			t.Errorf("got %s after THROTTLED, want complete", m.Type)
		}
		if left := available(t, base); left >= 51 {
			t.Errorf("%d left after %d events: the bucket could pay another", left, events)
		}
	})
	t.Run("free", func(t *testing.T) {
		base := start(t, nil, "-config", embeddedConfig(t, 300, "  subscription_events: free\n")).Base
		c := dialWS(t, base, "graphql-transport-ws")
		c.subscribe(ticks)
		for range 15 { // 1.5 s of events: 765 of cost, more than the bucket holds
			if m := c.read(); !isEvent(m) || strings.Contains(string(m.Payload), "THROTTLED") {
				t.Fatalf("got %s %s, want a tick", m.Type, m.Payload)
			}
		}
		if got := available(t, base); got != 300-51 {
			t.Errorf("%d left, want 249: the opening charged, the events free", got)
		}
	})
}
