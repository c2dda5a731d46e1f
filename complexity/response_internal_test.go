package complexity

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"
)

// tree turns node n back into the shape encoding/json decodes (numbers and booleans
// as the marker "scalar"; later duplicate keys win, as with encoding/json).
func (r *response) tree(n int32) any {
	switch r.kind(n) {
	case rNull:
		return nil
	case rString:
		text, _ := r.text(n)
		return validUTF8(text)
	case rScalar:
		return "scalar"
	case rArray:
		out := []any{}
		for _, m := range r.items(n) {
			out = append(out, r.tree(m.node))
		}
		return out
	}
	out := map[string]any{}
	node := r.nodes[n]
	for _, m := range r.members[node.first : node.first+node.count] {
		out[validUTF8(r.bytes(m.key))] = r.tree(m.node)
	}
	return out
}

// validUTF8 replaces invalid UTF-8 as encoding/json does: a round trip through it.
func validUTF8(b []byte) string {
	var s string
	q, _ := json.Marshal(string(b))
	json.Unmarshal(q, &s)
	return s
}

func scalars(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = scalars(e)
		}
	case []any:
		for i, e := range x {
			x[i] = scalars(e)
		}
	case float64, bool:
		return "scalar"
	}
	return v
}

// checkResponse parses data and compares the result with encoding/json's.
func checkResponse(t testing.TB, data []byte) {
	t.Helper()
	r := getResponse()
	defer putResponse(r)
	root, err := r.parse(data)
	if valid := json.Valid(data); (err == nil) != valid {
		t.Fatalf("parse(%q): %v; json.Valid: %v", data, err, valid)
	}
	var want any
	if err != nil || json.Unmarshal(data, &want) != nil { // a number out of float64's range
		return
	}
	if got := r.tree(root); !reflect.DeepEqual(got, scalars(want)) {
		t.Fatalf("parse(%q) = %#v, want %#v", data, got, scalars(want))
	}
}

func TestResponseParse(t *testing.T) {
	wide := make([]string, 100)
	for i := range wide {
		wide[i] = fmt.Sprintf(`"k%d":%d`, i, i)
	}
	for _, data := range []string{
		`{}`, `[]`, `null`, `"x"`, `0`, `-1.5e+3`, `true`, ` { "a" : [ 1 , null , "b" , { } ] } `,
		`{"a\u0062":"c\"d","e":"\\"}`, `{"é":"ü"}`, `{"a":1,"a":2}`,
		`{` + strings.Join(wide, ",") + `}`,
		`{"a":[[[[[]]]]]}`,
		// Broken ones: every one is an error, never a panic.
		``, `{`, `}`, `{"a"}`, `{"a":}`, `{"a":1,}`, `[1,]`, `[1 2]`, `{"a":1 "b":2}`, `01`, `-`, `1.`, `1e`, `.5`,
		`"abc`, `"a\"`, "\"a\x01\"", `"\x"`, `{1:2}`, `nul`, `tru`, `{"a":1}x`, `[`, `"\u12"`,
	} {
		checkResponse(t, []byte(data))
	}
}

func TestResponseDepthLimit(t *testing.T) {
	deep := strings.Repeat("[", maxResponseDepth+1) + strings.Repeat("]", maxResponseDepth+1)
	r := getResponse()
	defer putResponse(r)
	if _, err := r.parse([]byte(deep)); err == nil {
		t.Errorf("%d nested arrays: no error", maxResponseDepth+1)
	}
	ok := strings.Repeat("[", maxResponseDepth) + strings.Repeat("]", maxResponseDepth)
	if _, err := r.parse([]byte(ok)); err != nil {
		t.Errorf("%d nested arrays: %v", maxResponseDepth, err)
	}
}

// Lookups find every key, in any order, in small objects (scanned from the last match)
// and wide ones (through an index).
func TestResponseGet(t *testing.T) {
	for _, width := range []int{1, 5, indexedObjects, indexedObjects + 1, 200} {
		t.Run(fmt.Sprint(width), func(t *testing.T) {
			parts := make([]string, width)
			for i := range parts {
				parts[i] = fmt.Sprintf(`"k%d":"v%d"`, i, i)
			}
			r := getResponse()
			defer putResponse(r)
			root, err := r.parse([]byte("{" + strings.Join(parts, ",") + "}"))
			if err != nil {
				t.Fatal(err)
			}
			for _, i := range []int{width - 1, 0, width / 2, width - 1, 0} {
				n, ok := r.get(root, fmt.Sprintf("k%d", i))
				if got, _ := r.text(n); !ok || string(got) != fmt.Sprintf("v%d", i) {
					t.Errorf("k%d: %q, %v", i, got, ok)
				}
			}
			if _, ok := r.get(root, "missing"); ok {
				t.Errorf("found a missing key")
			}
		})
	}
}

func FuzzResponseParse(f *testing.F) {
	for _, seed := range []string{`{"a":[1,{"b":null}],"c":"d\u0065"}`, `[[]]`, `{"a":`, `"\\"`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkResponse(t, data)
	})
}

// Pricing a response reuses the pool's slices: nothing is allocated per object.
// The bound holds for a response kept from call to call (as the pool keeps it);
// through ActualJSON and the pool it is checked only without the race detector,
// under which sync.Pool drops a quarter of what is put back, at random, on
// purpose, so a call may start from empty slices whatever the code does.
func TestActualJSONAllocations(t *testing.T) {
	s, err := LoadSDL("shop.graphql", `
type Query { items(first: Int): [Item!]! @listSize(slicingArguments: ["first"]) }
type Item { id: ID! tags: [Tag!]! }
type Tag { name: String! }`)
	if err != nil {
		t.Fatal(err)
	}
	doc := mustParseValid(t, s, `{ items(first: 100) { id tags { name } } }`)
	items := make([]string, 100)
	for i := range items {
		items[i] = fmt.Sprintf(`{"id":"%d","tags":[{"name":"a"},{"name":"b"}]}`, i)
	}
	data := []byte(`{"items":[` + strings.Join(items, ",") + `]}`)
	op := doc.Operations[0]
	if got, err := s.ActualJSON(op, nil, data); err != nil || got != 300 {
		t.Fatalf("ActualJSON = %d, %v; want 100 × (1 + 2)", got, err)
	}
	root, err := s.actualRoot(op)
	if err != nil {
		t.Fatal(err)
	}
	r := new(response)
	held := func() {
		n, err := r.parse(data)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := s.actual(op, root, nil, r, n, nil); err != nil || got != 300 {
			t.Fatalf("actual = %d, %v; want 300", got, err)
		}
		// what putResponse does before it puts r back
		r.src, r.index = nil, nil
		r.decoded, r.nodes, r.members, r.stack = r.decoded[:0], r.nodes[:0], r.members[:0], r.stack[:0]
	}
	held() // grows the slices once
	// 300 objects: a map per object would be hundreds of allocations.
	if allocs := testing.AllocsPerRun(50, held); allocs > 10 {
		t.Errorf("pricing with a kept response allocates %.0f times for 300 objects, want at most 10", allocs)
	}
	if raceEnabled {
		return // the pool drops responses at random under the race detector
	}
	if allocs := testing.AllocsPerRun(50, func() { s.ActualJSON(op, nil, data) }); allocs > 10 {
		t.Errorf("ActualJSON allocates %.0f times for 300 objects, want at most 10", allocs)
	}
}

func mustParseValid(t *testing.T, s *Schema, query string) *ast.QueryDocument {
	t.Helper()
	doc, err := gqlparser.LoadQueryWithRules(s.AST(), query, nil)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// BenchmarkActualJSON prices a response of 300 objects: read into nodes
// (ActualJSON), scanned with plans kept for the operation
// (ActualJSONShared); encoding/json's decoding of the same data into maps
// (what ActualJSON did before) is the reference.
//
//	go test -run='^$' -bench=ActualJSON -benchmem ./complexity/
func BenchmarkActualJSON(b *testing.B) {
	s, err := LoadSDL("shop.graphql", `
type Query { items(first: Int): [Item!]! @listSize(slicingArguments: ["first"]) }
type Item { id: ID! name: String! tags: [Tag!]! }
type Tag { name: String! }`)
	if err != nil {
		b.Fatal(err)
	}
	doc, errs := gqlparser.LoadQueryWithRules(s.AST(), `{ items(first: 100) { id name tags { name } } }`, nil)
	if errs != nil {
		b.Fatal(errs)
	}
	items := make([]string, 100)
	for i := range items {
		items[i] = fmt.Sprintf(`{"id":"item-%d","name":"Item number %d","tags":[{"name":"a"},{"name":"b"}]}`, i, i)
	}
	data := []byte(`{"items":[` + strings.Join(items, ",") + `]}`)
	op := doc.Operations[0]
	b.Run("ActualJSON", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.ActualJSON(op, nil, data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ActualJSONShared", func(b *testing.B) {
		plans := NewActualPlans(op)
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.ActualJSONShared(plans, nil, data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json-maps", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			var m map[string]any
			if err := json.Unmarshal(data, &m); err != nil {
				b.Fatal(err)
			}
		}
	})
}
