package gqllimit

import (
	"context"
	"math"
	"time"

	"github.com/costgate/costgate/complexity"
	"github.com/costgate/costgate/limiter"
)

// Cost is extensions.cost, in Shopify's shape. Every answer to a document
// that parsed carries it, rejections included.
type Cost struct {
	// RequestedQueryCost is the price, at least 1. It is left out (0) when
	// the operation was not priced: a validation error, or an operation
	// turned away before validation whose document the pricing could not
	// read as it stands.
	RequestedQueryCost int64 `json:"requestedQueryCost,omitempty"`
	// ActualQueryCost is null when nothing ran (throttled, rejected, dry run).
	ActualQueryCost *int64 `json:"actualQueryCost"`
	// ThrottleStatus is the caller's bucket after the charge, or as it
	// stands when nothing was charged; left out when the store could not be
	// read.
	ThrottleStatus *ThrottleStatus `json:"throttleStatus,omitempty"`
	// Fields is the breakdown asked for with Costgate-Cost-Debug: 1.
	Fields []complexity.FieldCost `json:"fields,omitempty"`
}

// ThrottleStatus is the caller's bucket after the operation.
type ThrottleStatus struct {
	MaximumAvailable   int64   `json:"maximumAvailable"`
	CurrentlyAvailable int64   `json:"currentlyAvailable"`
	RestoreRate        float64 `json:"restoreRate"`
}

// Stats is what costgate knows of the operation in flight; resolvers read it
// with GetStats (the example API's rateLimit field does).
type Stats struct {
	// Requested is the amount charged: the priced cost, at least 1.
	Requested int64
	// Actual is set once the operation ran.
	Actual *int64
	// Charged reports that the bucket was charged (not a dry run, not measure
	// mode's would-be denial).
	Charged bool
	DryRun  bool
	// Limit, Remaining and ResetAt describe the bucket after the charge
	// (HasBucket: once the bucket was read).
	Limit, Remaining int64
	ResetAt          time.Time
	RestoreRate      float64
	HasBucket        bool
	Fields           []complexity.FieldCost
}

// GetStats returns the stats of the operation ctx belongs to, or nil.
func GetStats(ctx context.Context) *Stats {
	if st := stateFrom(ctx); st != nil && st.priced {
		return &st.stats
	}
	return nil
}

func (s *Stats) cost() *Cost {
	c := &Cost{RequestedQueryCost: s.Requested, ActualQueryCost: s.Actual, Fields: s.Fields}
	if s.HasBucket {
		c.ThrottleStatus = &ThrottleStatus{MaximumAvailable: s.Limit, CurrentlyAvailable: max(s.Remaining, 0), RestoreRate: s.RestoreRate}
	}
	return c
}

// restoreRate is the policy's refill per second, to two decimals (1000 per
// minute is 16.67).
func restoreRate(p *limiter.Policy) float64 {
	return math.Round(float64(p.Limit)/p.Period.Seconds()*100) / 100
}
