package complexity

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/vektah/gqlparser/v2/ast"
)

// ActualCounter prices what an operation returned while the response streams past:
// [Schema.ActualJSON] for a caller that never holds the whole response (costgate's
// proxy copies an upstream's reply to its client through one). Its memory is bounded by
// the operation and the nesting of the response, not by the response's size.
//
// The caller reports the JSON of the response's "data" member, value by value, in the
// order it is read: [ActualCounter.BeginObject], [ActualCounter.Key] before each member's
// value, [ActualCounter.BeginArray], [ActualCounter.End] for either, and
// [ActualCounter.String], [ActualCounter.Scalar] or [ActualCounter.Null] for the rest.
// [ActualCounter.Cost] then returns the actual cost. The price is the one ActualJSON
// gives, with one difference: a key repeated in one response object is priced each time
// it comes (an upper bound; ActualJSON reads one of them).
type ActualCounter struct {
	in    inputs
	root  *typeInfo
	plans map[planKey]plan
	// shared keeps the plans for every counter of the operation, when they
	// do not depend on the variables (nil: plans are the counter's own).
	shared *ActualPlans
	// typenameKeys are the response keys of __typename selected directly in a field's
	// selection set (its aliases), by field.
	typenameKeys map[*ast.Field][]string

	// The open containers and what they price, as stacks that grow and shrink with
	// the nesting of the response: nothing is allocated per value once they are warm.
	frames    []frame
	slots     []slot
	targets   []target
	vslots    []vslot
	items     []item
	itemSums  []int32
	sums      []sum
	typenames []typename
	names     []byte

	started, done bool
	cost          int64
	err           error
}

// planKey is a selection set (of owner, or the operation's for nil) applied to one object type.
type planKey struct {
	owner *ast.Field
	typ   *typeInfo
}

// plan maps each response key to the fields that answer under it, fragments expanded.
type plan map[string][]occurrence

// occurrence is a field selected under a key, count times (a fragment spread twice
// selects its fields twice: priced per occurrence, as the requested cost prices them).
type occurrence struct {
	field *ast.Field
	count int64
}

// slot is one field occurrence priced on the value its key holds.
type slot struct {
	field   *ast.Field
	fi      *fieldInfo // nil for __typename, __schema and __type
	parent  *typeInfo
	root    bool
	total   int64 // argCost + the items seen so far
	targets [2]int32
}

// target is where a slot's total goes: count times into a sum of the enclosing object.
type target struct {
	sum   int32
	count int64
}

// vslot is a slot and the list levels left above the value it prices.
type vslot struct {
	slot  int32
	depth int
}

// item is one slot's item priced on one response object: object types sum their
// children under one type, abstract ones under each possible type (itemSums).
type item struct {
	slot     int32
	abstract bool
	sums     [2]int32 // into itemSums
}

// sum is a selection set's children priced on one response object as one object type.
type sum struct {
	owner *ast.Field // nil: the operation's
	typ   *typeInfo
	plan  plan
	total int64
}

// typename is a string a response object holds under a key __typename answers.
type typename struct {
	key   string
	value [2]int32 // into names
}

type frame struct {
	array bool
	root  bool // the data object: its fields are root fields
	// marks of the stacks when the frame opened: truncated back to on close
	slotMark, targetMark, vslotMark, itemMark, itemSumMark, sumMark, typenameMark, nameMark int32
	// object: items [itemMark, itemEnd); sums [sumMark, sumEnd)
	itemEnd, sumEnd int32
	// object: the slots, targets and vslots of the current key start here
	keySlot, keyTarget, keyVslot int32
	keyTypename                  string // the current key when a typename is read under it
	// array: its elements are priced by vslots [vslotMark, elemEnd)
	elemEnd int32
}

var errStreamOrder = errors.New("complexity: response events out of order")

// NewActualCounter returns a counter of op's actual cost. op must come from a
// validated document, as for [Schema.AnalyzeOperation].
func (s *Schema) NewActualCounter(op *ast.OperationDefinition, variables map[string]any) (*ActualCounter, error) {
	root, err := s.actualRoot(op)
	if err != nil {
		return nil, err
	}
	return &ActualCounter{in: inputs{s: s, op: op, vars: variables}, root: root}, nil
}

// ActualPlans is what the pricing of what one operation returned works out of its
// selections (which fields answer under each response key, fragments expanded; which
// are free), kept for every response of it: a caller that prices the same operation
// again and again builds one per operation and hands it to [Schema.NewSharedActualCounter]
// or [Schema.ActualJSONShared].
// It is safe for concurrent use. An operation whose @skip or @include take a variable
// gets nothing shared: its plans depend on each request's variables.
type ActualPlans struct {
	op     *ast.OperationDefinition
	static bool
	plans  sync.Map // planKey → plan
	// What ActualJSONShared works out of each selection set on a type
	// (those do not depend on variables).
	selections sync.Map // freeKey → []selectionInfo
	// What ActualJSONShared's one-pass scan prices the responses with.
	scan atomic.Pointer[scanPlans]
}

// NewActualPlans returns the plans of op, empty until counters build them.
func NewActualPlans(op *ast.OperationDefinition) *ActualPlans {
	return &ActualPlans{op: op, static: op != nil && !inclusionVaries(op.SelectionSet, map[*ast.FragmentDefinition]bool{})}
}

// NewSharedActualCounter is [Schema.NewActualCounter] for plans' operation, sharing
// plans with the other counters of it (of this schema).
func (s *Schema) NewSharedActualCounter(plans *ActualPlans, variables map[string]any) (*ActualCounter, error) {
	c, err := s.NewActualCounter(plans.op, variables)
	if err != nil {
		return nil, err
	}
	if plans.static {
		c.shared = plans
	}
	return c, nil
}

// inclusionVaries reports whether a @skip or @include in set, or in the fragments it
// spreads, takes a variable.
func inclusionVaries(set ast.SelectionSet, seen map[*ast.FragmentDefinition]bool) bool {
	for _, sel := range set {
		var dirs ast.DirectiveList
		var inner ast.SelectionSet
		switch sel := sel.(type) {
		case *ast.Field:
			dirs, inner = sel.Directives, sel.SelectionSet
		case *ast.InlineFragment:
			dirs, inner = sel.Directives, sel.SelectionSet
		case *ast.FragmentSpread:
			dirs = sel.Directives
			if def := sel.Definition; def != nil && !seen[def] {
				seen[def] = true
				if len(def.Directives) > 0 || inclusionVaries(def.SelectionSet, seen) {
					return true
				}
			}
		}
		for _, d := range dirs {
			if (d.Name == "skip" || d.Name == "include") && takesVariable(d) {
				return true
			}
		}
		if inclusionVaries(inner, seen) {
			return true
		}
	}
	return false
}

func takesVariable(d *ast.Directive) bool {
	for _, a := range d.Arguments {
		if a.Value == nil || a.Value.Kind == ast.Variable {
			return true
		}
	}
	return false
}

// Cost returns the actual cost of the data reported: 0 for null (or nothing reported),
// and an error when the data was not a complete object or did not fit the operation.
func (c *ActualCounter) Cost() (int64, error) {
	switch {
	case c.err != nil:
		return 0, c.err
	case c.started && !c.done:
		return 0, fmt.Errorf("complexity: response data: %w", errResponseSyntax)
	}
	return c.cost, nil
}

func (c *ActualCounter) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}

// BeginObject opens an object.
func (c *ActualCounter) BeginObject() {
	if !c.value() {
		if !c.started {
			c.started = true
			c.openRoot()
		}
		return
	}
	c.open(false)
}

// BeginArray opens an array.
func (c *ActualCounter) BeginArray() {
	if !c.value() {
		if !c.started {
			c.fail(fmt.Errorf("complexity: response data: not an object"))
		}
		return
	}
	c.open(true)
}

// Null reports a null.
func (c *ActualCounter) Null() {
	if !c.value() {
		if !c.started {
			c.started, c.done = true, true
		}
		return
	}
	c.flushIfMember()
}

// Scalar reports a number or a boolean.
func (c *ActualCounter) Scalar() { c.leaf() }

// String reports a string: its text, decoded (only __typename's is read; the caller may
// pass nil for a string too long to be a type name).
func (c *ActualCounter) String(text []byte) {
	if len(c.frames) > 0 {
		if f := &c.frames[len(c.frames)-1]; !f.array && f.keyTypename != "" && text != nil {
			start := int32(len(c.names))
			c.names = append(c.names, text...)
			c.typenames = append(c.typenames, typename{key: f.keyTypename, value: [2]int32{start, int32(len(c.names))}})
		}
	}
	c.leaf()
}

// leaf prices a string, number or boolean: an item that is not an object.
func (c *ActualCounter) leaf() {
	if !c.value() {
		if !c.started {
			c.fail(fmt.Errorf("complexity: response data: not an object"))
		}
		return
	}
	lo, hi := c.context()
	for _, v := range c.vslots[lo:hi] {
		s := &c.slots[v.slot]
		s.total = add(s.total, c.scalarItem(s))
	}
	c.flushIfMember()
}

// value reports whether a value is expected inside the data object (false before and
// after it, or after an error).
func (c *ActualCounter) value() bool {
	if c.err != nil {
		return false
	}
	if c.done {
		c.fail(errStreamOrder)
		return false
	}
	return len(c.frames) > 0
}

// context is the vslots the next value is priced by.
func (c *ActualCounter) context() (lo, hi int32) {
	f := &c.frames[len(c.frames)-1]
	if f.array {
		return f.vslotMark, f.elemEnd
	}
	return f.keyVslot, int32(len(c.vslots))
}

func (c *ActualCounter) mark(f *frame) {
	f.slotMark, f.targetMark, f.vslotMark = int32(len(c.slots)), int32(len(c.targets)), int32(len(c.vslots))
	f.itemMark, f.itemSumMark, f.sumMark = int32(len(c.items)), int32(len(c.itemSums)), int32(len(c.sums))
	f.typenameMark, f.nameMark = int32(len(c.typenames)), int32(len(c.names))
}

func (c *ActualCounter) openRoot() {
	f := frame{root: true}
	c.mark(&f)
	c.sums = append(c.sums, sum{typ: c.root, plan: c.plan(nil, c.in.op.SelectionSet, c.root)})
	f.sumEnd = int32(len(c.sums))
	f.itemEnd = f.itemMark
	f.keySlot, f.keyTarget, f.keyVslot = int32(len(c.slots)), int32(len(c.targets)), int32(len(c.vslots))
	c.frames = append(c.frames, f)
}

// open pushes the frame of an object or array priced by the current context.
func (c *ActualCounter) open(array bool) {
	lo, hi := c.context()
	f := frame{array: array}
	c.mark(&f)
	for _, v := range c.vslots[lo:hi] {
		s := &c.slots[v.slot]
		switch {
		case s.fi == nil:
			s.total = add(s.total, c.scalarItem(s))
		case array && v.depth > 0:
			c.vslots = append(c.vslots, vslot{slot: v.slot, depth: v.depth - 1})
		case array:
			s.total = add(s.total, c.scalarItem(s)) // not the list the schema promises: one item
		default:
			c.objectItem(&f, v.slot)
		}
	}
	f.elemEnd = int32(len(c.vslots))
	f.itemEnd, f.sumEnd = int32(len(c.items)), int32(len(c.sums))
	f.keySlot, f.keyTarget, f.keyVslot = int32(len(c.slots)), int32(len(c.targets)), int32(len(c.vslots))
	c.frames = append(c.frames, f)
}

// objectItem adds the item slot prices on the object being opened.
func (c *ActualCounter) objectItem(f *frame, si int32) {
	s := &c.slots[si]
	switch typ := s.fi.typ; typ.kind {
	case ast.Object:
		j := c.sumFor(f.sumMark, s.field, typ)
		c.items = append(c.items, item{slot: si, sums: [2]int32{int32(len(c.itemSums)), int32(len(c.itemSums)) + 1}})
		c.itemSums = append(c.itemSums, j)
	case ast.Interface, ast.Union:
		if len(typ.possible) == 0 {
			s.total = add(s.total, c.in.s.weight(s.fi, typ, nil, s.parent, s.root))
			return
		}
		start := int32(len(c.itemSums))
		for _, o := range typ.possible {
			j := c.sumFor(f.sumMark, s.field, o)
			c.itemSums = append(c.itemSums, j)
		}
		c.items = append(c.items, item{slot: si, abstract: true, sums: [2]int32{start, int32(len(c.itemSums))}})
	default:
		s.total = add(s.total, c.in.s.weight(s.fi, typ, nil, s.parent, s.root))
	}
}

// sumFor returns the sum of field's selections as typ in the object being opened (its
// sums start at from), shared by every slot of the same field: they differ only in
// their parent, which weighs the item, not its children.
func (c *ActualCounter) sumFor(from int32, field *ast.Field, typ *typeInfo) int32 {
	for j := from; j < int32(len(c.sums)); j++ {
		if c.sums[j].owner == field && c.sums[j].typ == typ {
			return j
		}
	}
	c.sums = append(c.sums, sum{owner: field, typ: typ, plan: c.plan(field, field.SelectionSet, typ)})
	return int32(len(c.sums) - 1)
}

// scalarItem is the per-item term of an item that is not an object: the weight alone
// (for an abstract type, the largest of its possible types').
func (c *ActualCounter) scalarItem(s *slot) int64 {
	switch s.field.Name {
	case "__typename":
		return 0
	case "__schema", "__type":
		if s.fi == nil {
			return c.in.s.cfg.introspectionCost
		}
	}
	typ := s.fi.typ
	if typ.kind != ast.Interface && typ.kind != ast.Union {
		return c.in.s.weight(s.fi, typ, nil, s.parent, s.root)
	}
	best := c.in.s.weight(s.fi, typ, nil, s.parent, s.root)
	for i, o := range typ.possible {
		if w := c.in.s.weight(s.fi, o, typ, s.parent, s.root); i == 0 || w > best {
			best = w
		}
	}
	return best
}

// Key reports the key of the next member of the object open.
func (c *ActualCounter) Key(key []byte) {
	if !c.value() {
		return
	}
	f := &c.frames[len(c.frames)-1]
	if f.array {
		c.fail(errStreamOrder)
		return
	}
	c.slots, c.targets, c.vslots = c.slots[:f.keySlot], c.targets[:f.keyTarget], c.vslots[:f.keyVslot]
	f.keyTypename = c.typenameKey(f, key)
	for j := f.sumMark; j < f.sumEnd; j++ {
		sm := &c.sums[j]
		for _, occ := range sm.plan[string(key)] {
			c.addSlot(f, j, sm.typ, occ)
			if c.err != nil {
				return
			}
		}
	}
}

// addSlot adds occ of a field selected on typ to the current key: a new slot, or a
// target of the slot the same field already has for the same parent type.
func (c *ActualCounter) addSlot(f *frame, sumIndex int32, typ *typeInfo, occ occurrence) {
	for i := f.keySlot; i < int32(len(c.slots)); i++ {
		if s := &c.slots[i]; s.field == occ.field && s.parent == typ {
			c.addTarget(i, sumIndex, occ.count)
			return
		}
	}
	s := slot{field: occ.field, parent: typ, root: f.root}
	switch occ.field.Name {
	case "__typename", "__schema", "__type":
	default:
		s.fi = typ.fields[occ.field.Name]
		if s.fi == nil {
			c.fail(fmt.Errorf("complexity: %s has no field %q", typ.name, occ.field.Name))
			return
		}
		if s.fi.argCost {
			s.total = c.in.argCost(occ.field, s.fi)
		}
	}
	s.targets = [2]int32{int32(len(c.targets)), int32(len(c.targets))}
	c.slots = append(c.slots, s)
	si := int32(len(c.slots) - 1)
	depth := 0
	if s.fi != nil {
		depth = s.fi.listDepth
	}
	c.vslots = append(c.vslots, vslot{slot: si, depth: depth})
	c.addTarget(si, sumIndex, occ.count)
}

// addTarget records that slot si's total goes count times into sum j. The slots of one
// key are added in order and their targets after them, so a slot's targets stay contiguous
// as long as it is the last slot; an earlier slot gets its later targets merged in place.
func (c *ActualCounter) addTarget(si, j int32, count int64) {
	s := &c.slots[si]
	if s.targets[1] == int32(len(c.targets)) {
		c.targets = append(c.targets, target{sum: j, count: count})
		s.targets[1]++
		return
	}
	// An earlier slot of this key: move its targets to the end, then add.
	moved := append([]target(nil), c.targets[s.targets[0]:s.targets[1]]...)
	s.targets[0] = int32(len(c.targets))
	c.targets = append(c.targets, moved...)
	c.targets = append(c.targets, target{sum: j, count: count})
	s.targets[1] = int32(len(c.targets))
}

// typenameKey returns key when it holds a __typename that prices an abstract item of
// f's object (under its own name, or an alias selected directly in the field), else "".
func (c *ActualCounter) typenameKey(f *frame, key []byte) string {
	if string(key) == "__typename" {
		return "__typename"
	}
	for _, it := range c.items[f.itemMark:f.itemEnd] {
		if !it.abstract {
			continue
		}
		for _, k := range c.aliasesOfTypename(c.slots[it.slot].field) {
			if string(key) == k {
				return k
			}
		}
	}
	return ""
}

func (c *ActualCounter) aliasesOfTypename(field *ast.Field) []string {
	if keys, ok := c.typenameKeys[field]; ok {
		return keys
	}
	var keys []string
	for _, sel := range field.SelectionSet {
		if f, ok := sel.(*ast.Field); ok && f.Name == "__typename" && responseKey(f) != "__typename" {
			keys = append(keys, responseKey(f))
		}
	}
	if c.typenameKeys == nil {
		c.typenameKeys = map[*ast.Field][]string{}
	}
	c.typenameKeys[field] = keys
	return keys
}

// End closes the innermost object or array.
func (c *ActualCounter) End() {
	if !c.value() {
		return
	}
	f := c.frames[len(c.frames)-1]
	if !f.array {
		c.closeObject(&f)
	}
	if f.root {
		c.cost = c.sums[f.sumMark].total
		c.done = true
	}
	c.frames = c.frames[:len(c.frames)-1]
	if len(c.frames) > 0 {
		c.flushIfMember()
	}
	c.truncate(&f)
}

// closeObject prices each item of the object f by its concrete type.
func (c *ActualCounter) closeObject(f *frame) {
	for _, it := range c.items[f.itemMark:f.itemEnd] {
		s := &c.slots[it.slot]
		sums := c.itemSums[it.sums[0]:it.sums[1]]
		if !it.abstract {
			s.total = add(s.total, add(c.in.s.weight(s.fi, s.fi.typ, nil, s.parent, s.root), c.sums[sums[0]].total))
			continue
		}
		abstract := s.fi.typ
		if i := c.concrete(f, abstract, s.field); i >= 0 {
			o := abstract.possible[i]
			s.total = add(s.total, add(c.in.s.weight(s.fi, o, abstract, s.parent, s.root), c.sums[sums[i]].total))
			continue
		}
		var best int64
		for i, o := range abstract.possible {
			if v := add(c.in.s.weight(s.fi, o, abstract, s.parent, s.root), c.sums[sums[i]].total); i == 0 || v > best {
				best = v
			}
		}
		s.total = add(s.total, best)
	}
}

// concrete returns the index in abstract.possible of the type the object f says it is,
// or -1: its __typename, else the first alias of __typename in field's selections.
func (c *ActualCounter) concrete(f *frame, abstract *typeInfo, field *ast.Field) int {
	name, ok := c.typenameUnder(f, "__typename")
	for _, k := range c.aliasesOfTypename(field) {
		if ok {
			break
		}
		name, ok = c.typenameUnder(f, k)
	}
	if !ok {
		return -1
	}
	o := c.in.s.types[string(name)]
	if o == nil || !o.memberOf[abstract.name] {
		return -1
	}
	for i, p := range abstract.possible {
		if p == o {
			return i
		}
	}
	return -1
}

func (c *ActualCounter) typenameUnder(f *frame, key string) ([]byte, bool) {
	for _, t := range c.typenames[f.typenameMark:] {
		if t.key == key {
			return c.names[t.value[0]:t.value[1]], true
		}
	}
	return nil, false
}

// flushIfMember adds the slots of a member's value, now complete, to the sums of the
// object it belongs to.
func (c *ActualCounter) flushIfMember() {
	f := &c.frames[len(c.frames)-1]
	if f.array {
		return
	}
	for _, s := range c.slots[f.keySlot:] {
		for _, t := range c.targets[s.targets[0]:s.targets[1]] {
			c.sums[t.sum].total = add(c.sums[t.sum].total, mul(t.count, s.total))
		}
	}
}

func (c *ActualCounter) truncate(f *frame) {
	c.slots, c.targets, c.vslots = c.slots[:f.slotMark], c.targets[:f.targetMark], c.vslots[:f.vslotMark]
	c.items, c.itemSums, c.sums = c.items[:f.itemMark], c.itemSums[:f.itemSumMark], c.sums[:f.sumMark]
	c.typenames, c.names = c.typenames[:f.typenameMark], c.names[:f.nameMark]
}

// plan returns the fields of set (owner's, or the operation's) that apply to typ, by
// response key, fragments expanded; built once per counter.
func (c *ActualCounter) plan(owner *ast.Field, set ast.SelectionSet, typ *typeInfo) plan {
	key := planKey{owner: owner, typ: typ}
	if p, ok := c.plans[key]; ok {
		return p
	}
	if c.shared != nil {
		if p, ok := c.shared.plans.Load(key); ok {
			return p.(plan)
		}
	}
	p := plan{}
	b := planBuilder{in: &c.in, typ: typ, fragments: map[*ast.FragmentDefinition]plan{}, busy: map[*ast.FragmentDefinition]bool{}}
	b.add(p, set, 1)
	if b.err != nil {
		c.fail(b.err)
	} else if c.shared != nil {
		c.shared.plans.Store(key, p) // read-only from here: plans are never changed once built
		return p
	}
	if c.plans == nil {
		c.plans = map[planKey]plan{}
	}
	c.plans[key] = p
	return p
}

type planBuilder struct {
	in        *inputs
	typ       *typeInfo
	fragments map[*ast.FragmentDefinition]plan
	busy      map[*ast.FragmentDefinition]bool
	err       error
}

// add puts the fields of set that apply to b.typ into p, count times each.
func (b *planBuilder) add(p plan, set ast.SelectionSet, count int64) {
	for _, sel := range set {
		switch sel := sel.(type) {
		case *ast.Field:
			if b.in.included(sel.Directives) {
				p.put(responseKey(sel), occurrence{field: sel, count: count})
			}
		case *ast.InlineFragment:
			if b.in.included(sel.Directives) && b.typ.satisfies(sel.TypeCondition) {
				b.add(p, sel.SelectionSet, count)
			}
		case *ast.FragmentSpread:
			if !b.in.included(sel.Directives) {
				continue
			}
			def := sel.Definition
			if def == nil {
				b.err = fmt.Errorf("complexity: unknown fragment %q", sel.Name)
				continue
			}
			if b.typ.satisfies(def.TypeCondition) {
				for k, occs := range b.fragment(def) {
					for _, o := range occs {
						p.put(k, occurrence{field: o.field, count: mul(o.count, count)})
					}
				}
			}
		}
	}
}

// fragment is def's plan, built once: a fragment spread twice per level is expanded
// once per level, not 2^depth times.
func (b *planBuilder) fragment(def *ast.FragmentDefinition) plan {
	if p, ok := b.fragments[def]; ok {
		return p
	}
	if b.busy[def] {
		b.err = cycleError(def, nil)
		return nil
	}
	b.busy[def] = true
	p := plan{}
	b.add(p, def.SelectionSet, 1)
	delete(b.busy, def)
	b.fragments[def] = p
	return p
}

// put adds occ under key, merging it with an earlier occurrence of the same field.
func (p plan) put(key string, occ occurrence) {
	for i, o := range p[key] {
		if o.field == occ.field {
			p[key][i].count = add(o.count, occ.count)
			return
		}
	}
	p[key] = append(p[key], occ)
}
