package complexity

import (
	"bytes"
	"encoding/binary"
	"math/bits"

	"github.com/vektah/gqlparser/v2/ast"
)

// The scan prices a response in one pass over its bytes, matched against plans
// worked out once per operation: it keeps nothing of the response, skips the
// members that cost nothing as it checks their syntax, and never allocates.
// It gives up (and [Schema.ActualJSONShared] reads the response the long way,
// with response and actualWalker) whenever the answer could differ from that
// reading's or would be an error: malformed JSON, a key priced twice in one
// object, an escaped key or type name, two fields under one key, deep nesting.

// scanPlan is a selection set applied to one object type: the members of a
// response object that cost something, by response key.
type scanPlan struct {
	entries []scanEntry
	// layout is every key of the selections, free ones included, in the
	// order gqlgen writes them: a member whose key comes where the layout
	// expects it is matched with one comparison.
	layout []layoutKey
}

// layoutKey is a key as written, quotes and colon included, and the index
// of its entry (-1: free).
type layoutKey struct {
	written string
	entry   int
	// The first sixteen bytes of written as two little-endian words, and
	// the masks of the bytes that count in each.
	words, masks [2]uint64
}

func newLayoutKey(written string, entry int) layoutKey {
	lk := layoutKey{written: written, entry: entry}
	for i := 0; i < len(written) && i < 16; i++ {
		lk.words[i/8] |= uint64(written[i]) << (8 * (i % 8))
		lk.masks[i/8] |= 0xff << (8 * (i % 8))
	}
	return lk
}

// at reports whether data[i:] starts with the key: two word comparisons
// where data has sixteen bytes left and the key is no longer.
func (lk *layoutKey) at(data []byte, i int) bool {
	if len(data)-i < 16 || len(lk.written) > 16 {
		return hasPrefix(data[i:], lk.written)
	}
	d := data[i : i+16]
	return binary.LittleEndian.Uint64(d)&lk.masks[0] == lk.words[0] && binary.LittleEndian.Uint64(d[8:])&lk.masks[1] == lk.words[1]
}

// scanEntry is a field priced under one response key, count times (a
// fragment spread twice selects its fields twice).
type scanEntry struct {
	key    string
	field  *ast.Field
	fi     *fieldInfo // nil for __schema and __type
	count  int64
	weight int64     // per item: the field's own type's weight, or for an abstract type the largest of its possible types'
	child  *scanPlan // an object type's selections
	// An abstract type's: each possible type's weight and selections (in
	// typ.possible's order), and the keys of the __typename selected
	// directly in the field, which say an item's type.
	possible  []scanPossible
	typenames []string
}

type scanPossible struct {
	typ    *typeInfo
	weight int64
	plan   *scanPlan
}

// scanPlans is an operation's plans, built once for a schema.
type scanPlans struct {
	schema *Schema
	root   *scanPlan // nil: the operation cannot be scanned (see buildScanPlans)
}

// maxScanDepth bounds the nesting the scan follows; deeper responses are read the long way.
const maxScanDepth = 256

// maxScanEntries keeps a plan's entries within the bits of the scan's "seen" mask.
const maxScanEntries = 64

// scanActual prices data (trimmed, not null) with plans' operation, and
// reports whether it could; when it could not, the caller reads data the long way.
func (s *Schema) scanActual(plans *ActualPlans, variables map[string]any, data []byte) (int64, bool) {
	sp := plans.scan.Load()
	if sp == nil || sp.schema != s {
		sp = &scanPlans{schema: s, root: s.buildScanPlans(plans.op)}
		plans.scan.Store(sp)
	}
	if sp.root == nil {
		return 0, false
	}
	sc := scanner{in: inputs{s: s, op: plans.op, vars: variables}, data: data, rereads: 4*len(data) + 256}
	if sc.next() != '{' {
		return 0, false
	}
	cost, ok := sc.object(sp.root, 0)
	if !ok || sc.next() != 0 || sc.i != len(data) {
		return 0, false
	}
	return cost, true
}

// buildScanPlans returns the plan of op's selections on its root type, or nil
// when its responses must be read the long way.
func (s *Schema) buildScanPlans(op *ast.OperationDefinition) *scanPlan {
	root := s.rootType(op.Operation)
	if root == nil {
		return nil
	}
	b := scanBuilder{in: inputs{s: s, op: op}, plans: map[planKey]*scanPlan{}}
	p := b.plan(nil, op.SelectionSet, root)
	if b.failed {
		return nil
	}
	return p
}

type scanBuilder struct {
	in     inputs
	plans  map[planKey]*scanPlan
	failed bool
}

// plan builds the scan plan of set (owner's, or the operation's for nil) on typ.
func (b *scanBuilder) plan(owner *ast.Field, set ast.SelectionSet, typ *typeInfo) *scanPlan {
	key := planKey{owner: owner, typ: typ}
	if p, ok := b.plans[key]; ok {
		return p
	}
	p := &scanPlan{}
	b.plans[key] = p
	pb := planBuilder{in: &b.in, typ: typ, fragments: map[*ast.FragmentDefinition]plan{}, busy: map[*ast.FragmentDefinition]bool{}}
	fields := plan{}
	pb.add(fields, set, 1)
	if pb.err != nil {
		b.failed = true
		return p
	}
	root := owner == nil
	// In the order of the selections, which is the order gqlgen writes the members in.
	for _, k := range selectionKeys(set, fields) {
		var priced []occurrence
		for _, occ := range fields[k] {
			if occ.field.Name != "__typename" && !b.in.s.freeField(occ.field, typ, root) {
				priced = append(priced, occ)
			}
		}
		entry := -1
		if len(priced) > 0 {
			entry = len(p.entries)
		}
		p.layout = append(p.layout, newLayoutKey(`"`+k+`":`, entry))
		switch {
		case len(priced) == 0:
			continue
		case len(priced) > 1:
			b.failed = true // two fields under one key: their items are priced by two plans at once
			return p
		}
		if e, ok := b.entry(k, priced[0], typ, root); ok {
			p.entries = append(p.entries, e)
		} else {
			b.failed = true
			return p
		}
	}
	if len(p.entries) > maxScanEntries {
		b.failed = true
	}
	return p
}

// entry is the scan entry of occ, a field selected on parent.
func (b *scanBuilder) entry(key string, occ occurrence, parent *typeInfo, root bool) (scanEntry, bool) {
	s := b.in.s
	e := scanEntry{key: key, field: occ.field, count: occ.count}
	if occ.field.Name == "__schema" || occ.field.Name == "__type" {
		return e, true
	}
	fi := parent.fields[occ.field.Name]
	if fi == nil {
		return e, false // the long reading reports it
	}
	e.fi = fi
	switch typ := fi.typ; typ.kind {
	case ast.Object:
		e.weight = s.weight(fi, typ, nil, parent, root)
		e.child = b.plan(occ.field, occ.field.SelectionSet, typ)
	case ast.Interface, ast.Union:
		e.weight = s.weight(fi, typ, nil, parent, root) // an item that is not an object: the largest weight
		for i, o := range typ.possible {
			c := s.weight(fi, o, typ, parent, root)
			if i == 0 || c > e.weight {
				e.weight = c
			}
			e.possible = append(e.possible, scanPossible{typ: o, weight: c, plan: b.plan(occ.field, occ.field.SelectionSet, o)})
		}
		e.typenames = []string{"__typename"}
		for _, sel := range occ.field.SelectionSet {
			if f, ok := sel.(*ast.Field); ok && f.Name == "__typename" && responseKey(f) != "__typename" {
				e.typenames = append(e.typenames, responseKey(f))
			}
		}
		if len(e.typenames) > 64 { // the bits of typename's mask
			return e, false
		}
	default:
		e.weight = s.weight(fi, typ, nil, parent, root)
	}
	return e, true
}

// selectionKeys lists the keys of fields in the order set selects them,
// fragments expanded where they are spread (gqlgen's order).
func selectionKeys(set ast.SelectionSet, fields plan) []string {
	keys := make([]string, 0, len(fields))
	seen := make(map[string]bool, len(fields))
	spread := map[*ast.FragmentDefinition]bool{}
	var walk func(set ast.SelectionSet)
	walk = func(set ast.SelectionSet) {
		for _, sel := range set {
			switch sel := sel.(type) {
			case *ast.Field:
				k := responseKey(sel)
				if _, ok := fields[k]; ok && !seen[k] {
					seen[k] = true
					keys = append(keys, k)
				}
			case *ast.InlineFragment:
				walk(sel.SelectionSet)
			case *ast.FragmentSpread:
				if def := sel.Definition; def != nil && !spread[def] {
					spread[def] = true
					walk(def.SelectionSet)
				}
			}
		}
	}
	walk(set)
	for k := range fields { // none should be left; a key missing here would never be priced
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	return keys
}

// scanner reads one response.
type scanner struct {
	in   inputs
	data []byte
	i    int
	// rereads is how many bytes the scan may still read a second time (a
	// type name looked for ahead, an abstract item read as each possible
	// type), so that nested abstract items cannot make it exponential.
	rereads int
}

// next passes whitespace and returns the byte at the scanner, or 0 at the end.
func (sc *scanner) next() byte {
	sc.i = space(sc.data, sc.i)
	if sc.i < len(sc.data) {
		return sc.data[sc.i]
	}
	return 0
}

// object prices the object at the scanner with p.
func (sc *scanner) object(p *scanPlan, depth int) (int64, bool) {
	if depth >= maxScanDepth {
		return 0, false
	}
	data := sc.data
	i := space(data, sc.i+1) // past '{'
	if i < len(data) && data[i] == '}' {
		sc.i = i + 1
		return 0, true
	}
	var (
		total  int64
		seen   uint64
		cursor int
		laid   = 0 // the next key of p.layout; past its end once a member came elsewhere
	)
	for {
		j := -1
		if laid < len(p.layout) && p.layout[laid].at(data, i) {
			i += len(p.layout[laid].written)
			j = p.layout[laid].entry
			laid++
		} else {
			laid = len(p.layout)
			i = space(data, i)
			end := keyEnd(data, i)
			if end < 0 {
				return 0, false
			}
			key := data[i+1 : end]
			if i = space(data, end+1); i >= len(data) || data[i] != ':' {
				return 0, false
			}
			i++
			j = p.find(key, cursor)
		}
		i = space(data, i)
		if j < 0 {
			if i < len(data) && data[i] == '"' { // most members that cost nothing are strings
				i = skipString(data, i)
			} else {
				i = skipValue(data, i, depth+1)
			}
			if i < 0 {
				return 0, false
			}
		} else {
			if seen&(1<<j) != 0 {
				return 0, false // a key priced twice: which one counts is the long reading's to say
			}
			seen |= 1 << j
			cursor = j + 1
			e := &p.entries[j]
			sc.i = i
			c, ok := sc.field(e, depth+1)
			if !ok {
				return 0, false
			}
			i = sc.i
			if e.count != 1 { // mul divides
				c = mul(e.count, c)
			}
			total = add(total, c)
		}
		if i = space(data, i); i >= len(data) {
			return 0, false
		}
		switch data[i] {
		case ',':
			i++
		case '}':
			sc.i = i + 1
			return total, true
		default:
			return 0, false
		}
	}
}

func hasPrefix(b []byte, prefix string) bool {
	return len(b) >= len(prefix) && string(b[:len(prefix)]) == prefix
}

// find returns the index of the entry of key, looking first where the last
// match left off (members come in the order of the selections), or -1.
func (p *scanPlan) find(key []byte, cursor int) int {
	n := len(p.entries)
	for k := 0; k < n; k++ {
		j := cursor + k
		if j >= n {
			j -= n
		}
		if p.entries[j].key == string(key) {
			return j
		}
	}
	return -1
}

// keyEnd returns the index of the closing quote of the key at data[i], or
// -1 when it is not a key without escapes (the long reading decodes them).
func keyEnd(data []byte, i int) int {
	if i >= len(data) || data[i] != '"' {
		return -1
	}
	if j := plainRun(data, i+1); j < len(data) && data[j] == '"' {
		return j
	}
	return -1
}

// skip checks and passes the value at the scanner.
func (sc *scanner) skip(depth int) bool {
	sc.i = skipValue(sc.data, sc.i, depth)
	return sc.i >= 0
}

// field prices e on the value at the scanner, as actualWalker.field does.
func (sc *scanner) field(e *scanEntry, depth int) (int64, bool) {
	if e.fi == nil { // __schema, __type
		null := sc.i < len(sc.data) && sc.data[sc.i] == 'n'
		if !sc.skip(depth) {
			return 0, false
		}
		if null {
			return 0, true
		}
		return sc.in.s.cfg.introspectionCost, true
	}
	var total int64
	if e.fi.argCost {
		total = sc.in.argCost(e.field, e.fi)
	}
	c, ok := sc.items(e, depth, e.fi.listDepth)
	return add(total, c), ok
}

// items prices each non-null item of the value at the scanner, of a type
// with levels list levels, as actualWalker.items does.
func (sc *scanner) items(e *scanEntry, depth, levels int) (int64, bool) {
	if sc.i >= len(sc.data) {
		return 0, false
	}
	switch sc.data[sc.i] {
	case 'n':
		sc.i = skipWord(sc.data, sc.i, "null")
		return 0, sc.i >= 0
	case '[':
		if levels == 0 {
			break
		}
		if depth >= maxScanDepth {
			return 0, false
		}
		sc.i++
		if sc.next() == ']' {
			sc.i++
			return 0, true
		}
		var total int64
		for {
			sc.next()
			c, ok := sc.items(e, depth+1, levels-1)
			if !ok {
				return 0, false
			}
			total = add(total, c)
			switch sc.next() {
			case ',':
				sc.i++
			case ']':
				sc.i++
				return total, true
			default:
				return 0, false
			}
		}
	}
	return sc.item(e, depth)
}

// item is the per-item term of one item, as actualWalker.item does.
func (sc *scanner) item(e *scanEntry, depth int) (int64, bool) {
	if sc.data[sc.i] != '{' || e.fi.typ.kind != ast.Object && e.fi.typ.kind != ast.Interface && e.fi.typ.kind != ast.Union {
		return e.weight, sc.skip(depth)
	}
	if e.child == nil {
		return sc.abstractItem(e, depth)
	}
	c, ok := sc.object(e.child, depth)
	return add(e.weight, c), ok
}

// abstractItem prices an object of an abstract type, as actualWalker.item
// does: as the type its __typename names, else as the costliest of the
// possible types (the object read once for each).
func (sc *scanner) abstractItem(e *scanEntry, depth int) (int64, bool) {
	start := sc.i
	name, ok := sc.typename(e.typenames, depth)
	if !ok {
		return 0, false
	}
	if o := sc.in.s.types[string(name)]; name != nil && o != nil && o.memberOf[e.fi.typ.name] {
		for _, p := range e.possible {
			if p.typ == o {
				c, ok := sc.object(p.plan, depth)
				return add(p.weight, c), ok
			}
		}
		return 0, false
	}
	if len(e.possible) == 0 {
		return e.weight, sc.skip(depth)
	}
	var best int64
	for i, p := range e.possible {
		if i > 0 {
			if sc.rereads -= sc.i - start; sc.rereads < 0 {
				return 0, false
			}
			sc.i = start
		}
		c, ok := sc.object(p.plan, depth)
		if !ok {
			return 0, false
		}
		if c = add(p.weight, c); i == 0 || c > best {
			best = c
		}
	}
	return best, true
}

// typename returns, leaving the scanner where it is, the type name the
// object at the scanner gives under the first of keys (__typename, then its
// aliases) that holds a string; nil when none does. It reports false when
// the long reading must say: a key of keys twice or escaped, an escaped
// name, bad JSON.
func (sc *scanner) typename(keys []string, depth int) ([]byte, bool) {
	start := sc.i
	defer func() {
		sc.rereads -= sc.i - start
		sc.i = start
	}()
	var (
		name []byte
		rank = len(keys) // of name among keys
		seen uint64
	)
	sc.i++ // '{'
	if sc.next() == '}' {
		return nil, true
	}
	for {
		sc.next()
		end := keyEnd(sc.data, sc.i)
		if end < 0 {
			return nil, false
		}
		key := sc.data[sc.i+1 : end]
		if sc.i = end + 1; sc.next() != ':' {
			return nil, false
		}
		sc.i++
		k := -1
		for i, want := range keys {
			if want == string(key) {
				k = i
				break
			}
		}
		if k >= 0 {
			if seen&(1<<k) != 0 {
				return nil, false
			}
			seen |= 1 << k
		}
		at := sc.next()
		from := sc.i
		if !sc.skip(depth + 1) {
			return nil, false
		}
		if k >= 0 && k < rank && at == '"' {
			text := sc.data[from+1 : sc.i-1]
			if bytes.IndexByte(text, '\\') >= 0 {
				return nil, false
			}
			name, rank = text, k
		}
		switch sc.next() {
		case ',':
			sc.i++
		case '}':
			return name, sc.rereads >= sc.i-start
		default:
			return nil, false
		}
	}
}

// plainRun returns where the run of plain string bytes (see plainByte) at
// data[i:] ends, testing eight bytes at a time while it can: the lowest
// byte the masks flag is the first that is not plain (a borrow only flags
// bytes above a true one).
func plainRun(data []byte, i int) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for i+8 <= len(data) {
		w := binary.LittleEndian.Uint64(data[i:])
		quote, backslash := w^(ones*'"'), w^(ones*'\\')
		special := ((quote-ones)&^quote | (backslash-ones)&^backslash | (w-ones*0x20)&^w) & highs
		if special != 0 {
			return i + bits.TrailingZeros64(special)>>3
		}
		i += 8
	}
	for i < len(data) && plainByte[data[i]] {
		i++
	}
	return i
}

// escapeLength is the length of the escape sequence at the start of b, and
// whether it is one JSON has.
func escapeLength(b []byte) (int, bool) {
	if len(b) < 2 {
		return 0, false
	}
	switch b[1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2, true
	case 'u':
		if len(b) < 6 {
			return 0, false
		}
		for _, h := range b[2:6] {
			if !isHex(h) {
				return 0, false
			}
		}
		return 6, true
	}
	return 0, false
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// skipValue returns where the value at data[i] ends, checking it, or -1
// when it is not JSON (or nested deeper than the scan follows).
func skipValue(data []byte, i, depth int) int {
	if i >= len(data) {
		return -1
	}
	switch c := data[i]; {
	case c == '"':
		return skipString(data, i)
	case c == '{' || c == '[':
		return skipContainer(data, i, depth)
	case c == '-' || c >= '0' && c <= '9':
		return skipNumber(data, i)
	case c == 'n':
		return skipWord(data, i, "null")
	case c == 't':
		return skipWord(data, i, "true")
	case c == 'f':
		return skipWord(data, i, "false")
	}
	return -1
}

func skipContainer(data []byte, i, depth int) int {
	if depth >= maxScanDepth {
		return -1
	}
	closer := byte(']')
	if data[i] == '{' {
		closer = '}'
	}
	if i = space(data, i+1); i < len(data) && data[i] == closer {
		return i + 1
	}
	for {
		if closer == '}' {
			if i = skipString(data, i); i < 0 {
				return -1
			}
			if i = space(data, i); i >= len(data) || data[i] != ':' {
				return -1
			}
			i = space(data, i+1)
		}
		if i = skipValue(data, i, depth+1); i < 0 {
			return -1
		}
		if i = space(data, i); i >= len(data) {
			return -1
		}
		switch data[i] {
		case ',':
			i = space(data, i+1)
		case closer:
			return i + 1
		default:
			return -1
		}
	}
}

// skipString returns where the string at data[i] ends, checking its
// escapes as encoding/json does, or -1.
func skipString(data []byte, i int) int {
	if i >= len(data) || data[i] != '"' {
		return -1
	}
	j := i + 1
	for {
		j = plainRun(data, j)
		if j >= len(data) {
			return -1
		}
		switch data[j] {
		case '"':
			return j + 1
		case '\\':
			n, ok := escapeLength(data[j:])
			if !ok {
				return -1
			}
			j += n
		default:
			return -1 // a control character
		}
	}
}

func skipWord(data []byte, i int, word string) int {
	if !hasPrefix(data[i:], word) {
		return -1
	}
	return i + len(word)
}

// skipNumber returns where the number at data[i] ends, checking the JSON
// grammar, or -1.
func skipNumber(data []byte, i int) int {
	if data[i] == '-' {
		i++
	}
	switch {
	case i < len(data) && data[i] == '0':
		i++
	case i < len(data) && data[i] >= '1' && data[i] <= '9':
		i = digits(data, i)
	default:
		return -1
	}
	if i < len(data) && data[i] == '.' {
		j := digits(data, i+1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		j := digits(data, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

// space returns where the whitespace at data[i:] ends.
func space(data []byte, i int) int {
	for i < len(data) {
		c := data[i]
		if c > ' ' { // gqlgen writes no whitespace: the common case, one test
			return i
		}
		switch c {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// digits returns where the run of digits at data[i:] ends.
func digits(data []byte, i int) int {
	for i < len(data) && data[i] >= '0' && data[i] <= '9' {
		i++
	}
	return i
}
