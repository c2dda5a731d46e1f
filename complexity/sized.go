package complexity

import (
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"
)

// sizedNode is one level of a @listSize's sizedFields: for each field named at this level,
// whether it takes the size (the end of a path) and the level below it (a path goes on).
// "nodes", "edges.node" and "results { page }" are paths; the tree is built once, when
// the schema loads, and looked up by field name while pricing.
type sizedNode struct {
	steps map[string]sizedStep
}

type sizedStep struct {
	sized bool
	next  *sizedNode
}

func (n *sizedNode) step(field string) (sizedStep, bool) {
	if n == nil {
		return sizedStep{}, false
	}
	s, ok := n.steps[field]
	return s, ok
}

func (n *sizedNode) add(path []string) {
	for i, name := range path {
		if n.steps == nil {
			n.steps = map[string]sizedStep{}
		}
		s := n.steps[name]
		if i == len(path)-1 {
			s.sized = true
			n.steps[name] = s
			return
		}
		if s.next == nil {
			s.next = &sizedNode{}
		}
		n.steps[name] = s
		n = s.next
	}
}

// parseSizedField reads one sizedFields entry into the paths it names:
//
//	"nodes"                -> [nodes]
//	"edges.node"           -> [edges node]
//	"results { page }"     -> [results page] (Apollo's selection syntax)
//	"a { b { c } d }"      -> [a b c], [a d]
//
// Commas and white space separate names, as in GraphQL.
func parseSizedField(entry string) ([][]string, error) {
	p := sizedParser{src: entry}
	paths, err := p.selections(nil, true)
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, errors.New("names no field")
	}
	return paths, nil
}

type sizedParser struct {
	src string
	pos int
}

// selections reads names (and their nested selections) until '}' or, at the top, the end.
func (p *sizedParser) selections(prefix []string, top bool) ([][]string, error) {
	var paths [][]string
	for {
		switch c, ok := p.peek(); {
		case !ok:
			if !top {
				return nil, errors.New("a '{' is not closed")
			}
			return paths, nil
		case c == '}':
			if top {
				return nil, errors.New("a '}' closes nothing")
			}
			p.pos++
			if len(paths) == 0 {
				return nil, errors.New("'{ }' selects nothing")
			}
			return paths, nil
		}
		path, err := p.path(prefix)
		if err != nil {
			return nil, err
		}
		if c, ok := p.peek(); ok && c == '{' {
			p.pos++
			inner, err := p.selections(path, false)
			if err != nil {
				return nil, err
			}
			paths = append(paths, inner...)
			continue
		}
		paths = append(paths, path)
	}
}

// path reads name('.'name)* after prefix.
func (p *sizedParser) path(prefix []string) ([]string, error) {
	path := append([]string(nil), prefix...)
	for {
		name := p.name()
		if name == "" {
			if _, ok := p.peek(); ok {
				r, _ := utf8.DecodeRuneInString(p.src[p.pos:])
				return nil, errors.New("unexpected " + strconv.QuoteRune(r))
			}
			return nil, errors.New("a name is missing at the end")
		}
		path = append(path, name)
		if c, ok := p.peek(); !ok || c != '.' {
			return path, nil
		}
		p.pos++
	}
}

// peek skips white space and commas and returns the next character.
func (p *sizedParser) peek() (byte, bool) {
	for p.pos < len(p.src) && strings.IndexByte(" \t\r\n,", p.src[p.pos]) >= 0 {
		p.pos++
	}
	if p.pos >= len(p.src) {
		return 0, false
	}
	return p.src[p.pos], true
}

func (p *sizedParser) name() string {
	if _, ok := p.peek(); !ok {
		return ""
	}
	start := p.pos
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		isLetter := c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
		if !isLetter && (p.pos == start || c < '0' || c > '9') {
			break
		}
		p.pos++
	}
	return p.src[start:p.pos]
}
