package complexity

import (
	"fmt"
	"strings"

	"github.com/vektah/gqlparser/v2/ast"
)

// MaxBreakdown is the most entries [Result.Breakdown] holds.
const MaxBreakdown = 1000

// Result is the requested cost of an operation and its shape.
type Result struct {
	// Cost is the requested cost, at most MaxCost. The amount to charge is max(Cost, 1).
	Cost int64
	// Limits are the operation's depth, aliases and fields, as Measure counts them.
	Limits
	// Breakdown is the cost per field path, in document order; only with WithBreakdown.
	Breakdown []FieldCost
	// BreakdownTruncated is set when paths beyond MaxBreakdown were left out.
	BreakdownTruncated bool
}

// FieldCost is one entry of a cost breakdown. Path is the response path
// ("products.nodes.variants", aliases as the response names them); DefinedWeight is
// the field's weight w(f) (for an abstract type, that of the costliest possible type);
// RequestedTotal is what the field adds to the operation's cost: its cost summed over
// every occurrence and multiplied by the sizes of the lists around it. The entries of the
// root fields add up to Result.Cost.
type FieldCost struct {
	Path           string `json:"path"`
	DefinedWeight  int64  `json:"definedWeight"`
	RequestedTotal int64  `json:"requestedTotal"`
}

// Analyze prices the named operation of doc (the only one, when operationName is empty)
// with the given variables. The cost of an operation is the sum of its root fields'
// costs. For a field f of named type T,
//
//	cost(f) = argCost(f) + n(f) × (w(f) + Σ cost(children))
//
// where:
//
//   - w(f) is the first of: @cost(weight:) on the field; the mutation cost (10, see
//     [WithMutationCost]) for a root Mutation field; @cost on T; 1 when T is an object,
//     interface or union; 0 for a scalar or an enum.
//   - n(f) is 1 unless f is a list. For a list it is the largest slicing argument with a
//     value (a literal, a variable, or the argument's schema default; null is no value;
//     negative values count as 0), else @listSize(assumedSize:), else the default list
//     size (10, see [WithDefaultListSize]). Each inner level of [[T]] multiplies by the
//     default list size again. A slicing argument that is a list (ids: [ID!]) gives the
//     length of its value; one written as a path ("input.page.first") reads the Int or
//     list at the end of the path through the input objects.
//   - A field named in its parent's @listSize(sizedFields:) takes the parent's size, and
//     the parent then counts once: with products(first: 10) @listSize(sizedFields:
//     ["nodes"]), products counts 1 and products.nodes counts 10. An entry may be a path
//     to a deeper list, "page.items" or, in Apollo's selection syntax,
//     "results { page }": the list at its end takes the size, the fields on the way are
//     priced as usual.
//   - argCost(f) adds the @cost of each argument present in the operation and of each
//     input field present in their values, and the input object cost (0, see
//     [WithInputObjectCost]) of each input object value among them; once per field, not
//     per item.
//   - @cost and @listSize on an interface field apply to each implementing type's field
//     that declares none of its own, whether the operation selects the field on the
//     interface or on the type.
//   - For an interface or union T, the per-item term w + Σ cost(children) is the maximum
//     over T's possible object types, each priced with its own weight, its own field
//     definitions, and only the selections that apply to it.
//   - @skip and @include are honoured; __typename costs 0; __schema and __type cost the
//     introspection cost (1, see [WithIntrospectionCost]) whatever they select. Aliased
//     and repeated selections are each priced (an upper bound).
//   - Sums and products saturate at [MaxCost], 2^53−1.
//
// When requireOneSlicingArgument is true (the IBM default, and the default of
// [DirectivesSDL]), exactly one slicing argument must be given, else the operation is
// rejected with an [*OperationError] of code [CodeSlicingArgumentRequired]. An argument
// with a schema default may be left out. The check applies only to fields that list
// slicing arguments.
//
// doc should have passed validation against the schema; Analyze does not rely on it (it
// resolves fields and fragments by name itself) and reports an unknown field, type or
// fragment, or a fragment cycle, as an error rather than a wrong price.
//
// The work is linear in the document: each fragment is priced once per (fragment,
// concrete type, inherited list size) and reused, and so are the selections of an
// interface or union field for each possible type. A document of 30 fragments that each
// spread the next twice (2^30 expansions) prices in microseconds.
func (s *Schema) Analyze(doc *ast.QueryDocument, operationName string, variables map[string]any, opts ...AnalyzeOption) (Result, error) {
	if doc == nil {
		return Result{}, fmt.Errorf("complexity: %w: nil document", ErrUnknownOperation)
	}
	op := doc.Operations.ForName(operationName)
	if op == nil {
		return Result{}, fmt.Errorf("complexity: %w %q", ErrUnknownOperation, operationName)
	}
	return s.analyze(op, fragments{doc: doc}, variables, opts)
}

// AnalyzeOperation is [Schema.Analyze] for an operation already selected from a
// validated document, such as gqlgen's graphql.OperationContext.Operation: its fragment
// spreads must be linked to their definitions, as validation leaves them.
func (s *Schema) AnalyzeOperation(op *ast.OperationDefinition, variables map[string]any, opts ...AnalyzeOption) (Result, error) {
	if op == nil {
		return Result{}, fmt.Errorf("complexity: %w: nil operation", ErrUnknownOperation)
	}
	return s.analyze(op, fragments{}, variables, opts)
}

func (s *Schema) analyze(op *ast.OperationDefinition, frags fragments, variables map[string]any, opts []AnalyzeOption) (Result, error) {
	var cfg analyzeConfig
	if len(opts) > 0 {
		cfg = applyAnalyzeOptions(opts)
	}
	root := s.rootType(op.Operation)
	if root == nil {
		return Result{}, fmt.Errorf("complexity: the schema has no %s type", op.Operation)
	}
	limits, err := measure(op, frags)
	if err != nil {
		return Result{}, err
	}
	a := analyzer{
		inputs:    inputs{s: s, op: op, vars: variables},
		frags:     frags,
		breakdown: cfg.breakdown,
	}
	cost, entries := a.set(op.SelectionSet, root, sizing{}, true)
	if a.err != nil {
		return Result{}, a.err
	}
	res := Result{Cost: cost, Limits: limits}
	if cfg.breakdown {
		res.Breakdown, res.BreakdownTruncated = entries.list(), a.truncated
	}
	return res, nil
}

// applyAnalyzeOptions is apart so that its config, which the options see by pointer, is
// only allocated when there are options.
func applyAnalyzeOptions(opts []AnalyzeOption) analyzeConfig {
	var cfg analyzeConfig
	for _, o := range opts {
		o(&cfg)
	}
	return cfg
}

// sizing carries a parent's list size down its sizedFields paths: by is the level of the
// paths that the current selections are at.
type sizing struct {
	by   *sizedNode
	size int64
}

type memoKey struct {
	fragment *ast.FragmentDefinition // a fragment priced for obj ...
	field    *ast.Field              // ... or the selections of an abstract field, priced for obj
	obj      *typeInfo
	sizing   sizing
	root     bool
}

type memoEntry struct {
	cost    int64
	entries *breakdown
	done    bool
}

type analyzer struct {
	inputs
	frags     fragments
	memo      map[memoKey]memoEntry
	breakdown bool
	truncated bool
	err       error
}

func (a *analyzer) fail(err error) {
	if a.err == nil {
		a.err = err
	}
}

// set prices the selections of set that apply to the object type obj.
func (a *analyzer) set(set ast.SelectionSet, obj *typeInfo, ctx sizing, root bool) (int64, *breakdown) {
	var (
		total   int64
		entries *breakdown
	)
	for _, sel := range set {
		if a.err != nil {
			return 0, nil
		}
		var (
			cost int64
			sub  *breakdown
		)
		switch sel := sel.(type) {
		case *ast.Field:
			if !a.included(sel.Directives) {
				continue
			}
			cost, sub = a.field(sel, obj, ctx, root)
		case *ast.InlineFragment:
			if !a.included(sel.Directives) || !obj.satisfies(sel.TypeCondition) {
				continue
			}
			cost, sub = a.set(sel.SelectionSet, obj, ctx, root)
		case *ast.FragmentSpread:
			if !a.included(sel.Directives) {
				continue
			}
			def := a.frags.lookup(sel)
			if def == nil {
				a.fail(fmt.Errorf("complexity: unknown fragment %q", sel.Name))
				return 0, nil
			}
			if !obj.satisfies(def.TypeCondition) {
				continue
			}
			cost, sub = a.fragment(def, obj, ctx, root)
		}
		total = add(total, cost)
		if a.breakdown {
			entries = a.merge(entries, sub, "", 1)
		}
	}
	return total, entries
}

func (a *analyzer) fragment(def *ast.FragmentDefinition, obj *typeInfo, ctx sizing, root bool) (int64, *breakdown) {
	key := memoKey{fragment: def, obj: obj, sizing: ctx, root: root}
	return a.memoized(key, func() (int64, *breakdown) {
		return a.set(def.SelectionSet, obj, ctx, root)
	})
}

func (a *analyzer) memoized(key memoKey, price func() (int64, *breakdown)) (int64, *breakdown) {
	if e, ok := a.memo[key]; ok {
		if !e.done {
			a.fail(cycleError(key.fragment, key.field))
			return 0, nil
		}
		return e.cost, e.entries
	}
	if a.memo == nil {
		a.memo = map[memoKey]memoEntry{}
	}
	a.memo[key] = memoEntry{}
	cost, entries := price()
	a.memo[key] = memoEntry{cost: cost, entries: entries, done: true}
	return cost, entries
}

func responseKey(f *ast.Field) string {
	if f.Alias != "" {
		return f.Alias
	}
	return f.Name
}

func (a *analyzer) field(f *ast.Field, obj *typeInfo, ctx sizing, root bool) (int64, *breakdown) {
	switch f.Name {
	case "__typename":
		return 0, nil
	case "__schema", "__type":
		c := a.s.cfg.introspectionCost
		return c, a.leaf(responseKey(f), c, c)
	}
	fi := obj.fields[f.Name]
	if fi == nil {
		a.fail(fmt.Errorf("complexity: %s has no field %q", obj.name, f.Name))
		return 0, nil
	}
	var argCost int64
	if fi.argCost {
		argCost = a.argCost(f, fi)
	}

	// A parent's sizedFields path reaching f either ends here (f takes the size) or goes
	// on below. The field's own sizedFields, if any, take over for its children.
	n, childCtx := int64(1), sizing{}
	step, onPath := ctx.by.step(f.Name)
	if step.sized && fi.listDepth > 0 {
		n = mul(ctx.size, pow(a.s.cfg.defaultListSize, fi.listDepth-1))
	} else if fi.listDepth > 0 || fi.listSize != nil {
		size, ok := a.listSize(f, fi)
		if !ok {
			return 0, nil
		}
		if fi.listSize != nil && fi.listSize.sized != nil {
			childCtx = sizing{by: fi.listSize.sized, size: size} // the parent counts once
		} else {
			n = mul(size, pow(a.s.cfg.defaultListSize, fi.listDepth-1))
		}
	}
	if onPath && step.next != nil && childCtx.by == nil {
		childCtx = sizing{by: step.next, size: ctx.size}
	}

	var (
		weight, perItem int64
		children        *breakdown
	)
	switch fi.typ.kind {
	case ast.Object:
		weight = a.s.weight(fi, fi.typ, nil, obj, root)
		var c int64
		c, children = a.set(f.SelectionSet, fi.typ, childCtx, false)
		perItem = add(weight, c)
	case ast.Interface, ast.Union:
		weight = a.s.weight(fi, fi.typ, nil, obj, root)
		perItem = weight
		memo := nested(f.SelectionSet)
		for i, o := range fi.typ.possible {
			w := a.s.weight(fi, o, fi.typ, obj, root)
			var (
				c   int64
				sub *breakdown
			)
			if memo {
				key := memoKey{field: f, obj: o, sizing: childCtx}
				c, sub = a.memoized(key, func() (int64, *breakdown) {
					return a.set(f.SelectionSet, o, childCtx, false)
				})
			} else {
				c, sub = a.set(f.SelectionSet, o, childCtx, false)
			}
			if p := add(w, c); i == 0 || p > perItem {
				weight, perItem, children = w, p, sub
			}
		}
	default:
		weight = a.s.weight(fi, fi.typ, nil, obj, root)
		perItem = weight
	}
	if a.err != nil {
		a.prependPath(f)
		return 0, nil
	}
	cost := add(argCost, mul(n, perItem))
	if !a.breakdown {
		return cost, nil
	}
	key := responseKey(f)
	entries := a.leaf(key, weight, cost)
	return cost, a.merge(entries, children, key+".", n)
}

// nested reports whether set reaches below its own leaf fields (a field with selections,
// or a fragment spread). Only then are an abstract field's selections memoized per
// possible type: a set of leaves costs no more to price again than to look up, and the
// abstract field itself is priced at most once per key of the memoized node above it.
func nested(set ast.SelectionSet) bool {
	for _, sel := range set {
		switch sel := sel.(type) {
		case *ast.Field:
			if len(sel.SelectionSet) > 0 {
				return true
			}
		case *ast.InlineFragment:
			if nested(sel.SelectionSet) {
				return true
			}
		case *ast.FragmentSpread:
			return true
		}
	}
	return false
}

// weight is w(f) for an item of object type o (o is the field's own type when that is
// not abstract; abstract is the field's type when it is).
func (s *Schema) weight(fi *fieldInfo, o, abstract *typeInfo, parent *typeInfo, root bool) int64 {
	switch {
	case fi.hasWeight:
		return fi.weight
	case root && parent == s.mutation:
		return s.cfg.mutationCost
	case o.hasWeight:
		return o.weight
	case abstract != nil && abstract.hasWeight:
		return abstract.weight
	case o.kind == ast.Object || o.kind == ast.Interface || o.kind == ast.Union:
		return 1
	}
	return 0
}

// listSize is the size of a list field (or of the lists a connection field sizes): the
// largest slicing argument with a value, else assumedSize, else default_list_size.
func (a *analyzer) listSize(f *ast.Field, fi *fieldInfo) (int64, bool) {
	ls := fi.listSize
	if ls == nil {
		return a.s.cfg.defaultListSize, true
	}
	if len(ls.slicing) > 0 {
		var (
			size                int64
			found               bool
			explicit, defaulted int
		)
		for _, sa := range ls.slicing {
			n, ok, isExplicit := a.slicingValue(f, fi, sa)
			if !ok {
				continue
			}
			if isExplicit {
				explicit++
			} else {
				defaulted++
			}
			size, found = max(size, n), true
		}
		if ls.requireOne {
			// A slicing argument with a schema default may be omitted (IBM).
			if count := explicit; count != 1 && (count != 0 || defaulted != 1) {
				got := explicit
				if got == 0 {
					got = defaulted
				}
				a.fail(slicingError(f, fi, ls, got))
				return 0, false
			}
		}
		if found {
			return size, true
		}
	}
	if ls.hasAssumedSize {
		return ls.assumedSize, true
	}
	return a.s.cfg.defaultListSize, true
}

// slicingValue reads one slicing argument: explicit when the operation gave it (as a
// literal or a variable), not when it comes from a schema default.
func (a *analyzer) slicingValue(f *ast.Field, fi *fieldInfo, sa slicingArgument) (n int64, ok, explicit bool) {
	def := fi.args[sa.path[0]]
	if def == nil {
		return 0, false, false
	}
	v, state, explicit := a.argument(f, def)
	typ := def.named
	for _, step := range sa.path[1:] {
		if state != present || typ == nil {
			return 0, false, false
		}
		field := typ.inputFields[step]
		if field == nil {
			return 0, false, false
		}
		var childExplicit bool
		if v.lit != nil && v.lit.Kind == ast.ObjectValue {
			childExplicit = v.lit.Children.ForName(step) != nil
		} else if m, isMap := v.json.(map[string]any); isMap {
			_, childExplicit = m[step]
		}
		v, state = a.child(v, field)
		explicit = explicit && childExplicit
		typ = field.named
	}
	if state != present {
		return 0, false, false
	}
	if sa.list {
		return length(v), true, explicit
	}
	n, ok = size(v)
	return n, ok, explicit
}

func slicingError(f *ast.Field, fi *fieldInfo, ls *listSizeInfo, got int) error {
	names := make([]string, len(ls.slicing))
	for i, sa := range ls.slicing {
		names[i] = sa.name
	}
	return &OperationError{
		Code:  CodeSlicingArgumentRequired,
		Field: fi.coordinate,
		Path:  responseKey(f), // prependPath adds the parents on the way out
		Message: fmt.Sprintf("exactly one slicing argument (%s) must have a value, got %d",
			strings.Join(names, ", "), got),
	}
}

// cycleError reports a fragment (or, past a fragment spread at another level, a field)
// reached again while it is being priced.
func cycleError(fragment *ast.FragmentDefinition, field *ast.Field) error {
	if fragment != nil {
		return fmt.Errorf("complexity: fragment %q: %w", fragment.Name, ErrFragmentCycle)
	}
	return fmt.Errorf("complexity: field %q: %w", responseKey(field), ErrFragmentCycle)
}

// prependPath puts f's response key in front of the path of an OperationError raised
// below it, so the path is only built when there is an error.
func (a *analyzer) prependPath(f *ast.Field) {
	if e, ok := a.err.(*OperationError); ok {
		e.Path = responseKey(f) + "." + e.Path
	}
}

// rootCosts is the requested cost of each root field of op by response key, the
// occurrences under one key added up, as Analyze prices them.
func (s *Schema) rootCosts(op *ast.OperationDefinition, variables map[string]any) (map[string]int64, error) {
	root := s.rootType(op.Operation)
	if root == nil {
		return nil, fmt.Errorf("complexity: the schema has no %s type", op.Operation)
	}
	a := analyzer{inputs: inputs{s: s, op: op, vars: variables}}
	out := map[string]int64{}
	a.rootSet(op.SelectionSet, root, out)
	if a.err != nil {
		return nil, a.err
	}
	return out, nil
}

func (a *analyzer) rootSet(set ast.SelectionSet, root *typeInfo, out map[string]int64) {
	for _, sel := range set {
		if a.err != nil {
			return
		}
		switch sel := sel.(type) {
		case *ast.Field:
			if a.included(sel.Directives) {
				cost, _ := a.field(sel, root, sizing{}, true)
				out[responseKey(sel)] = add(out[responseKey(sel)], cost)
			}
		case *ast.InlineFragment:
			if a.included(sel.Directives) && root.satisfies(sel.TypeCondition) {
				a.rootSet(sel.SelectionSet, root, out)
			}
		case *ast.FragmentSpread:
			def := a.frags.lookup(sel)
			if def == nil {
				a.fail(fmt.Errorf("complexity: unknown fragment %q", sel.Name))
				return
			}
			if a.included(sel.Directives) && root.satisfies(def.TypeCondition) {
				a.rootSet(def.SelectionSet, root, out)
			}
		}
	}
}
