package gqllimit_test

import (
	"encoding/json"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/gqllimit"
)

// endless ticks every 100 ms until stopped; each event costs 3 (a Tick and
// 2 products), as the subscription's price does.
const endless = `subscription { ticker(intervalMs: 100) { n products(first: 2) { id } } }`

// smallBucket holds 12 and refills nothing in a test's time.
func smallBucket() *limiter.Policy {
	return &limiter.Policy{Name: "graphql", Algorithm: limiter.TokenBucket, Limit: 1, Period: 24 * time.Hour, Burst: 12,
		Key: []string{"tenant", "api_key"}, OnStoreError: limiter.FailAllow}
}

// steppingClock moves a second each time it is read: every event a
// subscription sends is then a second after the last charge.
func steppingClock() func() time.Time {
	base, n := time.Now(), atomic.Int64{}
	return func() time.Time { return base.Add(time.Duration(n.Add(1)) * time.Second) }
}

// eventErrorCode is the code of an event's first error, "" for a plain event.
func eventErrorCode(t *testing.T, payload json.RawMessage) string {
	t.Helper()
	var res struct {
		Errors []struct {
			Extensions map[string]any `json:"extensions"`
		} `json:"errors"`
	}
	if err := json.Unmarshal(payload, &res); err != nil {
		t.Fatalf("event %s: %v", payload, err)
	}
	if len(res.Errors) == 0 {
		return ""
	}
	code, _ := res.Errors[0].Extensions["code"].(string)
	return code
}

// A subscription's events are charged what they cost as they are sent,
// until the bucket cannot pay: then the subscription ends with THROTTLED,
// then complete, over both websocket protocols and SSE. The bucket of 12
// pays the opening (3) and three events (3 each); the fourth event is not
// sent. Before, the subscription ran on, its events free.
func TestSubscriptionEventsChargedUntilTheBucketIsEmpty(t *testing.T) {
	opts := envOpts{streams: true, policy: smallBucket(), cfg: func(c *gqllimit.Config) { c.Clock = steppingClock() }}
	for _, proto := range []wsProtocol{transportWS, legacyWS} {
		t.Run(proto.name, func(t *testing.T) {
			e := newEnv(t, opts)
			c := dialWS(t, serveHTTP(t, e), proto, apiKey)
			c.subscribe("1", endless)
			for want := 1; want <= 3; want++ {
				m := c.await("1")
				if m.Type != proto.next || tick(t, m.Payload) != want {
					t.Fatalf("got %s %s, want tick %d", m.Type, m.Payload, want)
				}
			}
			if m := c.await("1"); m.Type != proto.next || eventErrorCode(t, m.Payload) != gqllimit.CodeThrottled {
				t.Fatalf("got %s %s, want a %s event", m.Type, m.Payload, gqllimit.CodeThrottled)
			}
			if m := c.await("1"); m.Type != "complete" {
				t.Fatalf("got %s %s, want complete", m.Type, m.Payload)
			}
			if got := e.keyAvailable(t); got != 0 {
				t.Errorf("%d left, want the 12 spent: the opening and three events", got)
			}
		})
	}
	t.Run("sse", func(t *testing.T) {
		e := newEnv(t, opts)
		status, events := postSSE(t, serveHTTP(t, e), endless)
		if status != http.StatusOK || len(events) != 5 {
			t.Fatalf("got %d %v, want 3 ticks, THROTTLED and complete", status, events)
		}
		for i, ev := range events[:3] {
			if ev.name != "next" || tick(t, json.RawMessage(ev.data)) != i+1 {
				t.Errorf("event %d: %v", i, ev)
			}
		}
		if ev := events[3]; ev.name != "next" || eventErrorCode(t, json.RawMessage(ev.data)) != gqllimit.CodeThrottled {
			t.Errorf("event 3: %v, want %s", ev, gqllimit.CodeThrottled)
		}
		if got := e.keyAvailable(t); got != 0 {
			t.Errorf("%d left, want the 12 spent", got)
		}
	})
}

// The events' charges are batched: within a second of the last charge an
// event only adds to what the subscription owes. The store's clock stands
// still here, so nothing is charged while the events flow, and all they owe
// is charged once the subscription ends.
func TestSubscriptionEventsChargedAtMostOnceASecond(t *testing.T) {
	e := newEnv(t, envOpts{streams: true})
	c := dialWS(t, serveHTTP(t, e), transportWS, apiKey)
	before := e.keyAvailable(t)
	c.subscribe("1", threeTicks)
	c.started("1")
	c.started("1")
	if got := before - e.keyAvailable(t); got != 3 {
		t.Errorf("charged %d after two events within the second, want only the opening 3", got)
	}
	c.started("1")
	if m := c.await("1"); m.Type != "complete" {
		t.Fatalf("got %s %s, want complete", m.Type, m.Payload)
	}
	if got := before - e.keyAvailable(t); got != 3+3*3 {
		t.Errorf("charged %d once it ended, want 3 + 3×3", got)
	}
}

// With FreeSubscriptionEvents a subscription costs its opening price
// whatever it sends: revision 3's behaviour. The bucket of 12 pays the
// opening, and the events flow on past what it could have paid.
func TestSubscriptionEventsFree(t *testing.T) {
	e := newEnv(t, envOpts{streams: true, policy: smallBucket(), cfg: func(c *gqllimit.Config) {
		c.Clock = steppingClock()
		c.FreeSubscriptionEvents = true
	}})
	c := dialWS(t, serveHTTP(t, e), transportWS, apiKey)
	c.subscribe("1", endless)
	for want := 1; want <= 6; want++ {
		m := c.await("1")
		if m.Type != "next" || tick(t, m.Payload) != want {
			t.Fatalf("got %s %s, want tick %d", m.Type, m.Payload, want)
		}
	}
	c.stop("1")
	if got := e.keyAvailable(t); got != 12-3 {
		t.Errorf("%d left, want 9: the opening charged, the events free", got)
	}
}
