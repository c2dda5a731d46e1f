package gqllimit_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/gqllimit"
)

// The two websocket protocols gqlgen speaks, and their message types.
type wsProtocol struct {
	name, subscribe, stop, next string
}

var (
	transportWS = wsProtocol{name: "graphql-transport-ws", subscribe: "subscribe", stop: "complete", next: "next"}
	legacyWS    = wsProtocol{name: "graphql-ws", subscribe: "start", stop: "stop", next: "data"}
)

const apiKey = "demo-free"

// Subscriptions used below: ticks at once, then every intervalMs. The
// first costs 3 (a Tick, 1, and 2 products, 1 each); the second costs 1
// and ticks once an hour, so it holds a slot without sending more.
const (
	threeTicks = `subscription { ticker(intervalMs: 100, count: 3) { n products(first: 2) { id } } }`
	held       = `subscription { ticker(intervalMs: 3600000) { n } }`
)

type wsMessage struct {
	ID      string          `json:"id,omitempty"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// wsClient is a real websocket client of a GraphQL server.
type wsClient struct {
	t       *testing.T
	conn    *websocket.Conn
	proto   wsProtocol
	pending []wsMessage // read while waiting for another operation's
}

// serveHTTP serves e over a real HTTP server.
func serveHTTP(t *testing.T, e *env) string {
	t.Helper()
	srv := httptest.NewServer(e.handler)
	t.Cleanup(srv.Close)
	return srv.URL
}

// dialWS opens a connection with proto, sending key as X-API-Key ("" for
// none), and initialises it.
func dialWS(t *testing.T, url string, proto wsProtocol, key string) *wsClient {
	t.Helper()
	c, err := tryDialWS(t, url, proto, key)
	if err != nil {
		t.Fatal(err)
	}
	c.send(wsMessage{Type: "connection_init"})
	if m := c.read(); m.Type != "connection_ack" {
		t.Fatalf("got %+v, want connection_ack", m)
	}
	return c
}

func tryDialWS(t *testing.T, url string, proto wsProtocol, key string) (*wsClient, error) {
	t.Helper()
	h := http.Header{}
	if key != "" {
		h.Set("X-API-Key", key)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(url, "http"), &websocket.DialOptions{
		Subprotocols: []string{proto.name}, HTTPHeader: h})
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		return nil, fmt.Errorf("dial %s: %d %w", proto.name, status, err)
	}
	c := &wsClient{t: t, conn: conn, proto: proto}
	t.Cleanup(func() { conn.CloseNow() })
	return c, nil
}

func (c *wsClient) send(m wsMessage) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := wsjson.Write(ctx, c.conn, m); err != nil {
		c.t.Fatalf("send %s: %v", m.Type, err)
	}
}

// read returns the next message other than a keep-alive. The timeout only
// bounds a failing test.
func (c *wsClient) read() wsMessage {
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

func (c *wsClient) subscribe(id, query string) {
	c.t.Helper()
	payload, _ := json.Marshal(map[string]any{"query": query})
	c.send(wsMessage{ID: id, Type: c.proto.subscribe, Payload: payload})
}

func (c *wsClient) stop(id string) {
	c.t.Helper()
	c.send(wsMessage{ID: id, Type: c.proto.stop})
}

// await returns the next message of operation id, of any type; messages
// of other operations are kept for their own await.
func (c *wsClient) await(id string) wsMessage {
	c.t.Helper()
	for i, m := range c.pending {
		if m.ID == id {
			c.pending = append(c.pending[:i], c.pending[i+1:]...)
			return m
		}
	}
	for {
		m := c.read()
		if m.ID == id {
			return m
		}
		c.pending = append(c.pending, m)
	}
}

// started waits for the first event of subscription id.
func (c *wsClient) started(id string) {
	c.t.Helper()
	if m := c.await(id); m.Type != c.proto.next {
		c.t.Fatalf("subscription %s: got %s %s, want %s", id, m.Type, m.Payload, c.proto.next)
	}
}

// refused waits for the error message of subscription id and returns its
// first error's code and extensions.
func (c *wsClient) refused(id string) (string, map[string]any) {
	c.t.Helper()
	m := c.await(id)
	var errs []struct {
		Message    string         `json:"message"`
		Extensions map[string]any `json:"extensions"`
	}
	if m.Type != "error" || json.Unmarshal(m.Payload, &errs) != nil || len(errs) == 0 {
		c.t.Fatalf("subscription %s: got %s %s, want an error message", id, m.Type, m.Payload)
	}
	code, _ := errs[0].Extensions["code"].(string)
	return code, errs[0].Extensions
}

// tick is the n of an event.
func tick(t *testing.T, payload json.RawMessage) int {
	t.Helper()
	var res struct {
		Data struct {
			Ticker struct {
				N        int `json:"n"`
				Products []struct {
					ID string `json:"id"`
				} `json:"products"`
			} `json:"ticker"`
		} `json:"data"`
		Errors []any `json:"errors"`
	}
	if err := json.Unmarshal(payload, &res); err != nil || len(res.Errors) > 0 {
		t.Fatalf("event %s: %v", payload, err)
	}
	return res.Data.Ticker.N
}

func (e *env) keyAvailable(t *testing.T) int64 {
	t.Helper()
	return e.Available(t, map[string]string{"X-API-Key": apiKey})
}

// A subscription over either websocket protocol starts, is charged its
// price, receives its events, and completes; each event is charged what it
// cost. The store's clock stands still here: the events' charges wait for
// the next second, and what is owed when the subscription ends is charged
// then, in one call.
func TestSubscriptionChargedWhenItStarts(t *testing.T) {
	for _, proto := range []wsProtocol{transportWS, legacyWS} {
		t.Run(proto.name, func(t *testing.T) {
			e := newEnv(t, envOpts{streams: true})
			c := dialWS(t, serveHTTP(t, e), proto, apiKey)
			before := e.keyAvailable(t)
			c.subscribe("1", threeTicks)
			for want := 1; want <= 3; want++ {
				m := c.await("1")
				if m.Type != proto.next {
					t.Fatalf("got %s %s, want tick %d", m.Type, m.Payload, want)
				}
				if got := tick(t, m.Payload); got != want {
					t.Errorf("tick %d, want %d", got, want)
				}
			}
			if m := c.await("1"); m.Type != "complete" {
				t.Errorf("got %s %s, want complete", m.Type, m.Payload)
			}
			if got := before - e.keyAvailable(t); got != 3+3*3 {
				t.Errorf("charged %d, want the subscription's price and its 3 events', 3 + 3×3", got)
			}
		})
	}
}

// The 11th subscription one key opens (across its connections) is refused
// with TOO_MANY_SUBSCRIPTIONS, charged nothing; another key is not
// affected; ending one subscription, or closing a connection, frees slots.
func TestTooManySubscriptions(t *testing.T) {
	for _, proto := range []wsProtocol{transportWS, legacyWS} {
		t.Run(proto.name, func(t *testing.T) {
			e := newEnv(t, envOpts{streams: true})
			url := serveHTTP(t, e)
			a, b := dialWS(t, url, proto, apiKey), dialWS(t, url, proto, apiKey)
			for i := range 6 {
				a.subscribe(fmt.Sprint("a", i), held)
				a.started(fmt.Sprint("a", i))
			}
			for i := range 4 {
				b.subscribe(fmt.Sprint("b", i), held)
				b.started(fmt.Sprint("b", i))
			}
			before := e.keyAvailable(t)
			b.subscribe("b-11th", held)
			code, ext := b.refused("b-11th")
			if code != gqllimit.CodeTooManySubscriptions || ext["maxSubscriptions"] != float64(gqllimit.DefaultMaxSubscriptions) {
				t.Errorf("11th: got %s %v, want %s with maxSubscriptions 10", code, ext, gqllimit.CodeTooManySubscriptions)
			}
			if got := e.keyAvailable(t); got != before {
				t.Errorf("the refused subscription charged %d", before-got)
			}

			other := dialWS(t, url, proto, "") // by client address: another key
			other.subscribe("o", held)
			other.started("o")

			a.stop("a0")
			if m := a.await("a0"); m.Type != "complete" {
				t.Fatalf("stopping a0: got %s %s", m.Type, m.Payload)
			}
			b.subscribe("b-after-stop", held)
			b.started("b-after-stop")

			// Closing a connection frees its 5 open subscriptions once the
			// server has seen it close: wait for the first slot (the
			// deadline only bounds a failing test).
			a.conn.Close(websocket.StatusNormalClosure, "")
			deadline := time.Now().Add(30 * time.Second)
			for i := 0; ; i++ {
				id := fmt.Sprint("b-after-close-", i)
				b.subscribe(id, held)
				m := b.await(id)
				if m.Type == proto.next {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no slot freed by closing a connection: %s %s", m.Type, m.Payload)
				}
			}
			for i := range 4 {
				id := fmt.Sprint("b-freed-", i)
				b.subscribe(id, held)
				b.started(id)
			}
		})
	}
}

// Handler serves the subscriptions of the server `gqlgen init` generates,
// once the websocket transport is added to it as gqlgen's documentation
// adds it: charged when they start, as the event's extensions.cost says.
func TestHandlerServesSubscriptions(t *testing.T) {
	var ran atomic.Int64
	srv := initServer(&ran)
	srv.AddTransport(transport.Websocket{KeepAlivePingInterval: 10 * time.Second})
	hs := httptest.NewServer(gqllimit.Handler(srv, gqllimit.Budget(50, time.Second, 1000)))
	t.Cleanup(hs.Close)
	c := dialWS(t, hs.URL, transportWS, "")
	c.subscribe("1", threeTicks)
	m := c.await("1")
	var res struct {
		Extensions struct {
			Cost *gqllimit.Cost `json:"cost"`
		} `json:"extensions"`
	}
	if m.Type != "next" || tick(t, m.Payload) != 1 || json.Unmarshal(m.Payload, &res) != nil || res.Extensions.Cost == nil ||
		res.Extensions.Cost.ThrottleStatus == nil || res.Extensions.Cost.ThrottleStatus.CurrentlyAvailable != 997 {
		t.Errorf("got %s %s, want the first tick with 997 of 1000 left", m.Type, m.Payload)
	}
}

// In measure mode a subscription over the limit runs, counted as the
// rejection enforcement would have made.
func TestMeasureModeCountsTooManySubscriptions(t *testing.T) {
	e := newEnv(t, envOpts{streams: true, cfg: func(c *gqllimit.Config) { c.Mode = limiter.Shadow; c.MaxSubscriptions = 1 }})
	c := dialWS(t, serveHTTP(t, e), transportWS, apiKey)
	c.subscribe("1", held)
	c.started("1")
	c.subscribe("2", held)
	c.started("2")
	if got := e.rejections.get(gqllimit.CodeTooManySubscriptions); got != 1 {
		t.Errorf("%d would-be rejections, want 1", got)
	}
}

// A throttled key cannot subscribe: THROTTLED, with retryAfterSec, in the
// protocol's error message, nothing charged.
func TestThrottledKeyCannotSubscribe(t *testing.T) {
	p := graphqlPolicy()
	p.Burst = 4
	e := newEnv(t, envOpts{streams: true, policy: p})
	c := dialWS(t, serveHTTP(t, e), transportWS, apiKey)
	c.subscribe("1", threeTicks)
	c.started("1")
	if got := e.keyAvailable(t); got != 1 {
		t.Fatalf("available %d after the first subscription, want 1", got)
	}
	c.subscribe("2", threeTicks)
	code, ext := c.refused("2")
	if code != gqllimit.CodeThrottled || ext["retryAfterSec"] == nil {
		t.Errorf("got %s %v, want %s with retryAfterSec", code, ext, gqllimit.CodeThrottled)
	}
	if got := e.keyAvailable(t); got != 1 {
		t.Errorf("available %d after the refusal, want 1: nothing charged", got)
	}
}

// A subscription that costs more than max_cost, or than the bucket can
// ever hold, is refused with the same code as a query, charged the
// rejection cost (1).
func TestOverCostSubscriptionRefused(t *testing.T) {
	const costly = `subscription { ticker { products(first: 50) { inventory } } }` // 1 + 50 × (1 + 5) = 301
	for _, tc := range []struct {
		name  string
		burst int64
		limit int64
		code  string
	}{
		{"max cost", 1000, 100, gqllimit.CodeMaxCostExceeded},
		{"capacity", 200, 1000, gqllimit.CodeCostExceedsCapacity},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := graphqlPolicy()
			p.Burst = tc.burst
			e := newEnv(t, envOpts{streams: true, policy: p, cfg: func(c *gqllimit.Config) { c.MaxCost = tc.limit }})
			c := dialWS(t, serveHTTP(t, e), transportWS, apiKey)
			before := e.keyAvailable(t)
			c.subscribe("1", costly)
			if code, ext := c.refused("1"); code != tc.code || ext["cost"] != float64(301) {
				t.Errorf("got %s %v, want %s for cost 301", code, ext, tc.code)
			}
			if got := e.keyAvailable(t); got != before-1 {
				t.Errorf("charged %d, want the rejection cost, 1", before-got)
			}
		})
	}
}

// An operation a connection starts meets the checks the middleware makes of
// an HTTP request, before gqlgen validates it, and its refusal is charged
// the rejection cost (1).
func TestWebsocketOperationsAreChecked(t *testing.T) {
	e := newEnv(t, envOpts{streams: true, cfg: func(c *gqllimit.Config) { c.MaxDepth = 2 }})
	c := dialWS(t, serveHTTP(t, e), transportWS, apiKey)
	before := e.keyAvailable(t)
	c.subscribe("1", `subscription { ticker { products { reviews { id } } } }`)
	if code, ext := c.refused("1"); code != gqllimit.CodeMaxDepthExceeded || ext["maxDepth"] != float64(2) {
		t.Errorf("got %s %v, want %s", code, ext, gqllimit.CodeMaxDepthExceeded)
	}
	if got := e.keyAvailable(t); got != before-1 {
		t.Errorf("charged %d, want 1", before-got)
	}
}

// An unknown API key is refused at the upgrade, 401, as over HTTP.
func TestUnknownKeyCannotUpgrade(t *testing.T) {
	e := newEnv(t, envOpts{streams: true})
	_, err := tryDialWS(t, serveHTTP(t, e), transportWS, "not-a-key")
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("got %v, want a 401", err)
	}
}

// sseEvent is one event of an SSE stream.
type sseEvent struct {
	name string
	data string
}

// postSSE sends query over SSE and returns the status and the events until
// the stream completes.
func postSSE(t *testing.T, url, query string) (int, []sseEvent) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("X-API-Key", apiKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var events []sseEvent
	var ev sseEvent
	sc := bufio.NewScanner(resp.Body)
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
				return resp.StatusCode, events
			}
			ev = sseEvent{}
		}
	}
	t.Fatalf("the stream ended without completing: %v (%v)", events, sc.Err())
	return 0, nil
}

// A subscription over SSE is charged its price and its events' cost; its
// slot counts with the key's websocket subscriptions.
func TestSSESubscription(t *testing.T) {
	e := newEnv(t, envOpts{streams: true, cfg: func(c *gqllimit.Config) { c.MaxSubscriptions = 1 }})
	url := serveHTTP(t, e)
	before := e.keyAvailable(t)
	status, events := postSSE(t, url, threeTicks)
	if status != http.StatusOK || len(events) != 4 {
		t.Fatalf("got %d %v, want 3 ticks and complete", status, events)
	}
	for i, ev := range events[:3] {
		if ev.name != "next" || tick(t, json.RawMessage(ev.data)) != i+1 {
			t.Errorf("event %d: %v", i, ev)
		}
	}
	if got := before - e.keyAvailable(t); got != 3+3*3 {
		t.Errorf("charged %d, want the subscription's price and its 3 events', 3 + 3×3", got)
	}

	// The subscription ended with its request: the one slot is free again.
	c := dialWS(t, url, transportWS, apiKey)
	c.subscribe("1", held)
	c.started("1")
	status, events = postSSE(t, url, threeTicks)
	var res struct {
		Errors []struct {
			Extensions map[string]any `json:"extensions"`
		} `json:"errors"`
	}
	if status != http.StatusTooManyRequests || len(events) != 2 || json.Unmarshal([]byte(events[0].data), &res) != nil ||
		len(res.Errors) == 0 || res.Errors[0].Extensions["code"] != gqllimit.CodeTooManySubscriptions {
		t.Errorf("over the limit: got %d %v, want 429 and %s", status, events, gqllimit.CodeTooManySubscriptions)
	}
}
