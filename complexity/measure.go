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
	// FragmentDepth is the deepest nesting of fragment spreads: 1 for a fragment spread
	// where no fragment spreads another, 2 for a fragment that spreads one, and so on.
	FragmentDepth int
	// Nodes is the size of the document as written, not expanded (MeasureDocument
	// alone counts it): every definition, selection, argument, directive, variable
	// definition and value, each item of a list and each field of an input object
	// included. Parsing takes time in proportion to it.
	Nodes int
	// Visits is what a validator that walks each operation and each fragment
	// definition with the fragments they reach (gqlparser's) visits: the
	// selections of each, and of each fragment it reaches once, for every
	// operation and fragment definition (MeasureDocument alone counts it). It
	// is about the selections as written, but for fragments spread inside
	// fragments, which are visited again for each fragment above them. It stops
	// counting somewhat past 16 visits per node: FragmentDepth tells a
	// document that goes further.
	Visits int
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
			all = counts{max(all.depth, c.depth), max(all.aliases, c.aliases), max(all.fields, c.fields), max(all.fragDepth, c.fragDepth)}
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
	depth, aliases, fields, fragDepth int64
}

func (c counts) limits() Limits {
	return Limits{Depth: toInt(c.depth), Aliases: toInt(c.aliases), Fields: toInt(c.fields), FragmentDepth: toInt(c.fragDepth)}
}

func toInt(n int64) int { return int(min(n, math.MaxInt)) }

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
		total.fragDepth = max(total.fragDepth, c.fragDepth)
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
		return e.spread(), nil
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
	return e.spread(), nil
}

// spread is a measured fragment's counts where it is spread: one level of spreads more.
func (e *measured) spread() counts {
	c := e.counts
	c.fragDepth = add(c.fragDepth, 1)
	return c
}

// fragments finds the definition of a spread: the one validation linked, or the first of
// that name in the document.
type fragments struct {
	doc   *ast.QueryDocument
	index map[string]*ast.FragmentDefinition
}

func (f *fragments) lookup(spread *ast.FragmentSpread) *ast.FragmentDefinition {
	if spread.Definition != nil {
		return spread.Definition
	}
	return f.byName()[spread.Name]
}

// byName indexes the document's fragments by name, the first of a name winning.
func (f *fragments) byName() map[string]*ast.FragmentDefinition {
	if f.index == nil && f.doc != nil {
		f.index = make(map[string]*ast.FragmentDefinition, len(f.doc.Fragments))
		for _, d := range f.doc.Fragments {
			if _, dup := f.index[d.Name]; !dup {
				f.index[d.Name] = d
			}
		}
	}
	return f.index
}

// MeasureDocument computes the [Limits] of a whole parsed document, not validated: every
// operation and every fragment, selected or not, used or not, so that what a request
// makes the gateway read and validate is bounded, not only the operation it would run.
// Fields and Aliases are summed and Depth and FragmentDepth are the largest over the
// document's roots: its operations, and the fragments that nothing in it spreads (each
// other fragment is counted where it is spread, as [Measure] counts it). Nodes is the
// size of the document as written. A fragment that spreads itself, directly or not, is
// an error wrapping [ErrFragmentCycle], wherever it is; it takes time linear in the
// document, as [Measure] does.
func MeasureDocument(doc *ast.QueryDocument) (Limits, error) {
	if doc == nil {
		return Limits{}, nil
	}
	m := measurer{frags: fragments{doc: doc}}
	var all counts
	root := func(set ast.SelectionSet) error {
		c, err := m.set(set)
		if err != nil {
			return err
		}
		all = counts{
			depth: max(all.depth, c.depth), fragDepth: max(all.fragDepth, c.fragDepth),
			aliases: add(all.aliases, c.aliases), fields: add(all.fields, c.fields),
		}
		return nil
	}
	for _, op := range doc.Operations {
		if err := root(op.SelectionSet); err != nil {
			return Limits{}, err
		}
	}
	// A fragment spread somewhere is counted there; the others are roots. A second
	// definition of a name is never what a spread finds, so it is a root too.
	spread := spreadNames(doc)
	for _, f := range doc.Fragments {
		if spread[f.Name] && m.frags.byName()[f.Name] == f {
			continue
		}
		if err := root(f.SelectionSet); err != nil {
			return Limits{}, err
		}
	}
	// Every fragment, counted from a root or not, is checked for cycles: a cycle that no
	// root reaches is still a cycle.
	for _, f := range doc.Fragments {
		if _, err := m.fragment(&ast.FragmentSpread{Name: f.Name, Definition: f}); err != nil {
			return Limits{}, err
		}
	}
	l := all.limits()
	l.Nodes = toInt(documentNodes(doc))
	l.Visits = toInt(visits(doc, m.frags.byName(), 16*int64(l.Nodes)+1<<16))
	return l, nil
}

// visits counts what walking doc visits (see Limits.Visits), up to limit: each
// fragment's own selections are counted once, then summed over the fragments
// each operation and fragment definition reaches. The document has no cycle
// (MeasureDocument checked).
func visits(doc *ast.QueryDocument, byName map[string]*ast.FragmentDefinition, limit int64) int64 {
	type info struct {
		own     int64
		spreads []*ast.FragmentDefinition // each once
		seen    int                       // the root that reached it last (1-based)
	}
	infos := make(map[*ast.FragmentDefinition]*info, len(byName))
	scan := func(set ast.SelectionSet) *info {
		in := &info{}
		seen := map[*ast.FragmentDefinition]bool{}
		var walk func(ast.SelectionSet)
		walk = func(set ast.SelectionSet) {
			for _, sel := range set {
				in.own++
				switch sel := sel.(type) {
				case *ast.Field:
					walk(sel.SelectionSet)
				case *ast.InlineFragment:
					walk(sel.SelectionSet)
				case *ast.FragmentSpread:
					if f := byName[sel.Name]; f != nil && !seen[f] {
						seen[f] = true
						in.spreads = append(in.spreads, f)
					}
				}
			}
		}
		walk(set)
		return in
	}
	for _, f := range byName {
		infos[f] = scan(f.SelectionSet)
	}
	var total int64
	root := 0
	var reach func(in *info)
	reach = func(in *info) {
		for _, f := range in.spreads {
			g := infos[f]
			if g.seen == root || total > limit {
				continue
			}
			g.seen = root
			total += g.own
			reach(g)
		}
	}
	for _, op := range doc.Operations {
		root++
		in := scan(op.SelectionSet)
		total += in.own
		reach(in)
	}
	for _, f := range doc.Fragments {
		root++
		in := infos[f]
		if in == nil {
			in = scan(f.SelectionSet) // a second definition of a name
		}
		total += in.own
		reach(in)
		if total > limit {
			break
		}
	}
	return total
}

// spreadNames returns the names of the fragments spread anywhere in doc.
func spreadNames(doc *ast.QueryDocument) map[string]bool {
	names := make(map[string]bool, len(doc.Fragments))
	var walk func(ast.SelectionSet)
	walk = func(set ast.SelectionSet) {
		for _, sel := range set {
			switch sel := sel.(type) {
			case *ast.Field:
				walk(sel.SelectionSet)
			case *ast.InlineFragment:
				walk(sel.SelectionSet)
			case *ast.FragmentSpread:
				names[sel.Name] = true
			}
		}
	}
	for _, op := range doc.Operations {
		walk(op.SelectionSet)
	}
	for _, f := range doc.Fragments {
		walk(f.SelectionSet)
	}
	return names
}

// documentNodes counts the nodes of doc as written (see Limits.Nodes).
func documentNodes(doc *ast.QueryDocument) int64 {
	var n int64
	var value func(*ast.Value)
	value = func(v *ast.Value) {
		if v == nil {
			return
		}
		n++
		for _, c := range v.Children {
			value(c.Value)
		}
	}
	directives := func(ds ast.DirectiveList) {
		for _, d := range ds {
			n++
			for _, a := range d.Arguments {
				n++
				value(a.Value)
			}
		}
	}
	var set func(ast.SelectionSet)
	set = func(s ast.SelectionSet) {
		for _, sel := range s {
			n++
			switch sel := sel.(type) {
			case *ast.Field:
				for _, a := range sel.Arguments {
					n++
					value(a.Value)
				}
				directives(sel.Directives)
				set(sel.SelectionSet)
			case *ast.InlineFragment:
				directives(sel.Directives)
				set(sel.SelectionSet)
			case *ast.FragmentSpread:
				directives(sel.Directives)
			}
		}
	}
	for _, op := range doc.Operations {
		n++
		for _, v := range op.VariableDefinitions {
			n++
			value(v.DefaultValue)
			directives(v.Directives)
		}
		directives(op.Directives)
		set(op.SelectionSet)
	}
	for _, f := range doc.Fragments {
		n++
		directives(f.Directives)
		set(f.SelectionSet)
	}
	return n
}
