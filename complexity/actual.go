package complexity

import (
	"bytes"
	"fmt"

	"github.com/vektah/gqlparser/v2/ast"
)

// Actual prices an operation by what it returned: the formula of [Schema.Analyze] with
// n(f) the number of items the response holds for f (0 for null; null items inside a list
// do not count), and an item of an abstract type priced by its __typename (the maximum
// over the possible types when the response does not say). Fields are found under their
// response keys, so aliases work; a key missing from the response (skipped, or cut off
// by an error) costs nothing.
//
// data is the response's "data" member, decoded by encoding/json. op must come from a
// validated document, as for [Schema.AnalyzeOperation]. A selection repeated in the
// document is priced per occurrence, as the requested cost prices it, so the refund
// max(0, requested − actual) is not inflated by it. [Schema.ActualJSON] prices the JSON
// itself, without decoding it into maps, and is the faster of the two. Fragments are
// priced once per response object, so a fragment bomb's response is priced in linear
// time too.
func (s *Schema) Actual(op *ast.OperationDefinition, variables map[string]any, data map[string]any) (int64, error) {
	root, err := s.actualRoot(op)
	if err != nil || data == nil {
		return 0, err
	}
	r := getResponse()
	defer putResponse(r)
	n, err := r.fromValue(data, 0)
	if err != nil {
		return 0, fmt.Errorf("complexity: response data: %w", err)
	}
	return s.actual(op, root, variables, r, n, nil)
}

// ActualJSON is [Schema.Actual] for the raw JSON of the response's "data" member (gqlgen's
// graphql.Response.Data). It reads the JSON into a few slices reused from call to call,
// so that pricing a response allocates next to nothing whatever its size.
func (s *Schema) ActualJSON(op *ast.OperationDefinition, variables map[string]any, data []byte) (int64, error) {
	return s.actualJSON(op, nil, variables, data)
}

// ActualJSONShared is [Schema.ActualJSON] for plans' operation, keeping what it
// works out of the operation's selections in plans for the next response of it
// (of this schema). It prices most responses in one pass over their bytes,
// without reading them into nodes; the price and the errors are ActualJSON's.
func (s *Schema) ActualJSONShared(plans *ActualPlans, variables map[string]any, data []byte) (int64, error) {
	return s.actualJSON(plans.op, plans, variables, data)
}

func (s *Schema) actualJSON(op *ast.OperationDefinition, shared *ActualPlans, variables map[string]any, data []byte) (int64, error) {
	root, err := s.actualRoot(op)
	if err != nil {
		return 0, err
	}
	data = bytes.TrimSpace(data)
	if len(data) == 0 || bytes.Equal(data, []byte("null")) {
		return 0, nil
	}
	if shared != nil && shared.static {
		if cost, ok := s.scanActual(shared, variables, data); ok {
			return cost, nil
		}
	}
	r := getResponse()
	defer putResponse(r)
	n, err := r.parse(data)
	if err != nil {
		return 0, fmt.Errorf("complexity: response data: %w", err)
	}
	if r.kind(n) != rObject {
		return 0, fmt.Errorf("complexity: response data: not an object")
	}
	return s.actual(op, root, variables, r, n, shared)
}

func (s *Schema) actualRoot(op *ast.OperationDefinition) (*typeInfo, error) {
	if op == nil {
		return nil, fmt.Errorf("complexity: %w: nil operation", ErrUnknownOperation)
	}
	root := s.rootType(op.Operation)
	if root == nil {
		return nil, fmt.Errorf("complexity: the schema has no %s type", op.Operation)
	}
	return root, nil
}

func (s *Schema) actual(op *ast.OperationDefinition, root *typeInfo, variables map[string]any, r *response, data int32, shared *ActualPlans) (int64, error) {
	w := actualWalker{inputs: inputs{s: s, op: op, vars: variables}, r: r, recent: r.recent[:0], shared: shared}
	cost := w.set(op.SelectionSet, root, data, true)
	r.recent = w.recent
	return cost, w.err
}

type actualKey struct {
	fragment *ast.FragmentDefinition // a fragment priced on one response object ...
	field    *ast.Field              // ... or an abstract item without __typename, for obj
	obj      *typeInfo
	data     int32 // the response object, by node
	root     bool
}

type actualWalker struct {
	inputs
	r     *response
	frags fragments
	memo  map[actualKey]int64
	busy  map[actualKey]bool
	err   error
	// recent is, by nesting depth, the last two selection sets priced there
	// and what selectionsIn said of them: the items of a list share their
	// sets, so most objects find them here without hashing a key.
	recent []recentSets
	depth  int
	shared *ActualPlans // nil: selectionsIn keeps its answers in r
}

type recentSet struct {
	key   freeKey
	infos []selectionInfo
}

// recentSets are the last two sets at one depth, the latest first.
type recentSets [2]recentSet

// set prices the selections of set that apply to obj on the response object data (a
// node of w.r).
func (w *actualWalker) set(set ast.SelectionSet, obj *typeInfo, data int32, root bool) int64 {
	var total int64
	infos := w.selectionsIn(set, obj, root)
	w.depth++
	defer func() { w.depth-- }()
	for i, sel := range set {
		if w.err != nil {
			return 0
		}
		switch sel := sel.(type) {
		case *ast.Field:
			if infos[i].free || !w.included(sel.Directives) {
				continue
			}
			if v, ok := w.r.get(data, responseKey(sel)); ok {
				total = add(total, w.field(sel, obj, infos[i].field, v, root))
			}
		case *ast.InlineFragment:
			if w.included(sel.Directives) && obj.satisfies(sel.TypeCondition) {
				total = add(total, w.set(sel.SelectionSet, obj, data, root))
			}
		case *ast.FragmentSpread:
			if !w.included(sel.Directives) {
				continue
			}
			def := w.frags.lookup(sel)
			if def == nil {
				w.err = fmt.Errorf("complexity: unknown fragment %q", sel.Name)
				return 0
			}
			if obj.satisfies(def.TypeCondition) {
				key := actualKey{fragment: def, obj: obj, data: data, root: root}
				total = add(total, w.memoized(key, func() int64 {
					return w.set(def.SelectionSet, obj, data, root)
				}))
			}
		}
	}
	return total
}

// selectionsIn reports, for each selection of set on obj, its field's
// schema entry (nil for a fragment or an introspection field) and whether it
// is free: priced 0 whatever the response holds for it (scalars and enums
// without a weight or an argument that costs). Most fields of a response
// are, and they are not looked up in it. It is worked out once per
// selection set and type in a walk, not once per response object.
func (w *actualWalker) selectionsIn(set ast.SelectionSet, obj *typeInfo, root bool) []selectionInfo {
	if len(set) == 0 {
		return nil
	}
	key := freeKey{first: &set[0], obj: obj, root: root}
	if w.depth < len(w.recent) {
		switch recent := &w.recent[w.depth]; key {
		case recent[0].key:
			return recent[0].infos
		case recent[1].key:
			recent[0], recent[1] = recent[1], recent[0]
			return recent[0].infos
		}
	}
	infos := w.lookupSelections(key, set)
	for len(w.recent) <= w.depth {
		w.recent = append(w.recent, recentSets{})
	}
	recent := &w.recent[w.depth]
	recent[1], recent[0] = recent[0], recentSet{key: key, infos: infos}
	return infos
}

// lookupSelections is selectionsIn past the recent sets: kept with the
// operation's shared plans, or in r for this walk.
func (w *actualWalker) lookupSelections(key freeKey, set ast.SelectionSet) []selectionInfo {
	if w.shared != nil {
		if infos, ok := w.shared.selections.Load(key); ok {
			return infos.([]selectionInfo)
		}
		infos := w.appendSelections(nil, set, key.obj, key.root)
		w.shared.selections.Store(key, infos) // read-only from here
		return infos
	}
	r := w.r
	if infos, ok := r.free[key]; ok {
		return infos
	}
	start := len(r.selections)
	r.selections = w.appendSelections(r.selections, set, key.obj, key.root)
	infos := r.selections[start:len(r.selections):len(r.selections)]
	if r.free == nil {
		r.free = map[freeKey][]selectionInfo{}
	}
	r.free[key] = infos
	return infos
}

func (w *actualWalker) appendSelections(infos []selectionInfo, set ast.SelectionSet, obj *typeInfo, root bool) []selectionInfo {
	for _, sel := range set {
		var info selectionInfo
		if f, isField := sel.(*ast.Field); isField {
			info = selectionInfo{field: obj.fields[f.Name], free: w.isFree(f, obj, root)}
		}
		infos = append(infos, info)
	}
	return infos
}

func (w *actualWalker) isFree(f *ast.Field, obj *typeInfo, root bool) bool {
	return w.s.freeField(f, obj, root)
}

// freeField reports a field selected on obj that costs 0 whatever the
// response holds for it.
func (s *Schema) freeField(f *ast.Field, obj *typeInfo, root bool) bool {
	if len(f.SelectionSet) > 0 {
		return false
	}
	fi := obj.fields[f.Name]
	return fi != nil && !fi.argCost && fi.typ.kind != ast.Object && fi.typ.kind != ast.Interface &&
		fi.typ.kind != ast.Union && s.weight(fi, fi.typ, nil, obj, root) == 0
}

// memoized prices each (fragment or abstract item, type, response object) once: without
// it, a fragment spread twice per level would be walked 2^depth times.
func (w *actualWalker) memoized(key actualKey, price func() int64) int64 {
	if c, ok := w.memo[key]; ok {
		return c
	}
	if w.busy[key] {
		w.err = cycleError(key.fragment, key.field)
		return 0
	}
	if w.memo == nil {
		w.memo, w.busy = map[actualKey]int64{}, map[actualKey]bool{}
	}
	w.busy[key] = true
	c := price()
	delete(w.busy, key)
	w.memo[key] = c
	return c
}

// field prices f, whose schema entry on obj is fi, on the value v.
func (w *actualWalker) field(f *ast.Field, obj *typeInfo, fi *fieldInfo, v int32, root bool) int64 {
	switch f.Name {
	case "__typename":
		return 0
	case "__schema", "__type":
		if w.r.kind(v) == rNull {
			return 0
		}
		return w.s.cfg.introspectionCost
	}
	if fi == nil {
		w.err = fmt.Errorf("complexity: %s has no field %q", obj.name, f.Name)
		return 0
	}
	total := int64(0)
	if fi.argCost {
		total = w.argCost(f, fi)
	}
	return add(total, w.items(f, fi, obj, v, fi.listDepth, root))
}

// items prices each non-null item of v, a value of a type with depth list levels. A
// value that is not the list the schema promises counts as one item.
func (w *actualWalker) items(f *ast.Field, fi *fieldInfo, obj *typeInfo, v int32, depth int, root bool) int64 {
	switch w.r.kind(v) {
	case rNull:
		return 0
	case rArray:
		if depth > 0 {
			var total int64
			for _, m := range w.r.items(v) {
				total = add(total, w.items(f, fi, obj, m.node, depth-1, root))
			}
			return total
		}
	}
	return w.item(f, fi, obj, v, root)
}

// item is the per-item term w + Σ cost(children) for one returned item.
func (w *actualWalker) item(f *ast.Field, fi *fieldInfo, parent *typeInfo, v int32, root bool) int64 {
	object := w.r.kind(v) == rObject
	switch fi.typ.kind {
	case ast.Object:
		weight := w.s.weight(fi, fi.typ, nil, parent, root)
		if !object {
			return weight
		}
		return add(weight, w.set(f.SelectionSet, fi.typ, v, false))
	case ast.Interface, ast.Union:
		if object {
			if o := w.concreteType(fi.typ, f.SelectionSet, v); o != nil {
				return add(w.s.weight(fi, o, fi.typ, parent, root), w.set(f.SelectionSet, o, v, false))
			}
		}
		best := w.s.weight(fi, fi.typ, nil, parent, root)
		for i, o := range fi.typ.possible {
			c := w.s.weight(fi, o, fi.typ, parent, root)
			if object {
				key := actualKey{field: f, obj: o, data: v}
				c = add(c, w.memoized(key, func() int64 { return w.set(f.SelectionSet, o, v, false) }))
			}
			if i == 0 || c > best {
				best = c
			}
		}
		return best
	}
	return w.s.weight(fi, fi.typ, nil, parent, root)
}

// concreteType reads the item's __typename, under its own key or an alias selected
// directly in set.
func (w *actualWalker) concreteType(abstract *typeInfo, set ast.SelectionSet, obj int32) *typeInfo {
	name, ok := w.typename(obj, "__typename")
	if !ok {
		for _, sel := range set {
			if f, isField := sel.(*ast.Field); isField && f.Name == "__typename" {
				if name, ok = w.typename(obj, responseKey(f)); ok {
					break
				}
			}
		}
	}
	if !ok {
		return nil
	}
	o := w.s.types[string(name)]
	if o == nil || !o.memberOf[abstract.name] {
		return nil
	}
	return o
}

func (w *actualWalker) typename(obj int32, key string) ([]byte, bool) {
	n, ok := w.r.get(obj, key)
	if !ok {
		return nil, false
	}
	return w.r.text(n)
}
