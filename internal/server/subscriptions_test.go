package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
)

// The example API serves its subscriptions over websockets behind the cost
// limit; when the server stops, their connections are closed (and their
// slots freed with them) instead of holding the shutdown.
func TestStopClosesSubscriptions(t *testing.T) {
	s, _ := newGraphQLServer(t, "")
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // bounds a failing test only
	defer cancel()
	conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(hs.URL, "http")+"/graphql",
		&websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	type message struct {
		ID      string         `json:"id,omitempty"`
		Type    string         `json:"type"`
		Payload map[string]any `json:"payload,omitempty"`
	}
	read := func() (message, error) {
		for {
			var m message
			if err := wsjson.Read(ctx, conn, &m); err != nil || m.Type != "ka" {
				return m, err
			}
		}
	}
	for _, m := range []message{{Type: "connection_init"},
		{ID: "1", Type: "subscribe", Payload: map[string]any{"query": `subscription { ticker(intervalMs: 3600000) { n } }`}}} {
		if err := wsjson.Write(ctx, conn, m); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{"connection_ack", "next"} {
		if m, err := read(); err != nil || m.Type != want {
			t.Fatalf("got %+v %v, want %s", m, err, want)
		}
	}

	s.SetServing(false)
	for {
		m, err := read()
		if err != nil {
			if status := websocket.CloseStatus(err); status != websocket.StatusNormalClosure {
				t.Errorf("the connection ended with %v, want a normal closure", err)
			}
			return
		}
		if m.Type == "next" {
			t.Errorf("got %+v after the stop", m)
		}
	}
}

// An SSE subscription to the example API streams its events; the server's
// stop ends the stream.
func TestStopEndsSSESubscriptions(t *testing.T) {
	s, _ := newGraphQLServer(t, "")
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // bounds a failing test only
	defer cancel()
	resp := subscribeSSE(ctx, t, hs.URL, "subscription { ticker(intervalMs: 3600000) { n } }")
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() && !strings.HasPrefix(sc.Text(), "data: ") {
	}
	if !strings.Contains(sc.Text(), `"n":1`) {
		t.Fatalf("%d: got %q, want the first tick", resp.StatusCode, sc.Text())
	}
	s.SetServing(false)
	for sc.Scan() {
	}
	if err := sc.Err(); err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("the stream ended with %v", err)
	}
	if ctx.Err() != nil {
		t.Error("the stream did not end with the stop")
	}
}

// An SSE subscription outlives the server's read and write timeouts, which
// bound a request and each write, not a stream: its ticks keep coming.
func TestSSESubscriptionOutlivesTheTimeouts(t *testing.T) {
	s, _ := newGraphQLServer(t, "")
	hs := httptest.NewUnstartedServer(s)
	hs.Config = HTTPServer(s, slog.New(slog.DiscardHandler))
	// The test's own, far shorter than the server's 30 s, and long enough
	// for a busy machine to read the request and start the stream in; the
	// stream lasts three times as long.
	hs.Config.ReadTimeout, hs.Config.WriteTimeout = time.Second, time.Second
	hs.Start()
	t.Cleanup(hs.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // bounds a failing test only
	defer cancel()
	resp := subscribeSSE(ctx, t, hs.URL, "subscription { ticker(intervalMs: 250, count: 12) { n } }")
	start := time.Now()
	sc := bufio.NewScanner(resp.Body)
	last := ""
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "data: ") {
			last = sc.Text()
		}
	}
	if !strings.Contains(last, `"n":12`) {
		t.Errorf("after %v the stream ended with %v, its last event %q; want all 12 ticks", time.Since(start).Round(time.Millisecond), sc.Err(), last)
	}
}

// subscribeSSE starts an SSE subscription to the example API at base; the
// test's cleanup closes its stream.
func subscribeSSE(ctx context.Context, t *testing.T, base, query string) *http.Response {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"query": query})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}
