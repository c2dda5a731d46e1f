package gqllimit

import (
	"context"
	"errors"
	"fmt"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/costgate/costgate/complexity"
)

// costLimit refuses, before execution, every operation that costs more
// than a maximum, priced as the budget prices it (@cost, @listSize).
type costLimit struct {
	maxCost int64
	opts    []complexity.Option
	schema  *complexity.Schema
}

var (
	_ graphql.HandlerExtension        = (*costLimit)(nil)
	_ graphql.OperationContextMutator = (*costLimit)(nil)
)

// FixedCostLimit is a gqlgen extension, charging no bucket and needing no
// middleware, that refuses operations that cost more than maxCost with
// MAX_COST_EXCEEDED (extensions cost and maxCost), and operations it cannot
// price (a list without its slicing argument) with their code; nothing of
// them runs. gqlgen answers these as it answers its validation errors (HTTP
// 422 with errors and no data; over a websocket, the protocol's error
// message). With a budget, use Handler instead:
// its Limits.MaxCost (default 1000) refuses the same operations with 400.
// srv.Use panics on a maxCost below 1, as gqlgen's Use does on any
// extension that does not validate.
//
//	srv.Use(gqllimit.FixedCostLimit(1000))
func FixedCostLimit(maxCost int64, opts ...complexity.Option) graphql.HandlerExtension {
	return &costLimit{maxCost: maxCost, opts: opts}
}

// ExtensionName implements graphql.HandlerExtension.
func (*costLimit) ExtensionName() string { return "CostgateCostLimit" }

// Validate builds the pricing schema from gqlgen's.
func (c *costLimit) Validate(es graphql.ExecutableSchema) error {
	if c.maxCost < 1 {
		return fmt.Errorf("gqllimit: FixedCostLimit(%d): the maximum cost must be at least 1 (every operation costs 1 or more)", c.maxCost)
	}
	s, err := complexity.NewSchema(es.Schema(), c.opts...)
	if err != nil {
		return fmt.Errorf("gqllimit: %w", err)
	}
	c.schema = s
	return nil
}

// MutateOperationContext prices the operation and refuses it over the maximum.
func (c *costLimit) MutateOperationContext(_ context.Context, rc *graphql.OperationContext) *gqlerror.Error {
	res, err := c.schema.AnalyzeOperation(rc.Operation, rc.Variables)
	if err != nil {
		var oe *complexity.OperationError
		if errors.As(err, &oe) {
			return (&Error{Code: oe.Code, Message: oe.Error(), Extensions: map[string]any{"field": oe.Field, "path": oe.Path}}).gqlError()
		}
		return (&Error{Code: CodeValidationFailed, Message: err.Error()}).gqlError()
	}
	if cost := max(res.Cost, 1); cost > c.maxCost {
		return (&Error{Code: CodeMaxCostExceeded,
			Message:    fmt.Sprintf("the operation costs %d, more than the maximum of %d", cost, c.maxCost),
			Extensions: map[string]any{"cost": cost, "maxCost": c.maxCost}}).gqlError()
	}
	return nil
}
