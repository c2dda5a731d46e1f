package gqlproxy

import (
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/lexer"
)

// The proxy has only the upstream's reply to price, so nothing in the reply that a
// client can write may decide the price. The concrete type of an item of an interface
// or union is read from a __typename the proxy asks for itself, under typenameAlias,
// which no client may use: a client alias starting with "__costgate", or named
// __typename on a field that is not __typename where an abstract item is selected,
// is refused (BAD_REQUEST) before anything is forwarded.
//
// The proxy forwards the client's own text, with " __costgate_typename: __typename "
// written after the opening brace of each abstract field's selection set. Nothing else
// moves, and no line: the errors the upstream locates in the forwarded text are moved
// back to the client's document by the columns inserted before them on their line.

// aliasError is why an operation is refused for its aliases, or "".
func aliasError(doc *ast.QueryDocument, schema *ast.Schema) string {
	c := aliasCheck{schema: schema, seen: map[aliasVisit]bool{}}
	for _, op := range doc.Operations {
		c.set(op.SelectionSet, false)
	}
	for _, f := range doc.Fragments {
		c.set(f.SelectionSet, false) // fragments the operations do not spread, too
	}
	return c.err
}

type aliasVisit struct {
	fragment *ast.FragmentDefinition
	abstract bool
}

type aliasCheck struct {
	schema *ast.Schema
	seen   map[aliasVisit]bool
	err    string
}

// set checks the selections of set; abstract says they are selected on the items of an
// interface or union (directly, or through fragments).
func (c *aliasCheck) set(set ast.SelectionSet, abstract bool) {
	for _, sel := range set {
		if c.err != "" {
			return
		}
		switch sel := sel.(type) {
		case *ast.Field:
			switch {
			case strings.HasPrefix(sel.Alias, "__costgate"):
				c.err = fmt.Sprintf("the alias %q is reserved: costgate's own fields are named __costgate…", sel.Alias)
			case abstract && sel.Alias == "__typename" && sel.Name != "__typename":
				c.err = fmt.Sprintf("the alias __typename on the field %q of an interface or union item is refused: __typename names the item's type", sel.Name)
			case len(sel.SelectionSet) > 0:
				c.set(sel.SelectionSet, c.isAbstract(sel))
			}
		case *ast.InlineFragment:
			c.set(sel.SelectionSet, abstract)
		case *ast.FragmentSpread:
			if def := sel.Definition; def != nil && !c.seen[aliasVisit{def, abstract}] {
				c.seen[aliasVisit{def, abstract}] = true
				c.set(def.SelectionSet, abstract)
			}
		}
	}
}

func (c *aliasCheck) isAbstract(f *ast.Field) bool {
	if f.Definition == nil {
		return false
	}
	def := c.schema.Types[f.Definition.Type.Name()]
	return def != nil && def.IsAbstractType()
}

// typenameInsert is what the proxy writes into each abstract selection set.
const typenameInsert = " " + typenameAlias + ": __typename "

// insertion is one typenameInsert, after the opening brace at line, column of the
// client's document.
type insertion struct {
	line, column int // 1-based, in runes, of the first rune after the brace
	offset       int // byte offset of the same
}

// withTypenames returns query with typenameInsert after the opening brace of the
// selection set of every field of doc (its parse, validated) whose type is abstract, and
// where it inserted them; query unchanged and nil when there are none.
func withTypenames(query string, doc *ast.QueryDocument, schema *ast.Schema) (string, []insertion) {
	var firsts []int // rune offsets of the first selection of each abstract selection set
	var walk func(set ast.SelectionSet)
	walk = func(set ast.SelectionSet) {
		for _, sel := range set {
			var inner ast.SelectionSet
			switch s := sel.(type) {
			case *ast.Field:
				inner = s.SelectionSet
				if s.Definition != nil && len(inner) > 0 {
					if def := schema.Types[s.Definition.Type.Name()]; def != nil && def.IsAbstractType() {
						if p := selectionStart(inner[0]); p >= 0 {
							firsts = append(firsts, p)
						}
					}
				}
			case *ast.InlineFragment:
				inner = s.SelectionSet
			}
			walk(inner)
		}
	}
	for _, op := range doc.Operations {
		walk(op.SelectionSet)
	}
	for _, f := range doc.Fragments {
		walk(f.SelectionSet)
	}
	if len(firsts) == 0 {
		return query, nil
	}
	braces := openingBraces(query)
	sort.Ints(firsts)
	var ins []insertion
	for _, first := range firsts {
		// The set's brace is the last one before its first selection: between the
		// two there can only be spaces, commas, comments and a fragment's "...".
		i := sort.Search(len(braces), func(i int) bool { return braces[i].start >= first }) - 1
		if i < 0 {
			continue
		}
		b := braces[i]
		if n := len(ins); n > 0 && ins[n-1].offset == b.offset+1 {
			continue
		}
		ins = append(ins, insertion{line: b.line, column: b.column + 1, offset: b.offset + 1})
	}
	var out strings.Builder
	out.Grow(len(query) + len(ins)*len(typenameInsert))
	last := 0
	for _, in := range ins {
		out.WriteString(query[last:in.offset])
		out.WriteString(typenameInsert)
		last = in.offset
	}
	out.WriteString(query[last:])
	return out.String(), ins
}

// selectionStart is the rune offset of a token of a selection that comes after the
// brace opening its set: a field's alias or name, a fragment's name or "on".
func selectionStart(sel ast.Selection) int {
	var p *ast.Position
	switch s := sel.(type) {
	case *ast.Field:
		p = s.Position
	case *ast.InlineFragment:
		p = s.Position
	case *ast.FragmentSpread:
		p = s.Position
	}
	if p == nil {
		return -1
	}
	return p.Start
}

type brace struct {
	start        int // rune offset
	offset       int // byte offset
	line, column int
}

// openingBraces lists the "{" tokens of query, in order (those in strings and
// comments are not tokens).
func openingBraces(query string) []brace {
	var out []brace
	lex := lexer.New(&ast.Source{Input: query})
	runes, bytes := 0, 0 // a running conversion of rune offsets to byte offsets
	for {
		tok, err := lex.ReadToken()
		if err != nil || tok.Kind == lexer.EOF {
			return out
		}
		if tok.Kind != lexer.BraceL {
			continue
		}
		for runes < tok.Pos.Start && bytes < len(query) {
			_, size := utf8.DecodeRuneInString(query[bytes:])
			bytes += size
			runes++
		}
		out = append(out, brace{start: tok.Pos.Start, offset: bytes, line: tok.Pos.Line, column: tok.Pos.Column})
	}
}

// clientColumn is where column (1-based) of line of the forwarded text is in the
// client's document: less what was inserted before it on its line (a location in an
// insertion is the insertion's place).
func clientColumn(ins []insertion, line, column int) int {
	shift := 0
	for _, in := range ins {
		if in.line < line {
			continue
		}
		if in.line > line {
			break
		}
		at := in.column + shift // where the insertion starts in the forwarded text
		if column < at {
			break
		}
		if column < at+len(typenameInsert) {
			return in.column
		}
		shift += len(typenameInsert)
	}
	return column - shift
}
