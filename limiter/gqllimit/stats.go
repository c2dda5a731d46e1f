package gqllimit

import (
	"context"
	"encoding/json"
	"math"
	"strconv"
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

// costJSON is Cost as encoding/json encodes it by reflection.
type costJSON Cost

// MarshalJSON writes what encoding/json would, without reflection in the
// common case (no Fields): every answer carries a Cost.
func (c *Cost) MarshalJSON() ([]byte, error) {
	if len(c.Fields) > 0 || c.ThrottleStatus != nil && !plainFloat(c.ThrottleStatus.RestoreRate) {
		return json.Marshal((*costJSON)(c))
	}
	b := make([]byte, 0, 128)
	b = append(b, '{')
	if c.RequestedQueryCost != 0 {
		b = append(b, `"requestedQueryCost":`...)
		b = strconv.AppendInt(b, c.RequestedQueryCost, 10)
		b = append(b, ',')
	}
	b = append(b, `"actualQueryCost":`...)
	if c.ActualQueryCost == nil {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendInt(b, *c.ActualQueryCost, 10)
	}
	if t := c.ThrottleStatus; t != nil {
		b = append(b, `,"throttleStatus":{"maximumAvailable":`...)
		b = strconv.AppendInt(b, t.MaximumAvailable, 10)
		b = append(b, `,"currentlyAvailable":`...)
		b = strconv.AppendInt(b, t.CurrentlyAvailable, 10)
		b = append(b, `,"restoreRate":`...)
		b = strconv.AppendFloat(b, t.RestoreRate, 'f', -1, 64)
		b = append(b, '}')
	}
	return append(b, '}'), nil
}

// plainFloat reports a float encoding/json writes in plain decimal notation,
// as strconv's 'f' format with the shortest precision does.
func plainFloat(f float64) bool {
	a := math.Abs(f)
	return a == 0 || a >= 1e-6 && a < 1e21
}
