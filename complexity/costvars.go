package complexity

import (
	"slices"

	"github.com/vektah/gqlparser/v2/ast"
)

// CostVariables lists, sorted and without duplicates, the variables of op whose values
// can change its price: those in the if: of @skip and @include, and those inside the
// arguments the price reads — slicing arguments, arguments that carry a @cost weight or
// whose input objects hold weighted fields, and, with an input object cost, every
// argument of an input object type. The others (an id, a search term, a cursor) cannot.
//
// Two requests for op whose variables agree on these names, each absent in both or
// present with equal values, get the same result from [Schema.Analyze] and
// [Schema.AnalyzeOperation], cost or error: a cache of prices can key an operation on
// the values of its cost variables only. The list is conservative: a variable in it may
// still leave the price unchanged.
//
// op must come from a validated document (its fragment spreads linked to their
// definitions, as for AnalyzeOperation); if a spread is not linked, every variable op
// declares is listed.
func (s *Schema) CostVariables(op *ast.OperationDefinition) []string {
	if op == nil {
		return nil
	}
	c := costVariables{s: s, names: map[string]bool{}, fragments: map[*ast.FragmentDefinition]bool{}}
	if root := s.rootType(op.Operation); root != nil {
		c.set(op.SelectionSet, []*typeInfo{root})
	}
	if c.unlinked {
		for _, v := range op.VariableDefinitions {
			c.names[v.Variable] = true
		}
	}
	out := make([]string, 0, len(c.names))
	for name := range c.names {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// costVariables walks an operation once, fragments included once each, noting the
// variables in the places that pricing reads. It follows every object type a selection
// can apply to, as pricing does, but walks a fragment for all the types its condition
// allows rather than per place it is spread: a superset, and linear in the document.
type costVariables struct {
	s         *Schema
	names     map[string]bool
	fragments map[*ast.FragmentDefinition]bool
	unlinked  bool
}

func (c *costVariables) set(set ast.SelectionSet, types []*typeInfo) {
	for _, sel := range set {
		switch sel := sel.(type) {
		case *ast.Field:
			c.directives(sel.Directives)
			switch sel.Name {
			case "__typename", "__schema", "__type": // fixed costs, whatever the arguments
				continue
			}
			var next []*typeInfo
			for _, o := range types {
				fi := o.fields[sel.Name]
				if fi == nil {
					continue
				}
				c.arguments(sel, fi)
				next = c.concrete(next, fi.typ)
			}
			if len(sel.SelectionSet) > 0 && len(next) > 0 {
				c.set(sel.SelectionSet, next)
			}
		case *ast.InlineFragment:
			c.directives(sel.Directives)
			var narrowed []*typeInfo
			for _, o := range types {
				if o.satisfies(sel.TypeCondition) {
					narrowed = append(narrowed, o)
				}
			}
			if len(narrowed) > 0 {
				c.set(sel.SelectionSet, narrowed)
			}
		case *ast.FragmentSpread:
			c.directives(sel.Directives)
			def := sel.Definition
			if def == nil {
				c.unlinked = true
				continue
			}
			if c.fragments[def] {
				continue
			}
			c.fragments[def] = true
			if t := c.s.types[def.TypeCondition]; t != nil {
				c.set(def.SelectionSet, c.concrete(nil, t))
			}
		}
	}
}

// concrete adds to list the object types that can stand for t.
func (c *costVariables) concrete(list []*typeInfo, t *typeInfo) []*typeInfo {
	switch t.kind {
	case ast.Object:
		if !slices.Contains(list, t) {
			list = append(list, t)
		}
	case ast.Interface, ast.Union:
		for _, o := range t.possible {
			if !slices.Contains(list, o) {
				list = append(list, o)
			}
		}
	}
	return list
}

func (c *costVariables) directives(dirs ast.DirectiveList) {
	for _, d := range dirs {
		if d.Name == "skip" || d.Name == "include" {
			if a := d.Arguments.ForName("if"); a != nil {
				c.values(a.Value)
			}
		}
	}
}

// arguments notes the variables of the arguments of f that its price reads.
func (c *costVariables) arguments(f *ast.Field, fi *fieldInfo) {
	for _, a := range f.Arguments {
		def := fi.args[a.Name]
		if def == nil {
			continue
		}
		if def.hasWeight || (def.named != nil && def.named.inputCost) || slices.ContainsFunc(slicing(fi), func(sa slicingArgument) bool {
			return sa.path[0] == a.Name
		}) {
			c.values(a.Value)
		}
	}
}

func slicing(fi *fieldInfo) []slicingArgument {
	if fi.listSize == nil {
		return nil
	}
	return fi.listSize.slicing
}

// values notes every variable inside v.
func (c *costVariables) values(v *ast.Value) {
	if v == nil {
		return
	}
	if v.Kind == ast.Variable {
		c.names[v.Raw] = true
		return
	}
	for _, child := range v.Children {
		c.values(child.Value)
	}
}
