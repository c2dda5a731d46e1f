package graph

import (
	"context"
	"time"

	"github.com/costgate/costgate/graph/model"
	"github.com/costgate/costgate/limiter/gqllimit"
)

// CostgateRateLimit is a Resolver.RateLimitInfo for the API served behind
// gqllimit: the rateLimit field reports the operation's price and the
// caller's bucket after the charge (as it stands, for a dry run).
func CostgateRateLimit(ctx context.Context) (model.RateLimit, bool) {
	st := gqllimit.GetStats(ctx)
	if st == nil {
		return model.RateLimit{}, false
	}
	remaining := max(st.Remaining, 0)
	return model.RateLimit{
		Cost:      int(st.Requested),
		Limit:     int(st.Limit),
		Remaining: int(remaining),
		ResetAt:   st.ResetAt.UTC().Format(time.RFC3339),
		Used:      int(st.Limit - remaining),
	}, true
}
