package complexity

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"

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
// max(0, requested − actual) is not inflated by it.
func (s *Schema) Actual(op *ast.OperationDefinition, variables map[string]any, data map[string]any) (int64, error) {
	if op == nil {
		return 0, fmt.Errorf("complexity: %w: nil operation", ErrUnknownOperation)
	}
	root := s.rootType(op.Operation)
	if root == nil {
		return 0, fmt.Errorf("complexity: the schema has no %s type", op.Operation)
	}
	if data == nil {
		return 0, nil
	}
	w := actualWalker{inputs: inputs{s: s, op: op, vars: variables}}
	cost := w.set(op.SelectionSet, root, data, true)
	return cost, w.err
}

// ActualJSON is [Schema.Actual] for the raw JSON of the response's "data" member (gqlgen's
// graphql.Response.Data).
func (s *Schema) ActualJSON(op *ast.OperationDefinition, variables map[string]any, data []byte) (int64, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || bytes.Equal(data, []byte("null")) {
		return s.Actual(op, variables, nil)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return 0, fmt.Errorf("complexity: response data: %w", err)
	}
	return s.Actual(op, variables, m)
}

type actualKey struct {
	fragment *ast.FragmentDefinition // a fragment priced on one response object ...
	field    *ast.Field              // ... or an abstract item without __typename, for obj
	obj      *typeInfo
	data     uintptr // the response object, by identity
	root     bool
}

type actualWalker struct {
	inputs
	frags fragments
	memo  map[actualKey]int64
	busy  map[actualKey]bool
	err   error
}

// set prices the selections of set that apply to obj on the response object data.
func (w *actualWalker) set(set ast.SelectionSet, obj *typeInfo, data map[string]any, root bool) int64 {
	var total int64
	for _, sel := range set {
		if w.err != nil {
			return 0
		}
		switch sel := sel.(type) {
		case *ast.Field:
			if !w.included(sel.Directives) {
				continue
			}
			if v, ok := data[responseKey(sel)]; ok {
				total = add(total, w.field(sel, obj, v, root))
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
				key := actualKey{fragment: def, obj: obj, data: identity(data), root: root}
				total = add(total, w.memoized(key, func() int64 {
					return w.set(def.SelectionSet, obj, data, root)
				}))
			}
		}
	}
	return total
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

func identity(m map[string]any) uintptr {
	return reflect.ValueOf(m).Pointer()
}

func (w *actualWalker) field(f *ast.Field, obj *typeInfo, v any, root bool) int64 {
	switch f.Name {
	case "__typename":
		return 0
	case "__schema", "__type":
		if v == nil {
			return 0
		}
		return w.s.cfg.introspectionCost
	}
	fi := obj.fields[f.Name]
	if fi == nil {
		w.err = fmt.Errorf("complexity: %s has no field %q", obj.name, f.Name)
		return 0
	}
	total := int64(0)
	if fi.argCost {
		total = w.argCost(f, fi)
	}
	w.items(v, fi.listDepth, func(item any) {
		total = add(total, w.item(f, fi, obj, item, root))
	})
	return total
}

// items calls fn for each non-null item of v, a value of a type with depth list levels.
// A value that is not the list the schema promises counts as one item.
func (w *actualWalker) items(v any, depth int, fn func(any)) {
	if v == nil {
		return
	}
	if list, ok := v.([]any); ok && depth > 0 {
		for _, x := range list {
			w.items(x, depth-1, fn)
		}
		return
	}
	fn(v)
}

// item is the per-item term w + Σ cost(children) for one returned item.
func (w *actualWalker) item(f *ast.Field, fi *fieldInfo, parent *typeInfo, v any, root bool) int64 {
	m, _ := v.(map[string]any)
	switch fi.typ.kind {
	case ast.Object:
		weight := w.s.weight(fi, fi.typ, nil, parent, root)
		if m == nil {
			return weight
		}
		return add(weight, w.set(f.SelectionSet, fi.typ, m, false))
	case ast.Interface, ast.Union:
		if o := w.concreteType(fi.typ, f.SelectionSet, m); o != nil {
			return add(w.s.weight(fi, o, fi.typ, parent, root), w.set(f.SelectionSet, o, m, false))
		}
		best := w.s.weight(fi, fi.typ, nil, parent, root)
		for i, o := range fi.typ.possible {
			c := w.s.weight(fi, o, fi.typ, parent, root)
			if m != nil {
				key := actualKey{field: f, obj: o, data: identity(m)}
				c = add(c, w.memoized(key, func() int64 { return w.set(f.SelectionSet, o, m, false) }))
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
func (w *actualWalker) concreteType(abstract *typeInfo, set ast.SelectionSet, m map[string]any) *typeInfo {
	if m == nil {
		return nil
	}
	name, ok := m["__typename"].(string)
	if !ok {
		for _, sel := range set {
			if f, isField := sel.(*ast.Field); isField && f.Name == "__typename" {
				if name, ok = m[responseKey(f)].(string); ok {
					break
				}
			}
		}
	}
	if !ok {
		return nil
	}
	o := w.s.types[name]
	if o == nil || !o.memberOf[abstract.name] {
		return nil
	}
	return o
}
