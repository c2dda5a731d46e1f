package gqllimit_test

import (
	"encoding/json"
	"sync"
	"testing"

	"github.com/costgate/costgate/internal/gqltest"
	"github.com/costgate/costgate/limiter/gqllimit"
)

// operations collects what Config.OnOperation reports.
type operations struct {
	mu  sync.Mutex
	evs []gqllimit.OperationEvent
}

func (o *operations) add(ev gqllimit.OperationEvent) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.evs = append(o.evs, ev)
}

// take returns what was reported since the last call.
func (o *operations) take() []gqllimit.OperationEvent {
	o.mu.Lock()
	defer o.mu.Unlock()
	evs := o.evs
	o.evs = nil
	return evs
}

// OnOperation reports each operation once, with the name, estimated and
// actual cost and rejection code a per-operation metric needs; dry runs are
// not operations.
func TestOnOperation(t *testing.T) {
	ops := &operations{}
	e := newEnv(t, envOpts{cfg: func(c *gqllimit.Config) { c.MaxDepth = 4; c.OnOperation = ops.add }})
	send := func(query, operationName string, header map[string]string) *gqltest.Result {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"query": query, "operationName": operationName})
		return e.raw(t, "POST", "/graphql", body, header)
	}
	one := func(t *testing.T, want gqllimit.OperationEvent) {
		t.Helper()
		evs := ops.take()
		if len(evs) != 1 || evs[0] != want {
			t.Errorf("reported %+v, want once %+v", evs, want)
		}
	}

	t.Run("named, ran", func(t *testing.T) {
		r := send(`query Shop { products(first: 3) { nodes { id reviews(first: 10) { id } } } }`, "", nil)
		c := r.Cost(t)
		if c.ActualQueryCost == nil || *c.ActualQueryCost == c.RequestedQueryCost {
			t.Fatalf("want an actual cost below the estimate: %s", r.Body)
		}
		one(t, gqllimit.OperationEvent{Name: "Shop", Estimated: c.RequestedQueryCost, Actual: *c.ActualQueryCost, HasActual: true})
	})
	t.Run("selected by operationName", func(t *testing.T) {
		r := send(`query A { products(first: 1) { nodes { id } } } query B { products(first: 2) { nodes { id } } }`, "B", nil)
		c := r.Cost(t)
		one(t, gqllimit.OperationEvent{Name: "B", Estimated: c.RequestedQueryCost, Actual: *c.ActualQueryCost, HasActual: true})
	})
	t.Run("anonymous", func(t *testing.T) {
		r := send(`{ products(first: 2) { nodes { id } } }`, "", nil)
		c := r.Cost(t)
		one(t, gqllimit.OperationEvent{Estimated: c.RequestedQueryCost, Actual: *c.ActualQueryCost, HasActual: true})
	})
	t.Run("rejected before it ran", func(t *testing.T) {
		r := send(`query Deep { products { nodes { reviews { author { name } } } } }`, "", nil)
		if r.Code() != gqllimit.CodeMaxDepthExceeded {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		one(t, gqllimit.OperationEvent{Name: "Deep", Estimated: r.Cost(t).RequestedQueryCost, Code: gqllimit.CodeMaxDepthExceeded})
	})
	t.Run("validation failure", func(t *testing.T) {
		send(`query Bad { products { nope } }`, "", nil)
		one(t, gqllimit.OperationEvent{Name: "Bad", Code: gqllimit.CodeValidationFailed})
	})
	t.Run("dry run", func(t *testing.T) {
		send(`query Shop { products(first: 3) { nodes { id reviews(first: 10) { id } } } }`, "", map[string]string{gqllimit.HeaderDryRun: "1"})
		if evs := ops.take(); len(evs) != 0 {
			t.Errorf("a dry run was reported: %+v", evs)
		}
	})
}
