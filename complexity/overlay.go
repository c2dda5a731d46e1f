package complexity

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/vektah/gqlparser/v2/ast"
)

// Costs is a cost overlay: the @cost and @listSize settings of a schema written outside
// it, for a schema that cannot be annotated (generated, or owned by someone else). Keys
// are GraphQL schema coordinates: "Type", "Type.field", "Type.field(arg:)" and
// "Input.field". Each setting an entry gives replaces the directive of the same kind at
// its coordinate, and is read and checked by the rules that read the directive (see
// [NewSchema]); a setting the entry leaves nil keeps the schema's own directive.
type Costs map[string]CostEntry

// CostEntry is what one coordinate of a [Costs] overlay sets.
type CostEntry struct {
	// Cost replaces @cost(weight:).
	Cost *int64
	// ListSize replaces @listSize; it applies to fields only.
	ListSize *ListSize
}

// ListSize holds the arguments of @listSize. A nil AssumedSize or
// RequireOneSlicingArgument is an argument left out, as in the SDL:
// requireOneSlicingArgument then takes the schema's declared default (true when the
// schema declares none).
type ListSize struct {
	AssumedSize               *int64
	SlicingArguments          []string
	SizedFields               []string
	RequireOneSlicingArgument *bool
}

// Weight returns a pointer to n, for [CostEntry.Cost] and [ListSize.AssumedSize].
func Weight(n int64) *int64 { return &n }

// WithCosts applies a cost overlay over the schema's own directives, for a schema you
// cannot annotate: the settings of @cost and @listSize keyed by schema coordinate
// ("Query.products", "Product", "Query.search(limit:)", "ReviewInput.body"), each
// replacing the directive of its kind at its coordinate. [NewSchema] refuses
// an entry that names nothing in the schema, sets nothing, puts listSize anywhere but on
// a field, or gives a setting the directive rules refuse; each such error is a
// [*SchemaError] whose Coordinate is the entry's key and whose InCosts is set.
func WithCosts(costs Costs) Option {
	return func(c *config) { c.costs = costs }
}

// Coordinate is a parsed schema coordinate: Type, Type.Field or Type.Field(Argument:).
type Coordinate struct {
	Type, Field, Argument string
}

// ParseCoordinate reads a schema coordinate as [Costs] keys write it.
func ParseCoordinate(s string) (Coordinate, error) {
	var c Coordinate
	rest, hasArg := strings.CutSuffix(s, ":)")
	if hasArg {
		var ok bool
		if rest, c.Argument, ok = strings.Cut(rest, "("); !ok || !isName(c.Argument) {
			return c, fmt.Errorf("%q is not a schema coordinate (Type, Type.field, Type.field(arg:))", s)
		}
	}
	c.Type, c.Field, _ = strings.Cut(rest, ".")
	if !isName(c.Type) || (c.Field != "" || strings.Contains(rest, ".")) && !isName(c.Field) || hasArg && c.Field == "" {
		return c, fmt.Errorf("%q is not a schema coordinate (Type, Type.field, Type.field(arg:))", s)
	}
	return c, nil
}

func (c Coordinate) String() string {
	switch {
	case c.Argument != "":
		return c.Type + "." + c.Field + "(" + c.Argument + ":)"
	case c.Field != "":
		return c.Type + "." + c.Field
	}
	return c.Type
}

// isName reports a GraphQL name: /[_A-Za-z][_0-9A-Za-z]*/.
func isName(s string) bool {
	for i, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return s != ""
}

// Unknown returns the keys of c that name nothing in schema (or do not parse), sorted: a
// schema that changed under an overlay (read again by introspection) may have lost them.
func (c Costs) Unknown(schema *ast.Schema) []string {
	var out []string
	for key := range c {
		if _, err := resolveCoordinate(schema, key); err != nil {
			out = append(out, key)
		}
	}
	slices.Sort(out)
	return out
}

// Without returns a copy of c without the given keys.
func (c Costs) Without(keys ...string) Costs {
	out := make(Costs, len(c))
	for k, v := range c {
		if !slices.Contains(keys, k) {
			out[k] = v
		}
	}
	return out
}

// coordinateKind is what a coordinate names.
type coordinateKind int

const (
	namesType coordinateKind = iota
	namesField
	namesArgument
	namesInputField
)

// resolveCoordinate finds what key names in schema, or says why it names nothing.
func resolveCoordinate(schema *ast.Schema, key string) (coordinateKind, error) {
	c, err := ParseCoordinate(key)
	if err != nil {
		return 0, err
	}
	def := schema.Types[c.Type]
	if def == nil {
		return 0, fmt.Errorf("names nothing: the schema has no type %s", c.Type)
	}
	if c.Field == "" {
		return namesType, nil
	}
	f := def.Fields.ForName(c.Field)
	if f == nil || (def.Kind != ast.Object && def.Kind != ast.Interface && def.Kind != ast.InputObject) {
		return 0, fmt.Errorf("names nothing: %s %s has no field %s", kindName(def.Kind), c.Type, c.Field)
	}
	if def.Kind == ast.InputObject {
		if c.Argument != "" {
			return 0, fmt.Errorf("names nothing: %s.%s is an input field, which has no arguments", c.Type, c.Field)
		}
		return namesInputField, nil
	}
	if c.Argument == "" {
		return namesField, nil
	}
	if f.Arguments.ForName(c.Argument) == nil {
		return 0, fmt.Errorf("names nothing: %s.%s has no argument %s", c.Type, c.Field, c.Argument)
	}
	return namesArgument, nil
}

// kindName is how the SDL introduces a type of kind k.
func kindName(k ast.DefinitionKind) string {
	switch k {
	case ast.Object:
		return "type"
	case ast.InputObject:
		return "input"
	}
	return strings.ToLower(string(k))
}

// checkCosts refuses the entries that name nothing, set nothing, or put a setting where
// its directive does not go. The settings themselves are checked where the directives
// are read.
func (l *loader) checkCosts() {
	for _, key := range sortedKeys(l.s.cfg.costs) {
		entry := l.s.cfg.costs[key]
		kind, err := resolveCoordinate(l.s.ast, key)
		if err != nil {
			l.failCosts(key, "%v", err)
			continue
		}
		if entry.Cost == nil && entry.ListSize == nil {
			l.failCosts(key, "sets neither cost nor listSize")
		}
		if entry.ListSize != nil && kind != namesField {
			l.failCosts(key, "listSize applies to fields (Type.field) only")
		}
		if entry.Cost != nil && kind == namesType && l.s.ast.Types[key].Kind == ast.InputObject {
			l.failCosts(key, "an input object type has no weight of its own; weigh its fields (%s.field)", key)
		}
	}
}

func (l *loader) failCosts(key, format string, args ...any) {
	l.errs = append(l.errs, &SchemaError{Coordinate: key, Message: fmt.Sprintf(format, args...), InCosts: true})
}

// overlay returns the directive the overlay writes at coordinate in place of the
// schema's: @cost (listSize false) or @listSize, or nil when the overlay sets none.
func (l *loader) overlay(coordinate string, listSize bool) *ast.Directive {
	entry, ok := l.s.cfg.costs[coordinate]
	if !ok {
		return nil
	}
	if !listSize {
		if entry.Cost == nil {
			return nil
		}
		return &ast.Directive{Name: costDirective, Arguments: ast.ArgumentList{
			{Name: "weight", Value: intValue(*entry.Cost)},
		}}
	}
	ls := entry.ListSize
	if ls == nil {
		return nil
	}
	name := listSizeDirective
	if len(l.names.listSize) > 0 {
		name = l.names.listSize[0] // the declaration's requireOneSlicingArgument default applies
	}
	d := &ast.Directive{Name: name}
	if ls.AssumedSize != nil {
		d.Arguments = append(d.Arguments, &ast.Argument{Name: "assumedSize", Value: intValue(*ls.AssumedSize)})
	}
	if ls.SlicingArguments != nil {
		d.Arguments = append(d.Arguments, &ast.Argument{Name: "slicingArguments", Value: stringListValue(ls.SlicingArguments)})
	}
	if ls.SizedFields != nil {
		d.Arguments = append(d.Arguments, &ast.Argument{Name: "sizedFields", Value: stringListValue(ls.SizedFields)})
	}
	if ls.RequireOneSlicingArgument != nil {
		d.Arguments = append(d.Arguments, &ast.Argument{Name: "requireOneSlicingArgument",
			Value: &ast.Value{Kind: ast.BooleanValue, Raw: strconv.FormatBool(*ls.RequireOneSlicingArgument)}})
	}
	return d
}

func intValue(n int64) *ast.Value {
	return &ast.Value{Kind: ast.IntValue, Raw: strconv.FormatInt(n, 10)}
}

func stringListValue(items []string) *ast.Value {
	v := &ast.Value{Kind: ast.ListValue}
	for _, s := range items {
		v.Children = append(v.Children, &ast.ChildValue{Value: &ast.Value{Kind: ast.StringValue, Raw: s}})
	}
	return v
}
