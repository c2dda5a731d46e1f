package complexity

import (
	"fmt"
	"math"

	"github.com/vektah/gqlparser/v2/ast"
)

// Limits are the shape of an operation, with fragments expanded: Depth is the deepest
// nesting of fields (a root field is at depth 1), Aliases the number of aliased fields,
// Fields the number of fields. They count every selection, whatever @skip, @include and
// type conditions say, so they are upper bounds that need no schema and no variables.
type Limits struct {
	Depth   int
	Aliases int
	Fields  int
}

// Measure computes the [Limits] of the named operation of a parsed document that has not
// been validated, so that huge documents are turned away before validation, whose
// overlapping-fields rule is quadratic. It takes time linear in the document: each
// fragment is measured once and reused, and counts saturate at [MaxCost].
//
// With an empty operationName and several operations (or none), it reports the largest
// of each limit over all of them (or zero Limits). A fragment that spreads itself, directly or not, is an error
// wrapping [ErrFragmentCycle]; an unknown fragment counts as empty (validation reports it).
func Measure(doc *ast.QueryDocument, operationName string) (Limits, error) {
	if doc == nil {
		return Limits{}, nil
	}
	m := measurer{frags: fragments{doc: doc}}
	if operationName == "" && len(doc.Operations) != 1 {
		var all counts
		for _, op := range doc.Operations {
			c, err := m.set(op.SelectionSet)
			if err != nil {
				return Limits{}, err
			}
			all = counts{max(all.depth, c.depth), max(all.aliases, c.aliases), max(all.fields, c.fields)}
		}
		return all.limits(), nil
	}
	op := doc.Operations.ForName(operationName)
	if op == nil {
		return Limits{}, fmt.Errorf("complexity: %w %q", ErrUnknownOperation, operationName)
	}
	c, err := m.set(op.SelectionSet)
	return c.limits(), err
}

func measure(op *ast.OperationDefinition, frags fragments) (Limits, error) {
	m := measurer{frags: frags}
	c, err := m.set(op.SelectionSet)
	return c.limits(), err
}

type counts struct {
	depth, aliases, fields int64
}

func (c counts) limits() Limits {
	toInt := func(n int64) int { return int(min(n, math.MaxInt)) }
	return Limits{Depth: toInt(c.depth), Aliases: toInt(c.aliases), Fields: toInt(c.fields)}
}

type measurer struct {
	frags fragments
	memo  map[*ast.FragmentDefinition]*measured
}

type measured struct {
	counts
	done bool
}

func (m *measurer) set(set ast.SelectionSet) (counts, error) {
	var total counts
	merge := func(c counts) {
		total.depth = max(total.depth, c.depth)
		total.aliases = add(total.aliases, c.aliases)
		total.fields = add(total.fields, c.fields)
	}
	for _, sel := range set {
		switch sel := sel.(type) {
		case *ast.Field:
			c, err := m.set(sel.SelectionSet)
			if err != nil {
				return counts{}, err
			}
			c.depth = add(c.depth, 1)
			c.fields = add(c.fields, 1)
			if sel.Alias != "" && sel.Alias != sel.Name {
				c.aliases = add(c.aliases, 1)
			}
			merge(c)
		case *ast.InlineFragment:
			c, err := m.set(sel.SelectionSet)
			if err != nil {
				return counts{}, err
			}
			merge(c)
		case *ast.FragmentSpread:
			c, err := m.fragment(sel)
			if err != nil {
				return counts{}, err
			}
			merge(c)
		}
	}
	return total, nil
}

func (m *measurer) fragment(spread *ast.FragmentSpread) (counts, error) {
	def := m.frags.lookup(spread)
	if def == nil {
		return counts{}, nil
	}
	if e := m.memo[def]; e != nil {
		if !e.done {
			return counts{}, fmt.Errorf("complexity: fragment %q: %w", def.Name, ErrFragmentCycle)
		}
		return e.counts, nil
	}
	if m.memo == nil {
		m.memo = map[*ast.FragmentDefinition]*measured{}
	}
	e := &measured{}
	m.memo[def] = e
	c, err := m.set(def.SelectionSet)
	if err != nil {
		return counts{}, err
	}
	e.counts, e.done = c, true
	return c, nil
}

// fragments finds the definition of a spread: the one validation linked, or the first of
// that name in the document.
type fragments struct {
	doc    *ast.QueryDocument
	byName map[string]*ast.FragmentDefinition
}

func (f *fragments) lookup(spread *ast.FragmentSpread) *ast.FragmentDefinition {
	if spread.Definition != nil {
		return spread.Definition
	}
	if f.doc == nil {
		return nil
	}
	if f.byName == nil {
		f.byName = make(map[string]*ast.FragmentDefinition, len(f.doc.Fragments))
		for _, d := range f.doc.Fragments {
			if _, dup := f.byName[d.Name]; !dup {
				f.byName[d.Name] = d
			}
		}
	}
	return f.byName[spread.Name]
}
