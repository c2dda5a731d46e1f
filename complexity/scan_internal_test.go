package complexity

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/costgate/costgate/internal/pricecases"
)

// scanOperations are operations of the cost tests' schema whose responses
// the scan prices, then (the last pricecases.LongWay) some it hands to the
// long reading.
var scanOperations = pricecases.Operations

func fragmentFanOut(depth int) string { return pricecases.FanOut(depth) }
func pathFanOut(depth int) string     { return pricecases.PathFanOut(depth) }

// TestScanAgreesWithLongReading prices random responses, well and badly
// formed, with ActualJSONShared (the scan, or the long reading when the scan
// gives up) and with ActualJSON (the long reading alone): the cost and the
// error class are the same, and the scan priced most of the well-formed ones.
func TestScanAgreesWithLongReading(t *testing.T) {
	s, err := LoadSDL("schema.graphql", pricecases.SDL)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	vars := pricecases.OperationVars()
	for qi, query := range scanOperations {
		doc, errs := gqlparser.LoadQueryWithRules(s.AST(), query, nil)
		if errs != nil {
			t.Fatalf("%s: %v", query, errs)
		}
		op := doc.Operations[0]
		plans := NewActualPlans(op)
		scanned, clean := 0, 0
		for i := range 300 {
			g := responseGen{s: s, rng: rng, tricky: i%3 == 1, malformed: i%3 == 2}
			data := g.response(op)
			if i%3 == 0 {
				clean++
			}
			want, wantErr := s.ActualJSON(op, vars, data)
			got, err := s.ActualJSONShared(plans, vars, data)
			if got != want || !sameErrorClass(err, wantErr) {
				t.Fatalf("%s\n%s\nActualJSONShared = %d, %v; ActualJSON = %d, %v", query, data, got, err, want, wantErr)
			}
			if plans.static {
				if c, ok := s.scanActual(plans, vars, trimmed(data)); ok {
					scanned++
					if c != want || wantErr != nil {
						t.Fatalf("%s\n%s\nscan = %d; ActualJSON = %d, %v", query, data, c, want, wantErr)
					}
				}
			}
		}
		// The scan prices them all but the last, at least when no key comes
		// twice or escaped.
		if qi < len(scanOperations)-pricecases.LongWay && scanned < clean {
			t.Errorf("%s: the scan priced %d responses, want at least the %d clean ones", query, scanned, clean)
		}
	}
}

func trimmed(data []byte) []byte { return []byte(strings.TrimSpace(string(data))) }

// sameErrorClass reports two errors that are both nil, or both invalid
// JSON, or both another error.
func sameErrorClass(a, b error) bool {
	if (a == nil) != (b == nil) {
		return false
	}
	return errors.Is(a, errResponseSyntax) == errors.Is(b, errResponseSyntax)
}

// responseGen writes random responses to an operation: members in random
// order, some missing, some extra, some twice; nulls, escapes, huge numbers,
// values of the wrong kind, whitespace; and, when malformed, one byte
// broken.
type responseGen struct {
	s         *Schema
	rng       *rand.Rand
	tricky    bool // keys twice, and escaped
	malformed bool
	b         *strings.Builder
}

func (g *responseGen) response(op *ast.OperationDefinition) []byte {
	g.b = &strings.Builder{}
	g.space()
	g.object(op.SelectionSet, g.s.rootType(op.Operation), 0)
	g.space()
	out := []byte(g.b.String())
	if g.malformed && len(out) > 0 {
		switch i := g.rng.IntN(len(out)); g.rng.IntN(4) {
		case 0:
			out = out[:i]
		case 1:
			out[i] = "{}[]\",:\\x01 9e-"[g.rng.IntN(15)]
		case 2:
			out = append(out[:i:i], append([]byte("\\u12G4"), out[i:]...)...)
		default:
			out = append(out, '}')
		}
	}
	return out
}

func (g *responseGen) space() {
	if g.rng.IntN(8) == 0 {
		g.b.WriteString([]string{" ", "\n\t", "\r\n  "}[g.rng.IntN(3)])
	}
}

// object writes an object answering set on typ.
func (g *responseGen) object(set ast.SelectionSet, typ *typeInfo, depth int) {
	var members []string
	written := map[string]bool{} // a key selected twice is written once, as gqlgen merges it
	spread := map[*ast.FragmentDefinition]bool{}
	var collect func(set ast.SelectionSet)
	collect = func(set ast.SelectionSet) {
		for _, sel := range set {
			switch sel := sel.(type) {
			case *ast.Field:
				if !written[responseKey(sel)] || g.tricky {
					written[responseKey(sel)] = true
					members = append(members, g.member(sel, typ, depth))
				}
			case *ast.InlineFragment:
				if typ.satisfies(sel.TypeCondition) {
					collect(sel.SelectionSet)
				}
			case *ast.FragmentSpread:
				if def := sel.Definition; def != nil && !spread[def] && typ.satisfies(def.TypeCondition) {
					spread[def] = true // its fields again would be keys written twice
					collect(def.SelectionSet)
				}
			}
		}
	}
	collect(set)
	switch g.rng.IntN(12) {
	case 0:
		g.rng.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
	case 1:
		if g.tricky && len(members) > 0 {
			members = append(members, members[g.rng.IntN(len(members))]) // a key twice
		}
	case 2:
		if len(members) > 0 {
			i := g.rng.IntN(len(members))
			members = append(members[:i], members[i+1:]...)
		}
	case 3:
		members = append(members, `"extra":{"a":[1,2,{"b":"c\"d"}],"e":null}`)
	}
	g.b.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			g.b.WriteByte(',')
		}
		g.space()
		g.b.WriteString(m)
		g.space()
	}
	g.b.WriteByte('}')
}

// member writes the member of f on typ, and returns it.
func (g *responseGen) member(f *ast.Field, typ *typeInfo, depth int) string {
	outer := g.b
	g.b = &strings.Builder{}
	defer func() { g.b = outer }()
	key := responseKey(f)
	if g.tricky && g.rng.IntN(30) == 0 {
		key = strings.Replace(key, key[:1], `\u00`+fmt.Sprintf("%x", key[0]), 1) // the same key, escaped
	}
	fmt.Fprintf(g.b, "%q", key)
	g.b.WriteByte(':')
	g.space()
	fi := typ.fields[f.Name]
	switch {
	case f.Name == "__typename" && g.tricky && g.rng.IntN(3) == 0: // unknown, of another type, escaped, not a string
		g.b.WriteString([]string{`"Nope"`, `"Cell"`, `"Pro\u0064uct"`, `5`, `null`}[g.rng.IntN(5)])
	case f.Name == "__typename":
		g.b.WriteString(`"` + typ.name + `"`)
	case fi == nil: // __type
		g.value(nil, f, 0, depth)
	default:
		g.value(fi, f, fi.listDepth, depth)
	}
	return g.b.String()
}

// value writes a value of fi's type with levels list levels.
func (g *responseGen) value(fi *fieldInfo, f *ast.Field, levels, depth int) {
	switch g.rng.IntN(20) {
	case 0:
		g.b.WriteString("null")
		return
	case 1:
		g.scalar()
		return
	}
	if levels > 0 {
		g.b.WriteByte('[')
		for i := range g.rng.IntN(4) {
			if i > 0 {
				g.b.WriteByte(',')
			}
			g.space()
			g.value(fi, f, levels-1, depth+1)
		}
		g.b.WriteByte(']')
		return
	}
	if fi == nil || len(f.SelectionSet) == 0 || depth > 12 {
		g.scalar()
		return
	}
	typ := fi.typ
	if len(typ.possible) > 0 {
		typ = typ.possible[g.rng.IntN(len(typ.possible))]
	}
	g.object(f.SelectionSet, typ, depth+1)
}

func (g *responseGen) scalar() {
	g.b.WriteString([]string{`"plain"`, `"a \"quoted\" \\ \/ \b\f\n\r\t \u00e9 \ud83d\ude00"`, `123456789012345678901234567890`,
		`-0.5e+300`, `true`, `false`, `0`, `"é"`, `[]`, `{}`, `[[1],{"x":[]}]`}[g.rng.IntN(11)])
}

// Responses at the edges: deep nesting (past the scan's bound and past the
// long reading's), escapes, null items, and bytes that are not JSON.
func TestScanEdgeResponses(t *testing.T) {
	s, err := LoadSDL("schema.graphql", pricecases.SDL)
	if err != nil {
		t.Fatal(err)
	}
	doc, errs := gqlparser.LoadQueryWithRules(s.AST(), `{ grid { x } product(id: "1") { id title variants(first: 2) { id } } }`, nil)
	if errs != nil {
		t.Fatal(errs)
	}
	op := doc.Operations[0]
	plans := NewActualPlans(op)
	nest := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	for _, data := range []string{
		`{"grid":[[{"x":1},null,{"x":2}],null,[]],"product":{"id":"1","title":"a\"\\\u00e9","variants":[null,{"id":"v"}]}}`,
		`{"grid":` + nest(maxScanDepth+10) + `}`,
		`{"product":{"title":` + nest(maxResponseDepth+10) + `}}`,
		`{"product":{"title":"\u12"}}`,
		`{"product":{"title":"a` + "\x01" + `"}}`,
		`{"product":{"variants":[{"id":1e999999},{"id":-0.0e-0}]}}`,
		`{"product":{"variants":[01]}}`,
		`{"product":nul}`,
		`{"product":null} x`,
		`["grid"]`,
		`"grid"`,
		`{"grid":[[]],}`,
		`{"grid"}`,
		`{"grid":[[{"x":1}],]}`,
		"{\"product\":{\"variants\":[{\"id\":\"\xff\xfe\"}]}}",
	} {
		want, wantErr := s.ActualJSON(op, nil, []byte(data))
		got, err := s.ActualJSONShared(plans, nil, []byte(data))
		if got != want || !sameErrorClass(err, wantErr) {
			t.Errorf("%.80s: ActualJSONShared = %d, %v; ActualJSON = %d, %v", data, got, err, want, wantErr)
		}
	}
}

// FuzzScan prices arbitrary bytes as a response both ways: no panic, and
// the same cost and error class.
//
//	go test -run='^$' -fuzz=FuzzScan -fuzztime=1m ./complexity/
func FuzzScan(f *testing.F) {
	s, err := LoadSDL("schema.graphql", pricecases.SDL)
	if err != nil {
		f.Fatal(err)
	}
	var ops []*ast.OperationDefinition
	for _, query := range scanOperations {
		doc, errs := gqlparser.LoadQueryWithRules(s.AST(), query, nil)
		if errs != nil {
			f.Fatal(errs)
		}
		ops = append(ops, doc.Operations[0])
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for i, op := range ops {
		g := responseGen{s: s, rng: rng, tricky: i%2 == 1}
		f.Add(uint8(i), g.response(op))
	}
	vars := map[string]any{"n": int64(2), "v": false}
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		op := ops[int(which)%len(ops)]
		want, wantErr := s.ActualJSON(op, vars, data)
		got, err := s.ActualJSONShared(NewActualPlans(op), vars, data)
		if got != want || !sameErrorClass(err, wantErr) {
			t.Errorf("ActualJSONShared = %d, %v; ActualJSON = %d, %v", got, err, want, wantErr)
		}
	})
}

// plainRun, eight bytes at a time, stops where the byte-by-byte test does.
func TestPlainRun(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	special := []byte{'"', '\\', 0x00, 0x1f, 0x20, 0x21, 0x5b, 0x5d, 0x7f, 0x80, 0xff, 'a'}
	for range 20000 {
		b := make([]byte, rng.IntN(40))
		for i := range b {
			if rng.IntN(4) == 0 {
				b[i] = special[rng.IntN(len(special))]
			} else {
				b[i] = byte(rng.IntN(256))
			}
		}
		start := 0
		if len(b) > 0 {
			start = rng.IntN(len(b))
		}
		want := start
		for want < len(b) && plainByte[b[want]] {
			want++
		}
		if got := plainRun(b, start); got != want {
			t.Fatalf("plainRun(%q, %d) = %d, want %d", b, start, got, want)
		}
	}
}

// Abstract items without __typename, nested: the scan reads each as every
// possible type, which nested twenty deep would be 3^20 readings; it stops
// within its budget of rereads and hands the response to the long reading,
// which prices each (item, type) once.
func TestScanNestedAbstractItems(t *testing.T) {
	s, err := LoadSDL("nested.graphql", `
type Query { n: N }
interface N { id: ID n: N }
type A implements N { id: ID n: N }
type B implements N { id: ID n: N }
type C implements N { id: ID n: N }`)
	if err != nil {
		t.Fatal(err)
	}
	for _, depth := range []int{2, 20} {
		query := strings.Repeat("n { id ", depth) + strings.Repeat("}", depth)
		doc, errs := gqlparser.LoadQueryWithRules(s.AST(), "{ "+query+" }", nil)
		if errs != nil {
			t.Fatal(errs)
		}
		op := doc.Operations[0]
		item := "null"
		for range depth {
			item = `{"id":"x","n":` + item + `}`
		}
		data := []byte(`{"n":` + item + `}`)
		plans := NewActualPlans(op)
		want, err := s.ActualJSON(op, nil, data)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := s.ActualJSONShared(plans, nil, data); got != want || err != nil {
			t.Errorf("depth %d: ActualJSONShared = %d, %v; want %d", depth, got, err, want)
		}
		if _, scanned := s.scanActual(plans, nil, data); scanned != (depth == 2) {
			t.Errorf("depth %d: scanned = %v, want %v", depth, scanned, depth == 2)
		}
	}
}
