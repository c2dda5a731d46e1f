package gqllimit

import (
	"fmt"
	"strings"

	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/costgate/costgate/complexity"
)

// LoadSchema parses an upstream's SDL for proxy mode and reads its cost
// directives. An SDL that uses @cost and @listSize without declaring them
// gets costgate's declarations.
func LoadSchema(name, sdl string, opts ...complexity.Option) (*complexity.Schema, error) {
	if !strings.Contains(sdl, "directive @cost") && !strings.Contains(sdl, "directive @listSize") {
		sdl = complexity.DirectivesSDL + "\n" + sdl
	}
	s, err := gqlparser.LoadSchema(&ast.Source{Name: name, Input: sdl})
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", name, err)
	}
	return complexity.NewSchema(s, opts...)
}
