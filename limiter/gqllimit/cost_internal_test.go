package gqllimit

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/costgate/costgate/complexity"
)

// Cost's own encoding is byte for byte what encoding/json writes by
// reflection, for every shape extensions.cost takes.
func TestCostJSON(t *testing.T) {
	actual := int64(-3)
	big := int64(math.MaxInt64)
	var costs []*Cost
	for _, requested := range []int64{0, 1, 42, big} {
		for _, a := range []*int64{nil, &actual, &big} {
			costs = append(costs, &Cost{RequestedQueryCost: requested, ActualQueryCost: a})
			for _, rate := range []float64{0, 16.67, 1000, 0.01, 1e-7, 1e21, 123456789.5, -2.5} {
				costs = append(costs, &Cost{RequestedQueryCost: requested, ActualQueryCost: a,
					ThrottleStatus: &ThrottleStatus{MaximumAvailable: requested * 2, CurrentlyAvailable: -requested, RestoreRate: rate}})
			}
		}
	}
	costs = append(costs, &Cost{RequestedQueryCost: 3, Fields: []complexity.FieldCost{{Path: "a", DefinedWeight: 1, RequestedTotal: 3}}})
	for _, c := range costs {
		got, err := json.Marshal(map[string]any{"cost": c})
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(map[string]any{"cost": (*costJSON)(c)})
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("got  %s\nwant %s", got, want)
		}
	}
}
