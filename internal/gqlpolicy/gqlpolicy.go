// Package gqlpolicy says which policies can charge GraphQL operations, for
// gqllimit and the config alike.
package gqlpolicy

import (
	"fmt"

	"github.com/costgate/costgate/limiter"
)

// Check reports whether p can charge GraphQL operations: a
// token_bucket, since refunds need one. The error is a *limiter.PolicyError.
func Check(p *limiter.Policy) error {
	if p.Algorithm != limiter.TokenBucket {
		return &limiter.PolicyError{Policy: p.Name, Field: "algorithm",
			Reason: fmt.Sprintf("%s; GraphQL needs a token_bucket (refunds need one)", p.Algorithm)}
	}
	return nil
}
