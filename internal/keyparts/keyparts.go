// Package keyparts holds what the doors ask of policies' key parts.
package keyparts

import "github.com/costgate/costgate/limiter"

// Needs reports whether any of policies keys by part.
func Needs(policies []*limiter.Policy, part string) bool {
	for _, p := range policies {
		for _, k := range p.Key {
			if k == part {
				return true
			}
		}
	}
	return false
}

// MaxHeaderBytes bounds the value of a header:NAME key part.
const MaxHeaderBytes = 4096

// IsHeaderValue reports whether a header's value (its lines joined by
// ", ") keys a header:NAME part; an empty or over-long one is the client
// address in its place, as a missing one is.
func IsHeaderValue(v string) bool { return v != "" && len(v) <= MaxHeaderBytes }
