package config

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml/ast"
)

// The strict YAML decoder: goccy/go-yaml's parser, then a walk of its AST
// that fills the config by reflection, so that every error carries the
// file, the line and the field path.

// expansion bounds the nodes decoded, aliases expanded, to this many times
// the nodes in the file: aliases can otherwise grow a small file exponentially.
const expansion = 16

// decoder fills a Config from goccy/go-yaml's AST. Decoding by hand rather
// than with yaml.Unmarshal gives every error its YAML path and line, refuses
// "1000" and 1.5 where an integer belongs (Unmarshal converts both), and
// tells an absent field (keep the default) from one set to zero.
type decoder struct {
	src     *source
	aliases map[*ast.AliasNode]ast.Node
	// merged caches the pairs of mappings merged in with "<<", so that a
	// chain of merges over aliases costs its size, not its expansion.
	merged map[ast.Node][]pair
	errs   []*Error
	budget int
}

func (d *decoder) fail(field string, at ast.Node, format string, args ...any) {
	d.errs = append(d.errs, &Error{File: d.src.name, Line: line(at), Field: field, Reason: fmt.Sprintf(format, args...)})
}

// collectAnchors resolves every alias to the anchor most recently completed
// before it, so that an anchor cannot refer to itself. It returns the number
// of nodes under n.
func (d *decoder) collectAnchors(n ast.Node, anchors map[string]ast.Node) int {
	if isNil(n) {
		return 0
	}
	count := 1
	switch n := n.(type) {
	case *ast.MappingNode:
		for _, mv := range n.Values {
			count += d.collectAnchors(mv, anchors)
		}
	case *ast.MappingValueNode:
		count += d.collectAnchors(n.Key, anchors)
		count += d.collectAnchors(n.Value, anchors)
	case *ast.MappingKeyNode:
		count += d.collectAnchors(n.Value, anchors)
	case *ast.SequenceNode:
		for _, e := range n.Values {
			count += d.collectAnchors(e, anchors)
		}
	case *ast.TagNode:
		count += d.collectAnchors(n.Value, anchors)
	case *ast.AnchorNode:
		count += d.collectAnchors(n.Value, anchors)
		if name, ok := nodeName(n.Name); ok {
			anchors[name] = n.Value
		}
	case *ast.AliasNode:
		if name, ok := nodeName(n.Value); ok {
			if target, ok := anchors[name]; ok {
				d.aliases[n] = target
			}
		}
	}
	return count
}

func nodeName(n ast.Node) (string, bool) {
	if isNil(n) || n.GetToken() == nil {
		return "", false
	}
	return n.GetToken().Value, true
}

// resolve looks through anchors and aliases; ok is false after an error.
func (d *decoder) resolve(field string, n ast.Node) (ast.Node, bool) {
	for range 64 {
		switch v := n.(type) {
		case *ast.AnchorNode:
			n = v.Value
		case *ast.AliasNode:
			target, ok := d.aliases[v]
			if !ok {
				name, _ := nodeName(v.Value)
				d.fail(field, v, "unknown alias *%s", name)
				return nil, false
			}
			n = target
		case *ast.TagNode:
			tag := "!!str"
			if v.Start != nil {
				tag = v.Start.Value
			}
			d.fail(field, v, "YAML tags such as %s are not supported (quote a string instead)", tag)
			return nil, false
		default:
			if isNil(n) {
				return nil, true
			}
			return n, true
		}
		if isNil(n) {
			return nil, true
		}
	}
	d.fail(field, n, "anchors and aliases nest too deep")
	return nil, false
}

var (
	durationType = reflect.TypeFor[time.Duration]()
	statusType   = reflect.TypeFor[Status]()
)

// decode sets v from n. A null leaves v as it is (its default, or empty),
// except that it clears a pointer. at is the node whose line the field gets.
func (d *decoder) decode(field string, at, n ast.Node, v reflect.Value) {
	if !d.spend(1, field, n) {
		return
	}
	if at == nil {
		at = n
	}
	if field != "" {
		d.src.lines[field] = line(at)
	}
	n, ok := d.resolve(field, n)
	if !ok {
		return
	}
	if n == nil || n.Type() == ast.NullType {
		if v.Kind() == reflect.Pointer {
			v.SetZero()
		}
		return
	}
	d.src.given[field] = true
	if v.Type() == costsType {
		d.decodeCosts(field, n, v)
		return
	}
	if v.Type() == durationType {
		s, ok := d.scalarString(n)
		dur, err := time.ParseDuration(s)
		if !ok || err != nil {
			d.fail(field, n, "want a duration such as 50ms or 1m, got %s", describe(n))
			return
		}
		v.SetInt(int64(dur))
		return
	}
	if v.Type() == statusType {
		// 404 and "404" are one status; 2xx is a string either way.
		text, ok := d.scalarString(n)
		if i, isInt := n.(*ast.IntegerNode); isInt {
			text, ok = i.GetToken().Value, true
		}
		if !ok {
			d.fail(field, n, "want a status class such as 2xx or a code such as 404, got %s", describe(n))
			return
		}
		v.SetString(text)
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.budget++ // the pointee is the same node, not one more
		d.decode(field, at, n, v.Elem())
	case reflect.Struct:
		d.decodeStruct(field, n, v)
	case reflect.Map:
		d.decodeMap(field, n, v)
	case reflect.Slice:
		seq, ok := n.(*ast.SequenceNode)
		if !ok {
			d.fail(field, n, "want a list, got %s", describe(n))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(seq.Values), len(seq.Values))
		for i, e := range seq.Values {
			elem := fmt.Sprintf("%s[%d]", field, i)
			d.src.parents[elem] = field
			d.decode(elem, e, e, s.Index(i))
		}
		v.Set(s)
	case reflect.String:
		s, ok := d.scalarString(n)
		if !ok {
			d.fail(field, n, "want a string, got %s", describe(n))
			return
		}
		v.SetString(s)
	case reflect.Int, reflect.Int64:
		i, ok := n.(*ast.IntegerNode)
		if !ok {
			d.fail(field, n, "want an integer, got %s", describe(n))
			return
		}
		var x int64
		switch iv := i.Value.(type) {
		case int64:
			x = iv
		case uint64: // how goccy/go-yaml stores a non-negative integer
			x, ok = int64(iv), iv <= math.MaxInt64
		default:
			ok = false
		}
		if !ok || v.OverflowInt(x) {
			d.fail(field, n, "integer %s out of range", i.GetToken().Value)
			return
		}
		v.SetInt(x)
	case reflect.Bool:
		b, ok := n.(*ast.BoolNode)
		if !ok {
			d.fail(field, n, "want true or false, got %s", describe(n))
			return
		}
		v.SetBool(b.Value)
	default:
		d.fail(field, n, "cannot decode into %s", v.Type())
	}
}

// spend takes n from the node budget; false once it is exhausted.
func (d *decoder) spend(n int, field string, at ast.Node) bool {
	if d.budget < 0 {
		return false
	}
	if d.budget -= n; d.budget < 0 {
		d.fail(field, at, "the document is too large once aliases are expanded")
		return false
	}
	return true
}

// scalarString is the text of a string scalar (plain, quoted or block).
func (d *decoder) scalarString(n ast.Node) (string, bool) {
	switch n := n.(type) {
	case *ast.StringNode:
		return n.Value, true
	case *ast.LiteralNode:
		if n.Value == nil {
			return "", true
		}
		return n.Value.Value, true
	}
	return "", false
}

// pair is one key and value of a mapping, merge keys expanded.
type pair struct {
	key   string
	at    ast.Node
	value ast.Node
}

// pairs returns the entries of a mapping. Entries merged in with "<<" come
// after the mapping's own and are dropped when it has the key already, as
// YAML merge keys require; the first mapping merged wins over later ones.
func (d *decoder) pairs(field string, n ast.Node, depth int) ([]pair, bool) {
	var values []*ast.MappingValueNode
	switch m := n.(type) {
	case *ast.MappingNode:
		values = m.Values
	case *ast.MappingValueNode:
		values = []*ast.MappingValueNode{m}
	default:
		d.fail(field, n, "want a mapping, got %s", describe(n))
		return nil, false
	}
	if depth > 16 {
		d.fail(field, n, "merge keys nest too deep")
		return nil, false
	}
	if !d.spend(len(values), field, n) {
		return nil, false
	}
	var own, merged []pair
	seen := map[string]bool{}
	for _, mv := range values {
		if mv == nil || isNil(mv.Key) {
			continue
		}
		if mv.Key.IsMergeKey() {
			src, ok := d.resolve(field, mv.Value)
			if !ok {
				return nil, false
			}
			var sources []ast.Node
			if seq, isSeq := src.(*ast.SequenceNode); isSeq {
				for _, e := range seq.Values {
					if e, ok := d.resolve(field, e); !ok {
						return nil, false
					} else if e != nil {
						sources = append(sources, e)
					}
				}
			} else if src != nil && src.Type() != ast.NullType {
				sources = append(sources, src)
			}
			for _, s := range sources {
				ps, cached := d.merged[s]
				if !cached {
					if ps, ok = d.pairs(field, s, depth+1); !ok {
						return nil, false
					}
					d.merged[s] = ps
				}
				merged = append(merged, ps...)
			}
			continue
		}
		key, ok := keyText(mv.Key)
		if !ok {
			d.fail(field, mv.Key, "a key must be a scalar, got %s", describe(mv.Key))
			return nil, false
		}
		seen[key] = true
		own = append(own, pair{key: key, at: mv.Key, value: mv.Value})
	}
	for _, p := range merged {
		if !seen[p.key] {
			seen[p.key] = true
			own = append(own, p)
		}
	}
	return own, true
}

func keyText(n ast.Node) (string, bool) {
	if k, ok := n.(*ast.MappingKeyNode); ok {
		n = k.Value
	}
	switch k := n.(type) {
	case *ast.StringNode:
		return k.Value, true
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode, *ast.NullNode, *ast.InfinityNode, *ast.NanNode:
		if tk := k.GetToken(); tk != nil {
			return tk.Value, true
		}
	}
	return "", false
}

func (d *decoder) decodeStruct(field string, n ast.Node, v reflect.Value) {
	ps, ok := d.pairs(field, n, 0)
	if !ok {
		return
	}
	t := v.Type()
	var names []string
	index := map[string]int{}
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if name == "" || name == "-" || !t.Field(i).IsExported() {
			continue
		}
		names = append(names, name)
		index[name] = i
	}
	for _, p := range ps {
		child := childPath(field, p.key)
		d.src.parents[child] = field
		i, ok := index[p.key]
		if !ok {
			d.fail(child, p.at, "unknown key (want one of %s)", strings.Join(names, ", "))
			continue
		}
		d.decode(child, p.at, p.value, v.Field(i))
	}
}

func (d *decoder) decodeMap(field string, n ast.Node, v reflect.Value) {
	ps, ok := d.pairs(field, n, 0)
	if !ok {
		return
	}
	if v.IsNil() {
		v.Set(reflect.MakeMapWithSize(v.Type(), len(ps)))
	}
	for i, p := range ps {
		child := childPath(field, p.key)
		if field == "identity.api_keys" {
			// An API key is a secret: messages name it by position.
			child = fmt.Sprintf("%s[#%d]", field, i+1)
		}
		d.src.parents[child] = field
		d.src.entries[field+"\x00"+p.key] = child
		elem := reflect.New(v.Type().Elem()).Elem()
		d.decode(child, p.at, p.value, elem)
		v.SetMapIndex(reflect.ValueOf(p.key).Convert(v.Type().Key()), elem)
	}
}

// childPath is parent.key, or parent["key"] when key is not a plain word.
func childPath(parent, key string) string {
	if key == "" || strings.ContainsFunc(key, func(c rune) bool {
		return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-')
	}) {
		return parent + "[" + strconv.Quote(key) + "]"
	}
	if parent == "" {
		return key
	}
	return parent + "." + key
}

// describe names a node's kind and value for "want X, got Y" messages.
func describe(n ast.Node) string {
	if isNil(n) {
		return "nothing"
	}
	switch n := n.(type) {
	case *ast.StringNode:
		return "string " + strconv.Quote(truncate(n.Value))
	case *ast.LiteralNode:
		return "a block string"
	case *ast.IntegerNode:
		return "integer " + truncate(n.GetToken().Value)
	case *ast.FloatNode, *ast.InfinityNode, *ast.NanNode:
		return "number " + truncate(n.GetToken().Value)
	case *ast.BoolNode:
		return "boolean " + strconv.FormatBool(n.Value)
	case *ast.NullNode:
		return "null"
	case *ast.MappingNode, *ast.MappingValueNode:
		return "a mapping"
	case *ast.SequenceNode:
		return "a list"
	}
	return n.Type().String()
}

func truncate(s string) string {
	const max = 40
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}

// line is the 1-based line of a node, 0 when unknown.
func line(n ast.Node) int {
	if isNil(n) {
		return 0
	}
	tk := n.GetToken()
	if tk == nil || tk.Position == nil {
		return 0
	}
	return tk.Position.Line
}

// isNil reports a nil node, including a typed nil inside the interface.
func isNil(n ast.Node) bool {
	if n == nil {
		return true
	}
	v := reflect.ValueOf(n)
	return v.Kind() == reflect.Pointer && v.IsNil()
}
