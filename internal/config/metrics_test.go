package config

import (
	"strings"
	"testing"
)

func TestGraphQLMetricsConfig(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       int
		err        string
	}{
		{"absent", "", 0, ""},
		{"set", "  metrics: {max_operations: 25}\n", 25, ""},
		{"zero takes the default", "  metrics: {max_operations: 0}\n", 0, ""},
		{"negative", "  metrics: {max_operations: -1}\n", 0, "bad.yaml:5: graphql.metrics.max_operations: must not be negative, got -1"},
		{"too many", "  metrics: {max_operations: 1000000}\n", 0, "bad.yaml:5: graphql.metrics.max_operations: at most 10000, got 1000000"},
		{"unknown key", "  metrics: {max_operation: 5}\n", 0, "graphql.metrics.max_operation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("bad.yaml", []byte(gqlPolicy+"graphql:\n  policy: graphql\n"+tc.yaml))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := c.GraphQL.Metrics.MaxOperations; got != tc.want {
				t.Errorf("graphql.metrics.max_operations = %d, want %d", got, tc.want)
			}
		})
	}
}
