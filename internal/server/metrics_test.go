package server

import (
	"errors"
	"fmt"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/costgate/costgate/internal/metricstest"
	"github.com/costgate/costgate/limiter"
)

// The limiter's observer counts each check under its policy and outcome,
// times it under its store, and counts a store error; a series appears on
// its first check, not before (as it did when each check looked it up).
func TestObserveSeries(t *testing.T) {
	m := newMetrics()
	srv := httptest.NewServer(m.handler())
	defer srv.Close()
	if got := metricstest.Scrape(t, srv.URL).LabelValues("costgate_decisions_total", "policy"); len(got) != 0 {
		t.Fatalf("decision series before any check: %v, want none", got)
	}
	for range 3 {
		m.observe(limiter.Event{Policy: "api", Outcome: limiter.Allowed, Store: "memory", Duration: time.Millisecond})
	}
	m.observe(limiter.Event{Policy: "api", Outcome: limiter.Denied, Store: "memory"})
	m.observe(limiter.Event{Policy: "login", Outcome: limiter.ErrorDenied, Store: "memory", Err: errors.New("down")})
	m.overflow("api")
	m.overflow("api")

	samples := metricstest.Scrape(t, srv.URL)
	var decisions []string
	for _, s := range samples {
		if s.Name == "costgate_decisions_total" {
			decisions = append(decisions, fmt.Sprintf("%s/%s=%v", s.Labels["policy"], s.Labels["decision"], s.Value))
		}
	}
	slices.Sort(decisions)
	if want := []string{"api/allowed=3", "api/denied=1", "login/error_denied=1"}; !slices.Equal(decisions, want) {
		t.Errorf("decisions %v, want %v", decisions, want)
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"costgate_store_errors_total", map[string]string{"store": "memory"}, 1},
		{"costgate_memstore_overflow_total", map[string]string{"policy": "api"}, 2},
		{"costgate_check_duration_seconds_count", map[string]string{"store": "memory"}, 5},
		{"costgate_check_duration_seconds_bucket", map[string]string{"store": "memory", "le": "0.001"}, 5},
	} {
		if v, ok := samples.Value(c.name, c.labels); !ok || v != c.want {
			t.Errorf("%s%v = %v (present %v), want %v", c.name, c.labels, v, ok, c.want)
		}
	}
	if got := samples.LabelValues("costgate_check_duration_seconds", "store"); len(got) != 1 {
		t.Errorf("check duration stores %v, want memory alone", got)
	}
}

// The observer of a known policy and outcome costs no allocation and,
// with its series resolved once, no label hashing.
func BenchmarkObserve(b *testing.B) {
	m := newMetrics()
	ev := limiter.Event{Policy: "api", Outcome: limiter.Allowed, Store: "redis", Duration: 300 * time.Microsecond}
	m.observe(ev)
	b.ReportAllocs()
	for b.Loop() {
		m.observe(ev)
	}
}

// A GraphQL request's cost histograms, requested and actual, cost no
// allocation and no label hashing either.
func BenchmarkGraphQLCostHook(b *testing.B) {
	m := newMetrics()
	m.cost("requested", 42)
	m.cost("actual", 30)
	b.ReportAllocs()
	for b.Loop() {
		m.cost("requested", 42)
		m.cost("actual", 30)
	}
}
