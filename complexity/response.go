package complexity

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/vektah/gqlparser/v2/ast"
)

// response is a JSON value read into flat slices, so that pricing what an operation
// returned costs a few reused slices rather than a map per object and an interface per
// value. Strings are not copied: a span points into the source, or into decoded when the
// source escaped it (or the value came from a Go map).
type response struct {
	src     []byte
	decoded []byte
	nodes   []rnode
	members []member         // the children of objects (with keys) and arrays, each contiguous
	stack   []member         // scratch, while an object or array is open
	index   map[int32]rindex // lookup tables of objects with many members, built on demand

	// The pricing's scratch, kept with the response for reuse: what the
	// selections of a set are, by set and type (see actualWalker.selectionsIn).
	free       map[freeKey][]selectionInfo
	selections []selectionInfo
	recent     []recentSets
}

// selectionInfo is what the pricing works out once of a selection on a type.
type selectionInfo struct {
	field *fieldInfo // nil: not a field, or one the type does not have
	free  bool
}

// freeKey is a selection set (by its first selection) selected on one type.
type freeKey struct {
	first *ast.Selection
	obj   *typeInfo
	root  bool
}

type rkind uint8

const (
	rNull rkind = iota
	rObject
	rArray
	rString
	rScalar // a number or a boolean
)

// rnode is one value: a string's text, or an object's or array's members. A
// string, number, boolean or null read from JSON gets none: its node is the
// complement of its offset in src (negative), read again when the pricing asks
// (rarely: most are free fields, never looked at).
type rnode struct {
	kind   rkind
	text   span  // rString
	first  int32 // rObject, rArray: members[first : first+count]
	count  int32
	cursor int32 // rObject: where the last key lookup matched, for the next one
}

type member struct {
	key  span // objects only
	node int32
}

// span is a piece of src, or of decoded.
type span struct {
	start, end int32
	decoded    bool
}

type rindex map[string]int32

// maxResponseDepth bounds the nesting of objects and arrays, as encoding/json does.
const maxResponseDepth = 10000

// indexedObjects are objects with more members than this: a key is found through a map
// built once, rather than by scanning (which a hostile upstream could make quadratic).
const indexedObjects = 32

var responses = sync.Pool{New: func() any { return new(response) }}

// getResponse returns an empty response from the pool; putResponse gives it back.
func getResponse() *response { return responses.Get().(*response) }

func putResponse(r *response) {
	// Keep the slices of ordinary responses for the next one; let huge ones go.
	if cap(r.nodes) > 1<<16 || cap(r.members) > 1<<16 || cap(r.decoded) > 1<<20 {
		return
	}
	r.src, r.index = nil, nil
	r.decoded, r.nodes, r.members, r.stack = r.decoded[:0], r.nodes[:0], r.members[:0], r.stack[:0]
	clear(r.free) // its keys point into the operation priced
	r.selections = r.selections[:0]
	clear(r.recent)
	r.recent = r.recent[:0]
	responses.Put(r)
}

var errResponseSyntax = errors.New("invalid JSON")

// parse reads data, a whole JSON value, and returns the root node.
func (r *response) parse(data []byte) (int32, error) {
	if len(data) > 1<<31-1 {
		return 0, errors.New("response data larger than 2 GiB")
	}
	r.src = data
	p := responseParser{r: r, data: data}
	p.space()
	root, err := p.value(0)
	if err != nil {
		return 0, err
	}
	p.space()
	if p.i != len(data) {
		return 0, p.fail()
	}
	return root, nil
}

type responseParser struct {
	r    *response
	data []byte
	i    int
}

func (p *responseParser) fail() error {
	if p.i >= len(p.data) {
		return fmt.Errorf("%w: unexpected end", errResponseSyntax)
	}
	return fmt.Errorf("%w at offset %d", errResponseSyntax, p.i)
}

func (p *responseParser) space() {
	for p.i < len(p.data) {
		switch p.data[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *responseParser) node(n rnode) int32 {
	p.r.nodes = append(p.r.nodes, n)
	return int32(len(p.r.nodes) - 1)
}

func (p *responseParser) value(depth int) (int32, error) {
	if p.i >= len(p.data) {
		return 0, p.fail()
	}
	switch c := p.data[p.i]; {
	case c == '{' || c == '[':
		if depth >= maxResponseDepth {
			return 0, fmt.Errorf("%w: nested deeper than %d", errResponseSyntax, maxResponseDepth)
		}
		return p.container(depth)
	case c == '"':
		start := p.i
		if _, err := p.string(); err != nil {
			return 0, err
		}
		return ^int32(start), nil
	case c == 'n':
		return p.literal("null")
	case c == 't':
		return p.literal("true")
	case c == 'f':
		return p.literal("false")
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	}
	return 0, p.fail()
}

func (p *responseParser) literal(word string) (int32, error) {
	if len(p.data)-p.i < len(word) || string(p.data[p.i:p.i+len(word)]) != word {
		return 0, p.fail()
	}
	start := p.i
	p.i += len(word)
	return ^int32(start), nil
}

// number checks the JSON number grammar; the value itself is never needed.
func (p *responseParser) number() (int32, error) {
	start := p.i
	digits := func() int {
		n := 0
		for p.i < len(p.data) && p.data[p.i] >= '0' && p.data[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	if p.data[p.i] == '-' {
		p.i++
	}
	if p.i < len(p.data) && p.data[p.i] == '0' {
		p.i++
	} else if digits() == 0 {
		return 0, p.fail()
	}
	if p.i < len(p.data) && p.data[p.i] == '.' {
		p.i++
		if digits() == 0 {
			return 0, p.fail()
		}
	}
	if p.i < len(p.data) && (p.data[p.i] == 'e' || p.data[p.i] == 'E') {
		p.i++
		if p.i < len(p.data) && (p.data[p.i] == '+' || p.data[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return 0, p.fail()
		}
	}
	return ^int32(start), nil
}

// string reads a JSON string at p.i. Its span is the source between the quotes, unless
// the string has escapes: then it is decoded (by encoding/json, which knows them all)
// into r.decoded.
func (p *responseParser) string() (span, error) {
	start := p.i + 1
	escaped := false
	for j := start; j < len(p.data); j++ {
		for j < len(p.data) && plainByte[p.data[j]] { // the common run, one load and test a byte
			j++
		}
		if j == len(p.data) {
			break
		}
		switch c := p.data[j]; {
		case c == '"':
			p.i = j + 1
			if !escaped {
				return span{start: int32(start), end: int32(j)}, nil
			}
			var s string
			if err := json.Unmarshal(p.data[start-1:j+1], &s); err != nil {
				return span{}, fmt.Errorf("%w: bad string at offset %d", errResponseSyntax, start-1)
			}
			return p.r.decode(s), nil
		case c == '\\':
			escaped = true
			j++ // the escaped character is never the closing quote
		case c < 0x20:
			p.i = j
			return span{}, p.fail()
		}
	}
	p.i = len(p.data)
	return span{}, p.fail()
}

// plainByte marks the bytes a string holds as they are: not a quote, a
// backslash or a control character.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// decode keeps s in r.decoded and returns its span.
func (r *response) decode(s string) span {
	start := len(r.decoded)
	r.decoded = append(r.decoded, s...)
	return span{start: int32(start), end: int32(len(r.decoded)), decoded: true}
}

func (p *responseParser) container(depth int) (int32, error) {
	r := p.r
	object := p.data[p.i] == '{'
	closer := byte(']')
	if object {
		closer = '}'
	}
	p.i++
	mark := len(r.stack)
	p.space()
	if p.i < len(p.data) && p.data[p.i] == closer {
		p.i++
	} else {
		for {
			var m member
			if object {
				p.space()
				if p.i >= len(p.data) || p.data[p.i] != '"' {
					return 0, p.fail()
				}
				key, err := p.string()
				if err != nil {
					return 0, err
				}
				m.key = key
				p.space()
				if p.i >= len(p.data) || p.data[p.i] != ':' {
					return 0, p.fail()
				}
				p.i++
			}
			p.space()
			n, err := p.value(depth + 1)
			if err != nil {
				return 0, err
			}
			m.node = n
			r.stack = append(r.stack, m)
			p.space()
			if p.i >= len(p.data) {
				return 0, p.fail()
			}
			if p.data[p.i] == ',' {
				p.i++
				continue
			}
			if p.data[p.i] != closer {
				return 0, p.fail()
			}
			p.i++
			break
		}
	}
	kind := rArray
	if object {
		kind = rObject
	}
	first := len(r.members)
	r.members = append(r.members, r.stack[mark:]...)
	n := rnode{kind: kind, first: int32(first), count: int32(len(r.members) - first)}
	r.stack = r.stack[:mark]
	return p.node(n), nil
}

// fromValue adds v, a value as encoding/json decodes it into an any, and returns its
// node. Object members are sorted by key, so that the result does not depend on the
// order in which the map was ranged.
func (r *response) fromValue(v any, depth int) (int32, error) {
	if depth > maxResponseDepth {
		return 0, fmt.Errorf("%w: nested deeper than %d", errResponseSyntax, maxResponseDepth)
	}
	add := func(n rnode) int32 {
		r.nodes = append(r.nodes, n)
		return int32(len(r.nodes) - 1)
	}
	switch x := v.(type) {
	case nil:
		return add(rnode{kind: rNull}), nil
	case string:
		return add(rnode{kind: rString, text: r.decode(x)}), nil
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		kids := make([]member, len(keys))
		for i, k := range keys {
			n, err := r.fromValue(x[k], depth+1)
			if err != nil {
				return 0, err
			}
			kids[i] = member{key: r.decode(k), node: n}
		}
		first := len(r.members)
		r.members = append(r.members, kids...)
		return add(rnode{kind: rObject, first: int32(first), count: int32(len(kids))}), nil
	case []any:
		kids := make([]member, len(x))
		for i, e := range x {
			n, err := r.fromValue(e, depth+1)
			if err != nil {
				return 0, err
			}
			kids[i] = member{node: n}
		}
		first := len(r.members)
		r.members = append(r.members, kids...)
		return add(rnode{kind: rArray, first: int32(first), count: int32(len(kids))}), nil
	}
	return add(rnode{kind: rScalar}), nil
}

func (r *response) bytes(s span) []byte {
	if s.decoded {
		return r.decoded[s.start:s.end]
	}
	return r.src[s.start:s.end]
}

// kind is the kind of the value at n.
func (r *response) kind(n int32) rkind {
	if n >= 0 {
		return r.nodes[n].kind
	}
	switch r.src[^n] {
	case '"':
		return rString
	case 'n':
		return rNull
	}
	return rScalar
}

// text is the string at n, and whether n is a string.
func (r *response) text(n int32) ([]byte, bool) {
	if n < 0 {
		if r.src[^n] != '"' {
			return nil, false
		}
		p := responseParser{r: r, data: r.src, i: int(^n)}
		s, err := p.string() // read before: it reads
		return r.bytes(s), err == nil
	}
	node := &r.nodes[n]
	if node.kind != rString {
		return nil, false
	}
	return r.bytes(node.text), true
}

// get returns the value under key in the object obj. Members are looked up from where
// the last lookup matched: selections come in the order the response was written, so
// each lookup usually takes one comparison.
func (r *response) get(obj int32, key string) (int32, bool) {
	if obj < 0 {
		return 0, false
	}
	node := &r.nodes[obj]
	if node.kind != rObject || node.count == 0 {
		return 0, false
	}
	if node.count > indexedObjects {
		return r.indexed(obj, key)
	}
	members := r.members[node.first : node.first+node.count]
	for i := range members {
		j := (int(node.cursor) + i) % len(members)
		if string(r.bytes(members[j].key)) == key {
			node.cursor = int32(j+1) % node.count
			return members[j].node, true
		}
	}
	return 0, false
}

func (r *response) indexed(obj int32, key string) (int32, bool) {
	idx, ok := r.index[obj]
	if !ok {
		node := r.nodes[obj]
		idx = make(rindex, node.count)
		for _, m := range r.members[node.first : node.first+node.count] {
			k := string(r.bytes(m.key))
			if _, dup := idx[k]; !dup { // the first of duplicate keys, as get finds it
				idx[k] = m.node
			}
		}
		if r.index == nil {
			r.index = map[int32]rindex{}
		}
		r.index[obj] = idx
	}
	n, ok := idx[key]
	return n, ok
}

// items returns the members of the array at n, or nil when n is not an array.
func (r *response) items(n int32) []member {
	if n < 0 {
		return nil
	}
	node := r.nodes[n]
	if node.kind != rArray {
		return nil
	}
	return r.members[node.first : node.first+node.count]
}
