package config

import "github.com/costgate/costgate/internal/topnames"

// GraphQLMetricsConfig bounds the per-operation metrics
// (costgate_graphql_operation_cost and ..._rejections_total).
type GraphQLMetricsConfig struct {
	// MaxOperations is how many operation names get series of their own,
	// the most frequent (0: 100); the others are counted as "other".
	MaxOperations int `yaml:"max_operations"`
}

// maxOperationsCeiling keeps a typo from asking Prometheus for millions of series.
const maxOperationsCeiling = 10_000

func (v *validator) graphqlMetrics() {
	switch n := v.c.GraphQL.Metrics.MaxOperations; {
	case n < 0:
		v.fail("graphql.metrics.max_operations", "must not be negative, got %d (0 takes the default, %d)", n, topnames.DefaultCapacity)
	case n > maxOperationsCeiling:
		v.fail("graphql.metrics.max_operations", "at most %d, got %d: each operation name holds about 60 series", maxOperationsCeiling, n)
	}
}
