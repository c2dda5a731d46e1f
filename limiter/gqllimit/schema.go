package gqllimit

import "github.com/costgate/costgate/complexity"

// LoadSchema parses an upstream's SDL for proxy mode and reads its cost directives.
//
// Deprecated: use [complexity.LoadSDL], which it forwards to.
func LoadSchema(name, sdl string, opts ...complexity.Option) (*complexity.Schema, error) {
	return complexity.LoadSDL(name, sdl, opts...)
}
