package server

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/gqllimit"
	"github.com/costgate/costgate/limiter/redisstore"
)

// metrics are the server's Prometheus metrics, on a registry of their own.
type metrics struct {
	registry      *prometheus.Registry
	operations    *operationMetrics // per GraphQL operation; made by New
	decisions     *prometheus.CounterVec
	checkDuration *prometheus.HistogramVec
	storeErrors   *prometheus.CounterVec
	// roundTrips counts the round trips to Redis carrying checks or syncs,
	// by kind (redisstore.RoundTrip).
	roundTrips   *prometheus.CounterVec
	graphqlCost  *prometheus.HistogramVec
	rejections   *prometheus.CounterVec
	evictions    prometheus.Counter
	overflows    *prometheus.CounterVec
	connsRefused prometheus.Counter
	// schemaRefreshErrors counts failed reads of the upstream's schema by
	// introspection (graphql.schema: introspect).
	schemaRefreshErrors prometheus.Counter
	// Trusted documents (trusted.go): the requests by how they named their
	// document, and the loads of the list that failed.
	trustedRequests   *prometheus.CounterVec
	trustedLoadErrors prometheus.Counter

	// The series of the vectors above that a check or a GraphQL request
	// records, resolved once per label values (series.go): the hot path
	// hashes no labels.
	decisionSeries  *series[decisionKey, prometheus.Counter]
	durationSeries  *series[string, prometheus.Observer] // by store
	errorSeries     *series[string, prometheus.Counter]  // by store
	overflowSeries  *series[string, prometheus.Counter]  // by policy
	costSeries      *series[string, prometheus.Observer] // by kind
	rejectionSeries *series[string, prometheus.Counter]  // by code
	trustedSeries   *series[string, prometheus.Counter]  // by how named
}

// decisionKey are costgate_decisions_total's label values.
type decisionKey struct {
	policy  string
	outcome limiter.Outcome
}

func newMetrics() *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "costgate_decisions_total",
			Help: "Rate-limit decisions by policy and outcome (allowed, denied, shadow_denied, error_allowed, error_denied, error_local; exempt and blocked by an operator's override).",
		}, []string{"policy", "decision"}),
		checkDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "costgate_check_duration_seconds",
			Help:    "Time one rate-limit check took, by store.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1},
		}, []string{"store"}),
		storeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "costgate_store_errors_total",
			Help: "Checks the store could not answer (on_store_error decided them).",
		}, []string{"store"}),
		roundTrips: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "costgate_store_round_trips_total",
			Help: "Round trips to the store carrying checks (kind exact) or local-first syncs (kind sync); a pipeline is one.",
		}, []string{"store", "kind"}),
		graphqlCost: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "costgate_graphql_cost",
			Help:    "GraphQL operation cost, requested (priced from the schema) and actual (from the response).",
			Buckets: prometheus.ExponentialBuckets(1, 2, 14),
		}, []string{"kind"}),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "costgate_graphql_rejections_total",
			Help: "GraphQL operations refused before they ran, by code (errors[0].extensions.code); in measure mode also those enforcement would have refused.",
		}, []string{"code"}),
		evictions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "costgate_memstore_evictions_total",
			Help: "Keys the in-memory store evicted at its key cap (the key closest to full each time).",
		}),
		overflows: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "costgate_memstore_overflow_total",
			Help: "New keys the in-memory store decided by the policy's overflow state (one key's quota shared by all of them): the key cap was reached with every key held denying.",
		}, []string{"policy"}),
		connsRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "costgate_connections_refused_total",
			Help: "Connections refused at server.max_conns_per_ip (answered 429, or GOAWAY on grpc_listen).",
		}),
		schemaRefreshErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "costgate_schema_refresh_errors_total",
			Help: "Reads of the upstream's schema by introspection that failed (the last good schema stayed).",
		}),
		trustedRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "costgate_graphql_trusted_requests_total",
			Help: "GraphQL requests for a trusted document, by how they named it (document_id, persisted_query, text), and unlisted ones log mode ran. Refusals are in costgate_graphql_rejections_total (PERSISTED_QUERY_NOT_FOUND, PERSISTED_QUERY_NOT_IN_LIST).",
		}, []string{"by"}),
		trustedLoadErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "costgate_graphql_trusted_load_errors_total",
			Help: "Loads of graphql.trusted_documents that failed (on SIGHUP, or the file changed); the list in effect stayed.",
		}),
	}
	m.registry.MustRegister(m.decisions, m.checkDuration, m.storeErrors, m.roundTrips, m.graphqlCost, m.rejections, m.evictions, m.overflows, m.connsRefused, m.schemaRefreshErrors,
		m.trustedRequests, m.trustedLoadErrors,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, by := range []string{gqllimit.TrustedByDocumentID, gqllimit.TrustedByHash, gqllimit.TrustedByText, gqllimit.TrustedUnlisted} {
		m.trustedRequests.WithLabelValues(by) // every series from the start, at 0
	}
	m.decisionSeries = newSeries(func(k decisionKey) prometheus.Counter {
		return m.decisions.WithLabelValues(k.policy, string(k.outcome))
	})
	m.durationSeries = newSeries(func(store string) prometheus.Observer { return m.checkDuration.WithLabelValues(store) })
	m.errorSeries = newSeries(func(store string) prometheus.Counter { return m.storeErrors.WithLabelValues(store) })
	m.overflowSeries = newSeries(func(policy string) prometheus.Counter { return m.overflows.WithLabelValues(policy) })
	m.costSeries = newSeries(func(kind string) prometheus.Observer { return m.graphqlCost.WithLabelValues(kind) })
	m.rejectionSeries = newSeries(func(code string) prometheus.Counter { return m.rejections.WithLabelValues(code) })
	m.trustedSeries = newSeries(func(by string) prometheus.Counter { return m.trustedRequests.WithLabelValues(by) })
	return m
}

// observe is the limiter's observer hook.
func (m *metrics) observe(ev limiter.Event) {
	m.decisionSeries.get(decisionKey{ev.Policy, ev.Outcome}).Inc()
	m.durationSeries.get(ev.Store).Observe(ev.Duration.Seconds())
	if ev.Err != nil {
		m.errorSeries.get(ev.Store).Inc()
	}
}

// overflow is the memory stores' OnOverflow.
func (m *metrics) overflow(policy string) { m.overflowSeries.get(policy).Inc() }

// cost is gqllimit's Config.OnCost.
func (m *metrics) cost(kind string, cost int64) { m.costSeries.get(kind).Observe(float64(cost)) }

// rejection is gqllimit's Config.OnRejection (and the schema source's).
func (m *metrics) rejection(code string) { m.rejectionSeries.get(code).Inc() }

// trusted is the trusted documents' OnRequest.
func (m *metrics) trusted(by string) { m.trustedSeries.get(by).Inc() }

// roundTripHook is the Redis store's OnRoundTrip: its series exist from
// the start (at 0), and none is looked up per round trip.
func (m *metrics) roundTripHook(store string) func(redisstore.RoundTrip) {
	exact := m.roundTrips.WithLabelValues(store, string(redisstore.RoundTripExact))
	syncs := m.roundTrips.WithLabelValues(store, string(redisstore.RoundTripSync))
	return func(kind redisstore.RoundTrip) {
		if kind == redisstore.RoundTripSync {
			syncs.Inc()
			return
		}
		exact.Inc()
	}
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}
