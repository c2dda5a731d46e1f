package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/costgate/costgate/complexity"
	"github.com/costgate/costgate/limiter"
)

// CostsConfig is graphql.costs: schema coordinates mapped to cost settings,
// written inline or in a file of their own (costs: costs.yaml).
type CostsConfig struct {
	// File is the path of the entries' YAML file, "" when they are inline.
	File string
	// Entries by schema coordinate (Type, Type.field, Type.field(arg:),
	// Input.field).
	Entries map[string]CostEntryConfig

	src *source // where the entries came from: the config, or File
}

// CostEntryConfig is one entry: each setting given replaces the directive
// of its kind at the coordinate.
type CostEntryConfig struct {
	Cost     *int64          `yaml:"cost"`
	ListSize *ListSizeConfig `yaml:"listSize"`
}

// ListSizeConfig takes the arguments of @listSize.
type ListSizeConfig struct {
	AssumedSize               *int64   `yaml:"assumedSize"`
	SlicingArguments          []string `yaml:"slicingArguments"`
	SizedFields               []string `yaml:"sizedFields"`
	RequireOneSlicingArgument *bool    `yaml:"requireOneSlicingArgument"`
}

var costsType = reflect.TypeFor[CostsConfig]()

// decodeCosts reads graphql.costs: a file path, or the entries inline.
func (d *decoder) decodeCosts(field string, n ast.Node, v reflect.Value) {
	costs := v.Addr().Interface().(*CostsConfig)
	if s, ok := d.scalarString(n); ok {
		costs.File = s
		return
	}
	costs.src = d.src
	d.decodeMap(field, n, reflect.ValueOf(&costs.Entries).Elem())
}

const costsField = "graphql.costs"

// loadCostsFile reads the entries of graphql.costs from its file, relative
// to dir, and validates the config with them. Its errors name the costs
// file and its lines.
func (c *Config) loadCostsFile(dir string) error {
	costs := c.GraphQL.Costs
	if costs == nil || costs.File == "" {
		return nil
	}
	if err := c.readCostsFile(dir); err != nil {
		return err
	}
	return c.Validate()
}

// LoadCosts reads a file of graphql.costs entries on its own, as costgate
// price -costs takes one: the overlay is the result's Costs, and its
// SchemaErrors report the schema's refusals against the file's lines.
func LoadCosts(path string) (*Config, error) {
	c := &Config{src: newSource(path), GraphQL: GraphQLConfig{Costs: &CostsConfig{File: path}}}
	if err := c.readCostsFile(""); err != nil {
		return nil, err
	}
	v := &validator{c: c}
	v.costs()
	if err := joinErrors(v.errs); err != nil {
		return nil, err
	}
	return c, nil
}

// readCostsFile reads the entries of graphql.costs from its file, relative
// to dir.
func (c *Config) readCostsFile(dir string) error {
	costs := c.GraphQL.Costs
	if !filepath.IsAbs(costs.File) {
		costs.File = filepath.Join(dir, costs.File)
	}
	data, err := os.ReadFile(costs.File)
	if err != nil {
		return fmt.Errorf("config: %s: %w", costsField, err)
	}
	src := newSource(costs.File)
	file, err := parser.ParseBytes(data, 0)
	if err != nil {
		return joinErrors([]*Error{syntaxError(costs.File, err)})
	}
	d := &decoder{src: src, aliases: map[*ast.AliasNode]ast.Node{}, merged: map[ast.Node][]pair{}}
	var body ast.Node
	for _, doc := range file.Docs {
		if doc != nil && !isNil(doc.Body) {
			body = doc.Body
			break
		}
	}
	d.budget = expansion*d.collectAnchors(body, map[string]ast.Node{}) + 1024
	costs.Entries = nil
	if body != nil {
		d.decode(costsField, nil, body, reflect.ValueOf(&costs.Entries).Elem())
	}
	if len(d.errs) > 0 {
		return joinErrors(d.errs)
	}
	costs.src = src
	return nil
}

// costs checks what graphql.costs says without the schema: the keys are
// schema coordinates. The schema's refusals come from SchemaErrors.
func (v *validator) costs() {
	if v.c.GraphQL.Costs == nil {
		return
	}
	for _, key := range sortedKeys(v.c.GraphQL.Costs.Entries) {
		if _, err := complexity.ParseCoordinate(key); err != nil {
			v.errs = append(v.errs, v.c.costsError(key, err.Error()))
		}
	}
}

// costsError is a problem of the entry key of graphql.costs, against its
// line in the file it came from.
func (c *Config) costsError(key, reason string) *Error {
	var src *source
	if c.GraphQL.Costs != nil {
		src = c.GraphQL.Costs.src
	}
	if src == nil {
		src = c.src
	}
	field := childPath(costsField, key)
	return &Error{File: src.name, Line: src.lines[field], Field: field, Reason: reason}
}

// Costs is graphql.costs as the complexity overlay; nil when it has no entries.
func (c *Config) Costs() complexity.Costs {
	if c.GraphQL.Costs == nil || len(c.GraphQL.Costs.Entries) == 0 {
		return nil
	}
	entries := c.GraphQL.Costs.Entries
	if len(entries) == 0 {
		return nil
	}
	out := make(complexity.Costs, len(entries))
	for key, e := range entries {
		entry := complexity.CostEntry{Cost: e.Cost}
		if ls := e.ListSize; ls != nil {
			entry.ListSize = &complexity.ListSize{
				AssumedSize:               ls.AssumedSize,
				SlicingArguments:          ls.SlicingArguments,
				SizedFields:               ls.SizedFields,
				RequireOneSlicingArgument: ls.RequireOneSlicingArgument,
			}
		}
		out[key] = entry
	}
	return out
}

// SchemaErrors reports err, from building the pricing schema with
// ComplexityOptions, against the config: a refusal of a graphql.costs entry
// names the entry and its line; any other problem is the schema's, named by
// what stands for it (the SDL file, or the example API).
func (c *Config) SchemaErrors(err error, what string) error {
	if err == nil {
		return nil
	}
	var out []error
	for _, e := range limiter.Errors(err) {
		var se *complexity.SchemaError
		if errors.As(e, &se) && se.InCosts {
			out = append(out, c.costsError(se.Coordinate, se.Message))
			continue
		}
		out = append(out, fmt.Errorf("%s: %w", what, e))
	}
	return errors.Join(out...)
}
