package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/costgate/costgate/internal/topnames"
	"github.com/costgate/costgate/limiter/gqllimit"
)

// operationCostBuckets hold estimated and actual costs and their difference,
// which is negative when an operation returned more than it was priced at.
var operationCostBuckets = []float64{-16384, -4096, -1024, -256, -64, -16, -4, -1, 0, 1, 4, 16, 64, 256, 1024, 4096, 16384}

// operationMetrics are the per-operation GraphQL metrics. Their operation
// label is bounded by topnames: the most frequent names, then "other", and
// "anonymous" for operations without a name; the series of a name that
// loses its slot are deleted.
type operationMetrics struct {
	cost       *prometheus.HistogramVec
	rejections *prometheus.CounterVec
	top        *topnames.Top[operationSeries]
}

// operationSeries are one operation label's cost histograms, resolved once.
type operationSeries struct {
	label                    string
	estimated, actual, delta prometheus.Observer
}

func newOperationMetrics(reg prometheus.Registerer) *operationMetrics {
	m := &operationMetrics{
		cost: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "costgate_graphql_operation_cost",
			Help:    "GraphQL operation cost by operation name and kind: estimated (priced from the schema), actual (priced from the response, operations that ran), delta (estimated − actual). The operation label holds the most frequent names (graphql.metrics.max_operations), then other; anonymous for unnamed operations.",
			Buckets: operationCostBuckets,
		}, []string{"operation", "kind"}),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "costgate_graphql_operation_rejections_total",
			Help: "GraphQL operations refused, by operation name (as in costgate_graphql_operation_cost) and code; in measure mode also those enforcement would have refused.",
		}, []string{"operation", "code"}),
	}
	reg.MustRegister(m.cost, m.rejections)
	m.top = topnames.New(topnames.Config{}, m.series, m.drop)
	return m
}

func (m *operationMetrics) series(label string) operationSeries {
	return operationSeries{label: label,
		estimated: m.cost.WithLabelValues(label, "estimated"),
		actual:    m.cost.WithLabelValues(label, "actual"),
		delta:     m.cost.WithLabelValues(label, "delta")}
}

// drop deletes the series of a name that lost its slot: its later
// operations are counted under "other".
func (m *operationMetrics) drop(label string, _ operationSeries) {
	m.cost.DeletePartialMatch(prometheus.Labels{"operation": label})
	m.rejections.DeletePartialMatch(prometheus.Labels{"operation": label})
}

// configure applies graphql.metrics.max_operations (0: the default).
func (m *operationMetrics) configure(maxOperations int) {
	m.top.Configure(topnames.Config{Capacity: maxOperations})
}

// observe is gqllimit's Config.OnOperation.
func (m *operationMetrics) observe(ev gqllimit.OperationEvent) {
	m.top.Do(ev.Name, func(s operationSeries) {
		if ev.Estimated > 0 {
			s.estimated.Observe(float64(ev.Estimated))
		}
		if ev.HasActual {
			s.actual.Observe(float64(ev.Actual))
			s.delta.Observe(float64(ev.Estimated - ev.Actual))
		}
		if ev.Code != "" {
			m.rejections.WithLabelValues(s.label, ev.Code).Inc()
		}
	})
}
