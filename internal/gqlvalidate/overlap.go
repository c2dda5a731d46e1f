package gqlvalidate

import (
	"fmt"
	"slices"
	"strings"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/validator/core"
)

// overlapRule is the GraphQL spec's FieldsInSetCanMerge (graphql-js's
// OverlappingFieldsCanBeMerged) in time linear in each operation with its
// fragments expanded, the way XING's engineers described and apollo-compiler
// implements it: instead of comparing every pair of fields that share a
// response name, the fields of a selection are grouped by response name and
// each compared with the first of its group; the selections of a group are
// then merged and checked the same way, one level down.
//
// Two checks, as the spec's: every field of a response name has the same
// shape (list and non-null wrappers, the same leaf type), and those whose
// parent types can overlap (the same object type, or an interface or union)
// are the same field with the same arguments. Fields on two different object
// types never both run, and may differ in name and arguments.
//
// Only operations are checked, with the fragments they spread: a fragment
// that no operation spreads is an error of its own (NoUnusedFragments), and
// one that is spread is checked wherever it lands.
var overlapRule = core.Rule{
	Name: "OverlappingFieldsCanBeMerged",
	RuleFunc: func(observers *core.Events, addError core.AddErrFunc) {
		var m *merger // one per document: what it learned of a fragment holds in every operation
		observers.OnOperation(func(walker *core.Walker, op *ast.OperationDefinition) {
			if m == nil {
				m = newMerger(walker, addError)
			}
			if m.exhausted {
				return
			}
			fields := m.expand([]ast.SelectionSet{op.SelectionSet})
			m.sameShape(fields, 0)
			m.sameField(fields, 0)
		})
	},
}

func newMerger(walker *core.Walker, addError core.AddErrFunc) *merger {
	m := &merger{walker: walker, addError: addError, reported: map[conflictKey]bool{}, checked: map[string]bool{}, ids: map[*ast.Field]uint32{}}
	m.fragments = make(map[string]*ast.FragmentDefinition, len(walker.Document.Fragments))
	for _, f := range walker.Document.Fragments {
		if _, dup := m.fragments[f.Name]; !dup {
			m.fragments[f.Name] = f
		}
	}
	m.budget = mergeBudgetPerField*documentFields(walker.Document) + mergeBudgetBase
	return m
}

// The merge checks visit each field of an operation a small number of times
// in the common case; the budget stops a document built to make them visit
// more (each visit of a field in a merged selection counts one), with an
// error instead of the time: mergeBudgetPerField visits per field of the
// document as written, and mergeBudgetBase more.
const (
	mergeBudgetPerField = 64
	mergeBudgetBase     = 1 << 14
)

// maxMergeDepth bounds the recursion: selections nest no deeper than the
// response does, and a fragment cycle (reported by its own rule) would
// otherwise nest without end.
const maxMergeDepth = 128

type merger struct {
	walker    *core.Walker
	addError  core.AddErrFunc
	fragments map[string]*ast.FragmentDefinition
	reported  map[conflictKey]bool
	// checked holds the groups of fields already checked (by key), so that a
	// group reached again by another path is not checked again: without it,
	// fields on interfaces that join the fields of each object type would be
	// checked once per object type at each level, exponentially.
	checked   map[string]bool
	ids       map[*ast.Field]uint32
	budget    int
	exhausted bool
}

type conflictKey struct{ a, b *ast.Field }

// spend takes n visits from the budget, and reports false (once, with an
// error) when it is spent.
func (m *merger) spend(n int) bool {
	if m.exhausted {
		return false
	}
	if m.budget -= n; m.budget >= 0 {
		return true
	}
	m.exhausted = true
	m.addError(core.Message("the document's selections are too intricate to check that its fields merge (spread fewer fragments and interfaces into one another)"))
	return false
}

// once reports whether the group of fields (of kind) is seen for the first
// time, and remembers it.
func (m *merger) once(kind byte, fields []*ast.Field) bool {
	ids := make([]uint32, len(fields))
	for i, f := range fields {
		id, ok := m.ids[f]
		if !ok {
			id = uint32(len(m.ids))
			m.ids[f] = id
		}
		ids[i] = id
	}
	slices.Sort(ids)
	key := make([]byte, 1, 1+4*len(ids))
	key[0] = kind
	for _, id := range ids {
		key = append(key, byte(id), byte(id>>8), byte(id>>16), byte(id>>24))
	}
	k := string(key)
	if m.checked[k] {
		return false
	}
	m.checked[k] = true
	return true
}

// documentFields counts the fields of doc as written.
func documentFields(doc *ast.QueryDocument) int {
	n := 0
	var walk func(ast.SelectionSet)
	walk = func(set ast.SelectionSet) {
		for _, sel := range set {
			switch sel := sel.(type) {
			case *ast.Field:
				n++
				walk(sel.SelectionSet)
			case *ast.InlineFragment:
				walk(sel.SelectionSet)
			}
		}
	}
	for _, op := range doc.Operations {
		walk(op.SelectionSet)
	}
	for _, f := range doc.Fragments {
		walk(f.SelectionSet)
	}
	return n
}

// expand returns the fields of sets, with inline fragments and the fragments
// they spread expanded, each fragment once.
func (m *merger) expand(sets []ast.SelectionSet) []*ast.Field {
	var (
		fields []*ast.Field
		seen   map[string]bool
	)
	queue := slices.Clone(sets)
	for len(queue) > 0 {
		set := queue[0]
		queue = queue[1:]
		for _, sel := range set {
			switch sel := sel.(type) {
			case *ast.Field:
				fields = append(fields, sel)
			case *ast.InlineFragment:
				queue = append(queue, sel.SelectionSet)
			case *ast.FragmentSpread:
				if seen[sel.Name] {
					continue
				}
				if seen == nil {
					seen = map[string]bool{}
				}
				seen[sel.Name] = true
				if f := m.fragments[sel.Name]; f != nil {
					queue = append(queue, f.SelectionSet)
				}
			}
		}
	}
	return fields
}

// byResponseName groups fields by response name, in the order the names
// first appear.
func byResponseName(fields []*ast.Field) [][]*ast.Field {
	index := make(map[string]int, len(fields))
	var groups [][]*ast.Field
	for _, f := range fields {
		name := f.Alias
		if name == "" {
			name = f.Name
		}
		i, ok := index[name]
		if !ok {
			i = len(groups)
			index[name] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], f)
	}
	return groups
}

// subSelections merges the selection sets of fields.
func (m *merger) subSelections(fields []*ast.Field) []*ast.Field {
	var sets []ast.SelectionSet
	for _, f := range fields {
		if len(f.SelectionSet) > 0 {
			sets = append(sets, f.SelectionSet)
		}
	}
	if len(sets) == 0 {
		return nil
	}
	return m.expand(sets)
}

// sameShape checks that the fields of each response name have the same
// shape, whatever their parents.
func (m *merger) sameShape(fields []*ast.Field, depth int) {
	if depth > maxMergeDepth || !m.spend(len(fields)) {
		return
	}
	for _, group := range byResponseName(fields) {
		if !m.once('s', group) {
			continue
		}
		a := group[0]
		for _, b := range group[1:] {
			if a.Definition == nil || b.Definition == nil {
				continue // an unknown field: FieldsOnCorrectType reports it
			}
			if typesConflict(m.walker.Schema, a.Definition.Type, b.Definition.Type) {
				m.report(a, b, fmt.Sprintf("they return different types, %s and %s", a.Definition.Type, b.Definition.Type))
			}
		}
		if sub := m.subSelections(group); len(sub) > 0 {
			m.sameShape(sub, depth+1)
		}
	}
}

// sameField checks that the fields of each response name whose parent types
// can overlap are the same field with the same arguments.
func (m *merger) sameField(fields []*ast.Field, depth int) {
	if depth > maxMergeDepth || !m.spend(len(fields)) {
		return
	}
	for _, group := range byResponseName(fields) {
		for _, overlapping := range m.byCommonParent(group) {
			if len(overlapping) == 0 || !m.once('f', overlapping) {
				continue
			}
			a := overlapping[0]
			for _, b := range overlapping[1:] {
				switch {
				case a.Name != b.Name:
					m.report(a, b, fmt.Sprintf("%s and %s are different fields", quote(a.Name), quote(b.Name)))
				case !sameArguments(a.Arguments, b.Arguments):
					m.report(a, b, "they have different arguments")
				}
			}
			if sub := m.subSelections(overlapping); len(sub) > 0 {
				m.sameField(sub, depth+1)
			}
		}
	}
}

// byCommonParent splits fields into the groups that can run on one object:
// those of each object type, each with the fields on interfaces and unions
// (which may be any object type); or, when there are none on an object type,
// the fields on interfaces and unions alone.
func (m *merger) byCommonParent(fields []*ast.Field) [][]*ast.Field {
	if len(fields) < 2 {
		return [][]*ast.Field{fields}
	}
	var abstract []*ast.Field
	index := map[string]int{}
	var concrete [][]*ast.Field
	for _, f := range fields {
		parent := f.ObjectDefinition
		switch {
		case parent == nil:
			continue // on an unknown type: reported elsewhere
		case parent.Kind == ast.Object:
			i, ok := index[parent.Name]
			if !ok {
				i = len(concrete)
				index[parent.Name] = i
				concrete = append(concrete, nil)
			}
			concrete[i] = append(concrete[i], f)
		case parent.IsAbstractType():
			abstract = append(abstract, f)
		}
	}
	if len(concrete) == 0 {
		return [][]*ast.Field{abstract}
	}
	for i := range concrete {
		concrete[i] = append(concrete[i], abstract...)
	}
	return concrete
}

// report adds the first conflict found between a and b, once, whatever
// path led to it.
func (m *merger) report(a, b *ast.Field, reason string) {
	if m.reported[conflictKey{a, b}] || m.reported[conflictKey{b, a}] {
		return
	}
	m.reported[conflictKey{a, b}] = true
	name := b.Alias
	if name == "" {
		name = b.Name
	}
	opts := []core.ErrorOption{
		core.Message("fields %s conflict: %s; give one of them another alias to select both", quote(name), reason),
		core.At(b.Position),
	}
	if a.Position != nil {
		opts = append(opts, core.At(a.Position))
	}
	m.addError(opts...)
}

// quote quotes a name for a message, cut to MaxPathName bytes.
func quote(name string) string {
	return `"` + Truncate(name, MaxPathName) + `"`
}

// typesConflict reports two field types that cannot both describe one
// response value: different list or non-null wrappers, or different types
// where one is a scalar or an enum. Two composite types are compared through
// their selections instead.
func typesConflict(schema *ast.Schema, a, b *ast.Type) bool {
	for {
		if a.NonNull != b.NonNull || (a.Elem == nil) != (b.Elem == nil) {
			return true
		}
		if a.Elem == nil {
			break
		}
		a, b = a.Elem, b.Elem
	}
	da, db := schema.Types[a.NamedType], schema.Types[b.NamedType]
	if da == nil || db == nil {
		return false
	}
	if da.IsLeafType() || db.IsLeafType() {
		return a.NamedType != b.NamedType
	}
	return false
}

// sameArguments reports two argument lists that give the same values to the
// same names, in any order.
func sameArguments(a, b ast.ArgumentList) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 {
		return true
	}
	other := make(map[string]*ast.Value, len(b))
	for _, arg := range b {
		other[arg.Name] = arg.Value
	}
	if len(other) != len(b) {
		return false // a name given twice: UniqueArgumentNames reports it
	}
	for _, arg := range a {
		v, ok := other[arg.Name]
		if !ok || !sameValue(arg.Value, v) {
			return false
		}
	}
	return true
}

// sameValue compares two values as written: the fields of input objects in
// any order, list items in order, variables by name.
func sameValue(a, b *ast.Value) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.Kind != b.Kind || a.Raw != b.Raw || len(a.Children) != len(b.Children) {
		return false
	}
	switch a.Kind {
	case ast.ListValue:
		for i := range a.Children {
			if !sameValue(a.Children[i].Value, b.Children[i].Value) {
				return false
			}
		}
	case ast.ObjectValue:
		other := make(map[string]*ast.Value, len(b.Children))
		for _, c := range b.Children {
			other[c.Name] = c.Value
		}
		for _, c := range a.Children {
			v, ok := other[c.Name]
			if !ok || !sameValue(c.Value, v) {
				return false
			}
		}
	}
	return true
}

// fragmentCyclesRule reports each fragment spread that closes a cycle of
// spreads, in one depth-first walk of the document's fragments (gqlparser's
// rule looks each spread up in the list of fragments).
var fragmentCyclesRule = core.Rule{
	Name: "NoFragmentCycles",
	RuleFunc: func(observers *core.Events, addError core.AddErrFunc) {
		done := false
		// The walk calls OnFragment once per fragment definition, after the
		// operations: the whole document is checked at the first call.
		observers.OnFragment(func(walker *core.Walker, _ *ast.FragmentDefinition) {
			if done {
				return
			}
			done = true
			findCycles(walker.Document, addError)
		})
	},
}

func findCycles(doc *ast.QueryDocument, addError core.AddErrFunc) {
	byName := make(map[string]*ast.FragmentDefinition, len(doc.Fragments))
	for _, f := range doc.Fragments {
		if _, dup := byName[f.Name]; !dup {
			byName[f.Name] = f
		}
	}
	const (
		unvisited = iota
		onPath
		finished
	)
	state := make(map[*ast.FragmentDefinition]int, len(byName))
	var path []string
	var visit func(f *ast.FragmentDefinition)
	var spreads func(set ast.SelectionSet)
	spreads = func(set ast.SelectionSet) {
		for _, sel := range set {
			switch sel := sel.(type) {
			case *ast.Field:
				spreads(sel.SelectionSet)
			case *ast.InlineFragment:
				spreads(sel.SelectionSet)
			case *ast.FragmentSpread:
				g := byName[sel.Name]
				switch {
				case g == nil:
				case state[g] == onPath:
					addError(core.Message("fragment %s spreads itself (through %s)", quote(sel.Name), cyclePath(path, sel.Name)), core.At(sel.Position))
				case state[g] == unvisited:
					visit(g)
				}
			}
		}
	}
	visit = func(f *ast.FragmentDefinition) {
		state[f] = onPath
		path = append(path, f.Name)
		spreads(f.SelectionSet)
		path = path[:len(path)-1]
		state[f] = finished
	}
	for _, f := range doc.Fragments {
		if state[f] == unvisited {
			visit(f)
		}
	}
}

// cyclePath names the fragments of the cycle that name closes, from path
// (the fragments being visited), at most eight of them.
func cyclePath(path []string, name string) string {
	start := len(path) - 1
	for start > 0 && path[start] != name {
		start--
	}
	cycle := path[start:]
	var b strings.Builder
	for i, n := range cycle {
		if i == 8 {
			fmt.Fprintf(&b, ", and %d more", len(cycle)-i)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(quote(n))
	}
	return b.String()
}
