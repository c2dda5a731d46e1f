package complexity

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/vektah/gqlparser/v2/ast"
)

// Counting the actual cost while an operation runs: an executor (costgate's gqlgen
// extension) reports each field it resolved, with the value its resolver returned, to an
// [ExecCount]. Nothing is read back from the response, so nothing the response holds (a
// parent nulled by an error, a client's alias named __typename) changes the price of
// what ran. The [ExecPlan] of the operation says which fields can cost anything at all:
// most leaves cost nothing whatever they return, and are looked up and dropped.

// ExecPlan is what counting an operation's actual cost while it executes needs to know
// of each of its fields, worked out once per operation and shared by every execution of
// it (it does not depend on the variables). It is safe for concurrent use.
type ExecPlan struct {
	s    *Schema
	op   *ast.OperationDefinition
	root *typeInfo
	// The field entries, found by the field's address in a small open-addressing table
	// (the executor looks every field up; most are not there, and a miss must not
	// read the field itself).
	keys   []uintptr
	vals   []int32
	shift  uint
	fields []ExecField
}

// ExecField is one field of an [ExecPlan] that can cost something: an object, interface
// or union, a list, a weighted leaf, a field with weighted arguments, a root mutation
// field, or an introspection field.
type ExecField struct {
	field *ast.Field
	key   string
	// multiple is set when the field may be selected more than once under its response
	// key (directly, or through a parent that is): its occurrences are then counted
	// from its path, as the formula prices each occurrence.
	multiple bool
	mutation bool         // a root mutation field
	parents  []execParent // by the object type the field is selected on
}

type execKind uint8

const (
	execItems         execKind = iota // object or leaf: its weight per item returned
	execAbstract                      // interface or union: by the concrete type of each item
	execIntrospection                 // __schema, __type
	execMutation                      // a root mutation field: its whole requested cost once called
)

// execParent is a field as selected on one object type (interface fields have one per
// implementation, whose @cost and @listSize may be their own).
type execParent struct {
	obj       *typeInfo
	fi        *fieldInfo
	kind      execKind
	listDepth int
	weight    int64   // execItems; execAbstract when every possible type weighs the same
	weights   []int64 // execAbstract when they do not: by fi.typ.possible
	maxWeight int64
	free      bool // costs 0 whatever it returns
	subRoot   bool // a subscription's root field: counted in every event
}

// PathStep is one field on the path from an operation's root to a field that runs: the
// field as the executor ran it (the first of the selections merged under its response
// key) and the object type it was selected on.
type PathStep struct {
	Field  *ast.Field
	Parent string
}

// maxPlanWork bounds the selections a plan visits (fragments expanded once per type):
// an operation past it is not planned, and nothing of its charge is refunded.
const maxPlanWork = 1 << 20

// ErrPlanTooLarge is returned by [Schema.NewExecPlan] for an operation whose selections
// take more than a million steps to plan (interfaces with many implementations nested
// deep): its actual cost is not counted.
var ErrPlanTooLarge = errors.New("complexity: operation too large to plan its actual cost")

// NewExecPlan returns the plan of op, an operation of a validated document (as for
// [Schema.AnalyzeOperation]), for [Schema.NewExecCount].
func (s *Schema) NewExecPlan(op *ast.OperationDefinition) (*ExecPlan, error) {
	root, err := s.actualRoot(op)
	if err != nil {
		return nil, err
	}
	b := execPlanBuilder{
		s: s, p: &ExecPlan{s: s, op: op, root: root},
		index:   map[*ast.Field]int32{},
		visited: map[planVisit]bool{},
		x:       expander{s: s, limit: 2, budget: maxPlanWork},
	}
	b.set(op.SelectionSet, []*typeInfo{root}, false, true)
	if b.err == nil {
		b.err = b.x.err
	}
	if b.err != nil {
		return nil, b.err
	}
	b.finish()
	return b.p, nil
}

// Field returns the entry of f, a field of the plan's operation as the executor runs it;
// nil when f costs nothing whatever it returns.
func (p *ExecPlan) Field(f *ast.Field) *ExecField {
	key := uintptr(unsafe.Pointer(f))
	for i := fieldSlot(key, p.shift); ; i = (i + 1) & (uintptr(len(p.keys)) - 1) {
		switch p.keys[i] {
		case key:
			return &p.fields[p.vals[i]]
		case 0:
			return nil
		}
	}
}

// fieldSlot is where key's probe starts in a table of 2^(64−shift) slots (Fibonacci hashing:
// addresses differ in their middle bits, which the multiplication spreads to the top).
func fieldSlot(key uintptr, shift uint) uintptr {
	return uintptr(uint64(key)*0x9E3779B97F4A7C15>>shift) & (1<<(64-shift) - 1)
}

// NeedsPath reports whether [ExecCount.Add] needs the field's path.
func (f *ExecField) NeedsPath() bool { return f.multiple }

// Mutation reports a root mutation field: it costs its whole requested cost once its
// resolver is called, whatever it returns, so the executor adds it when it calls the
// resolver (with no value), not when the resolver returns.
func (f *ExecField) Mutation() bool { return f.mutation }

func (f *ExecField) parent(name string) *execParent {
	for i := range f.parents {
		if f.parents[i].obj.name == name {
			return &f.parents[i]
		}
	}
	return nil
}

type planVisit struct {
	field *ast.Field
	typ   *typeInfo
	dup   bool
}

type execPlanBuilder struct {
	s       *Schema
	p       *ExecPlan
	index   map[*ast.Field]int32
	visited map[planVisit]bool
	x       expander
	err     error
}

// set visits the selections of set on each object type it may be selected on.
func (b *execPlanBuilder) set(set ast.SelectionSet, types []*typeInfo, dup, root bool) {
	for _, o := range types {
		if b.err != nil || b.x.err != nil {
			return
		}
		occ := b.x.expand(set, o, nil)
		// A key answered by two selections (or one selected twice) is priced once per
		// occurrence: its fields, and everything below them, count from their paths.
		var keys map[string]int64
		if len(occ) > 1 {
			keys = make(map[string]int64, len(occ))
			for _, oc := range occ {
				keys[responseKey(oc.field)] += oc.count
			}
		}
		for _, oc := range occ {
			d := dup || oc.count > 1 || keys[responseKey(oc.field)] > 1
			b.field(oc.field, o, d, root)
		}
	}
}

// field registers f as selected on o and visits its selections.
func (b *execPlanBuilder) field(f *ast.Field, o *typeInfo, dup, root bool) {
	if f.Name == "__typename" {
		return
	}
	j, ok := b.index[f]
	if !ok {
		j = int32(len(b.p.fields))
		b.index[f] = j
		b.p.fields = append(b.p.fields, ExecField{field: f, key: responseKey(f)})
	}
	e := &b.p.fields[j]
	e.multiple = e.multiple || dup
	var fi *fieldInfo
	if f.Name != "__schema" && f.Name != "__type" {
		if fi = o.fields[f.Name]; fi == nil {
			b.err = fmt.Errorf("complexity: %s has no field %q", o.name, f.Name)
			return
		}
	}
	if e.parent(o.name) == nil {
		e.parents = append(e.parents, b.parentInfo(fi, o, root))
	}
	if fi == nil || len(f.SelectionSet) == 0 || (root && o == b.s.mutation) {
		return // a root mutation field is charged whole: nothing below it is counted
	}
	v := planVisit{field: f, typ: fi.typ, dup: dup}
	if b.visited[v] {
		return
	}
	b.visited[v] = true
	types := fi.typ.possible
	if fi.typ.kind == ast.Object {
		types = []*typeInfo{fi.typ}
	}
	b.set(f.SelectionSet, types, dup, false)
}

func (b *execPlanBuilder) parentInfo(fi *fieldInfo, o *typeInfo, root bool) execParent {
	s := b.s
	switch {
	case fi == nil:
		return execParent{obj: o, kind: execIntrospection}
	case root && o == s.mutation:
		return execParent{obj: o, fi: fi, kind: execMutation}
	}
	p := execParent{obj: o, fi: fi, listDepth: fi.listDepth, subRoot: root && o == s.subscr}
	switch fi.typ.kind {
	case ast.Interface, ast.Union:
		p.kind = execAbstract
		uniform := true
		ws := make([]int64, len(fi.typ.possible))
		for i, t := range fi.typ.possible {
			ws[i] = s.weight(fi, t, fi.typ, o, root)
			uniform = uniform && ws[i] == ws[0]
			p.maxWeight = max(p.maxWeight, ws[i])
		}
		if uniform {
			p.weight = p.maxWeight
		} else {
			p.weights = ws
		}
		p.free = p.maxWeight == 0 && !fi.argCost
	default:
		p.weight = s.weight(fi, fi.typ, nil, o, root)
		p.maxWeight = p.weight
		p.free = p.weight == 0 && !fi.argCost
	}
	return p
}

// finish drops the fields that cost nothing on every type and indexes the others.
func (b *execPlanBuilder) finish() {
	p := b.p
	kept := p.fields[:0]
	for _, e := range p.fields {
		free := true
		for _, pr := range e.parents {
			free = free && pr.free
		}
		if free {
			continue
		}
		e.mutation = len(e.parents) == 1 && e.parents[0].kind == execMutation
		kept = append(kept, e)
	}
	p.fields = kept
	// At most a quarter full, so that a miss mostly ends at its first slot.
	bits := uint(3)
	for 1<<bits < 4*len(kept) {
		bits++
	}
	p.keys, p.vals, p.shift = make([]uintptr, 1<<bits), make([]int32, 1<<bits), 64-bits
	for j, e := range kept {
		key := uintptr(unsafe.Pointer(e.field))
		i := fieldSlot(key, p.shift)
		for p.keys[i] != 0 {
			i = (i + 1) & (1<<bits - 1)
		}
		p.keys[i], p.vals[i] = key, int32(j)
	}
}

// expander lists the fields a selection set selects on one object type, fragments
// expanded, each with the number of times it is selected (a fragment spread twice
// selects its fields twice). A fragment is expanded once per type and reused.
type expander struct {
	s      *Schema
	in     *inputs // nil: every selection is included
	limit  int64   // counts saturate here (0: MaxCost)
	budget int
	memo   map[expandKey][]execOcc
	busy   map[expandKey]bool
	err    error
}

type expandKey struct {
	fragment *ast.FragmentDefinition
	obj      *typeInfo
}

type execOcc struct {
	field *ast.Field
	count int64
}

func (x *expander) expand(set ast.SelectionSet, o *typeInfo, dst []execOcc) []execOcc {
	return x.appendSet(dst, set, o, 1)
}

func (x *expander) appendSet(dst []execOcc, set ast.SelectionSet, o *typeInfo, mult int64) []execOcc {
	for _, sel := range set {
		if x.budget--; x.budget < 0 {
			x.err = ErrPlanTooLarge
			return dst
		}
		switch sel := sel.(type) {
		case *ast.Field:
			if x.included(sel.Directives) {
				dst = append(dst, execOcc{field: sel, count: mult})
			}
		case *ast.InlineFragment:
			if x.included(sel.Directives) && o.satisfies(sel.TypeCondition) {
				dst = x.appendSet(dst, sel.SelectionSet, o, mult)
			}
		case *ast.FragmentSpread:
			def := sel.Definition
			if def == nil {
				x.err = fmt.Errorf("complexity: unknown fragment %q", sel.Name)
				return dst
			}
			if !x.included(sel.Directives) || !o.satisfies(def.TypeCondition) {
				continue
			}
			for _, oc := range x.fragment(def, o) {
				dst = append(dst, execOcc{field: oc.field, count: x.mul(oc.count, mult)})
			}
		}
	}
	return dst
}

// fragment is def's selections on o, each field once with its count.
func (x *expander) fragment(def *ast.FragmentDefinition, o *typeInfo) []execOcc {
	key := expandKey{def, o}
	if occ, ok := x.memo[key]; ok {
		return occ
	}
	if x.busy[key] {
		x.err = cycleError(def, nil)
		return nil
	}
	if x.memo == nil {
		x.memo, x.busy = map[expandKey][]execOcc{}, map[expandKey]bool{}
	}
	x.busy[key] = true
	all := x.appendSet(nil, def.SelectionSet, o, 1)
	delete(x.busy, key)
	// One entry per field: a fragment spread twice at each level must not double its list.
	merged := all[:0]
	at := make(map[*ast.Field]int, len(all))
	for _, oc := range all {
		if i, ok := at[oc.field]; ok {
			merged[i].count = x.add(merged[i].count, oc.count)
			continue
		}
		at[oc.field] = len(merged)
		merged = append(merged, oc)
	}
	x.memo[key] = merged
	return merged
}

func (x *expander) included(dirs ast.DirectiveList) bool {
	return x.in == nil || len(dirs) == 0 || x.in.included(dirs)
}

func (x *expander) add(a, b int64) int64 { return x.cap(add(a, b)) }
func (x *expander) mul(a, b int64) int64 { return x.cap(mul(a, b)) }

func (x *expander) cap(n int64) int64 {
	if x.limit > 0 && n > x.limit {
		return x.limit
	}
	return n
}

// ExecCount counts the actual cost of one execution of a plan's operation: the formula
// of [Schema.Analyze] with n(f) the number of items each field's resolver returned (0 for
// null or an error; null items of a list do not count) and each item of an interface or
// union priced by its concrete type. It is safe for concurrent use by the executor's
// goroutines.
//
// A root mutation field costs its whole requested cost once it was called, whatever it
// returned: what it wrote stays written. A subscription's root field counts in every
// event ([ExecCount.BeginEvent] starts the next).
type ExecCount struct {
	plan *ExecPlan
	in   inputs

	total     atomic.Int64
	saturated atomic.Bool  // total passed MaxCost: it stays there
	base      atomic.Int64 // a subscription's root field, counted in each event

	mu      sync.Mutex
	roots   map[string]int64 // mutation: the requested cost by root response key
	charged map[string]bool
	paths   map[string]int64 // occurrences by path, for fields selected more than once
	err     error
}

// NewExecCount returns a counter of one execution of plan's operation with variables.
func (s *Schema) NewExecCount(plan *ExecPlan, variables map[string]any) *ExecCount {
	return &ExecCount{plan: plan, in: inputs{s: s, op: plan.op, vars: variables}}
}

// Add counts field f of the plan (the entry [ExecPlan.Field] returned), resolved on an
// object of type parent, whose resolver returned value (nil for null or an error): a
// list (a slice or an array, [[T]] a slice of them), or one item. A value of an interface
// or union is priced by the object type its Go type is named after (as gqlgen's models
// are), else as the costliest possible type. path is the field's path from the root,
// needed only when f.NeedsPath().
func (c *ExecCount) Add(f *ExecField, parent string, value any, path []PathStep) {
	p := f.parent(parent)
	if p == nil {
		c.fail(fmt.Errorf("complexity: %q has no field %q in this operation", parent, f.field.Name))
		return
	}
	if p.free {
		return
	}
	var cost int64
	switch p.kind {
	case execMutation:
		c.chargeRoot(f.key)
		return
	case execIntrospection:
		if countItems(reflect.ValueOf(value), 0) > 0 {
			cost = c.in.s.cfg.introspectionCost
		}
	case execAbstract:
		if p.fi.argCost {
			cost = c.in.argCost(f.field, p.fi)
		}
		v := reflect.ValueOf(value)
		if p.weights == nil {
			cost = add(cost, mul(countItems(v, p.listDepth), p.weight))
		} else {
			cost = add(cost, c.abstractItems(v, p.listDepth, p))
		}
	default:
		if p.fi.argCost {
			cost = c.in.argCost(f.field, p.fi)
		}
		cost = add(cost, mul(countItems(reflect.ValueOf(value), p.listDepth), p.weight))
	}
	if f.multiple {
		cost = mul(cost, c.occurrences(path))
	}
	if p.subRoot {
		c.base.Store(cost)
		return
	}
	c.add(cost)
}

// BeginEvent starts counting the next event of a subscription.
func (c *ExecCount) BeginEvent() {
	c.total.Store(0)
	c.saturated.Store(false)
}

// Cost returns the actual cost counted so far, or the error that kept it from being
// counted (then the caller should refund nothing).
func (c *ExecCount) Cost() (int64, error) {
	c.mu.Lock()
	err := c.err
	c.mu.Unlock()
	if c.saturated.Load() {
		return MaxCost, err
	}
	return add(c.base.Load(), c.total.Load()), err
}

// add adds n (at most MaxCost) to the total: one atomic addition, the goroutines of
// an execution contend for nothing else. The sum cannot wrap: adding stops once it
// passed MaxCost, far below the int64 range.
func (c *ExecCount) add(n int64) {
	if n == 0 || c.saturated.Load() {
		return
	}
	if c.total.Add(n) >= MaxCost {
		c.saturated.Store(true)
	}
}

func (c *ExecCount) fail(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	c.mu.Unlock()
}

// chargeRoot counts a root mutation field's requested cost, once per response key (its
// occurrences are merged into one call).
func (c *ExecCount) chargeRoot(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.roots == nil && c.err == nil {
		c.roots, c.err = c.in.s.rootCosts(c.plan.op, c.in.vars)
		c.charged = map[string]bool{}
	}
	if c.err != nil || c.charged[key] {
		return
	}
	c.charged[key] = true
	c.add(c.roots[key])
}

// occurrences is how many times the formula prices the field at the end of path: the
// selections answering under each response key of the path, fragment spreads counted
// each time, on the path's types.
func (c *ExecCount) occurrences(path []PathStep) int64 {
	if len(path) == 0 {
		return 1
	}
	var id strings.Builder
	for _, st := range path {
		id.WriteString(st.Parent)
		id.WriteByte('.')
		id.WriteString(responseKey(st.Field))
		id.WriteByte('/')
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if n, ok := c.paths[id.String()]; ok {
		return n
	}
	x := expander{s: c.in.s, in: &c.in, budget: maxPlanWork}
	cur := []execOcc{{count: 1}} // the root's selections, by a field-less entry
	for i, st := range path {
		o := c.in.s.types[st.Parent]
		if o == nil {
			c.err = fmt.Errorf("complexity: unknown type %q", st.Parent)
			return 1
		}
		key := responseKey(st.Field)
		var next []execOcc
		for _, g := range cur {
			set := c.plan.op.SelectionSet
			if i > 0 {
				set = g.field.SelectionSet
			}
			for _, h := range x.expand(set, o, nil) {
				if responseKey(h.field) == key {
					next = mergeOcc(next, h.field, mul(h.count, g.count))
				}
			}
		}
		cur = next
	}
	var n int64
	for _, g := range cur {
		n = add(n, g.count)
	}
	if x.err != nil && c.err == nil {
		c.err = x.err
	}
	if c.paths == nil {
		c.paths = map[string]int64{}
	}
	c.paths[id.String()] = n
	return n
}

func mergeOcc(list []execOcc, f *ast.Field, n int64) []execOcc {
	for i := range list {
		if list[i].field == f {
			list[i].count = add(list[i].count, n)
			return list
		}
	}
	return append(list, execOcc{field: f, count: n})
}

// countItems counts the non-null items of v, a value with depth list levels: 0 or 1 for
// depth 0; a value that is not the list the schema promises counts as one item.
func countItems(v reflect.Value, depth int) int64 {
	v, ok := deref(v)
	if !ok {
		return 0
	}
	if depth == 0 {
		return 1
	}
	if k := v.Kind(); k != reflect.Slice && k != reflect.Array {
		return 1
	}
	n := v.Len()
	if depth == 1 && !nilable(v.Type().Elem().Kind()) {
		return int64(n)
	}
	var total int64
	for i := range n {
		total = add(total, countItems(v.Index(i), depth-1))
	}
	return total
}

// abstractItems sums the weights of the non-null items of v by their concrete types.
func (c *ExecCount) abstractItems(v reflect.Value, depth int, p *execParent) int64 {
	v, ok := deref(v)
	if !ok {
		return 0
	}
	if depth == 0 {
		return c.itemWeight(v, p)
	}
	if k := v.Kind(); k != reflect.Slice && k != reflect.Array {
		return c.itemWeight(v, p)
	}
	var total int64
	for i := range v.Len() {
		total = add(total, c.abstractItems(v.Index(i), depth-1, p))
	}
	return total
}

func (c *ExecCount) itemWeight(v reflect.Value, p *execParent) int64 {
	if i := c.in.s.concreteIndex(p.fi.typ, v.Type()); i >= 0 {
		return p.weights[i]
	}
	return p.maxWeight
}

// deref unwraps interfaces; false for a nil value.
func deref(v reflect.Value) (reflect.Value, bool) {
	for {
		if !v.IsValid() {
			return v, false
		}
		switch v.Kind() {
		case reflect.Interface:
			if v.IsNil() {
				return v, false
			}
			v = v.Elem()
			continue
		case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan:
			if v.IsNil() {
				return v, false
			}
		}
		return v, true
	}
}

func nilable(k reflect.Kind) bool {
	switch k {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan:
		return true
	}
	return false
}

type concreteKey struct {
	abstract *typeInfo
	goType   reflect.Type
}

// concreteIndex is the index in abstract.possible of the object type a Go value of type
// t stands for: the one t (or what t points to) is named after, letter case and
// underscores aside, as gqlgen names its models; -1 when none or several match.
func (s *Schema) concreteIndex(abstract *typeInfo, t reflect.Type) int {
	key := concreteKey{abstract, t}
	if i, ok := s.concrete.Load(key); ok {
		return i.(int)
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	name, found := goTypeName(t.Name()), -1
	for i, o := range abstract.possible {
		if goTypeName(o.name) == name {
			if found >= 0 {
				found = -1
				break
			}
			found = i
		}
	}
	s.concrete.Store(key, found)
	return found
}

func goTypeName(name string) string {
	return strings.ToLower(strings.ReplaceAll(name, "_", ""))
}
