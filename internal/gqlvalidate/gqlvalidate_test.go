package gqlvalidate

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/parser"
	"github.com/vektah/gqlparser/v2/validator"
	"github.com/vektah/gqlparser/v2/validator/core"
	"github.com/vektah/gqlparser/v2/validator/rules"

	"github.com/costgate/costgate/internal/cputime"
)

// testSDL has what the merge rule tells apart: interfaces and a union over
// object types, leaves of different types under one name (size), list and
// non-null wrappers, arguments.
const testSDL = `
type Query {
  node(id: ID): Node
  nodes(first: Int): [Node]
  pet: Pet
  dog: Dog
  cat: Cat
  search(q: String, limit: Int): [Result]
}
interface Node { id: ID! name: String }
interface Pet { name: String owner: Human size(unit: String): Int }
type Dog implements Node & Pet { id: ID! name: String barks: Boolean owner: Human friends(first: Int): [Dog] size(unit: String): Int tag: String }
type Cat implements Node & Pet { id: ID! name: String meows: Boolean owner: Human lives: Int size(unit: String): Int tag: [String] }
type Human implements Node { id: ID! name: String pets(first: Int): [Pet] dog: Dog tag: String }
union Result = Dog | Cat | Human
`

func testSchema(tb testing.TB) *ast.Schema {
	tb.Helper()
	s, err := gqlparser.LoadSchema(&ast.Source{Name: "test.graphql", Input: testSDL})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func parse(tb testing.TB, q string) *ast.QueryDocument {
	tb.Helper()
	doc, err := parser.ParseQuery(&ast.Source{Input: q})
	if err != nil {
		tb.Fatalf("parse %q: %v", q, err)
	}
	return doc
}

func messages(errs gqlerror.List) string {
	var b strings.Builder
	for _, e := range errs {
		b.WriteString(e.Message + "\n")
	}
	return b.String()
}

func TestMergeConflicts(t *testing.T) {
	schema := testSchema(t)
	for _, tc := range []struct {
		name, query string
		want        string // a part of the only error's message; "" for none
	}{
		{"the same field twice", `{ dog { name name } }`, ""},
		{"aliases of one field with the same arguments", `{ dog { a: size(unit: "cm") a: size(unit: "cm") } }`, ""},
		{"different fields under one name", `{ dog { a: name a: tag } }`, `"name" and "tag" are different fields`},
		{"different arguments", `{ dog { size(unit: "cm") size(unit: "in") } }`, "different arguments"},
		{"an argument on one only", `{ dog { size size(unit: "cm") } }`, "different arguments"},
		{"input objects compared in any order", `{ nodes(first: 1) { id } nodes(first: 1) { id } }`, ""},
		{"different types on exclusive objects", `{ pet { ... on Dog { x: tag } ... on Cat { x: tag } } }`, "different types"},
		{"different fields on exclusive objects may merge", `{ pet { ... on Dog { x: barks } ... on Cat { x: meows } } }`, ""},
		{"an interface overlaps every object", `{ pet { x: name ... on Dog { x: tag } } }`, `are different fields`},
		{"a conflict one level down", `{ dog { owner { a: name } owner { a: tag } } }`, `"name" and "tag" are different fields`},
		{"a conflict through fragments", `{ dog { ...A ...B } } fragment A on Dog { x: name } fragment B on Dog { x: tag }`, `"name" and "tag" are different fields`},
		{"a fragment spread twice, no conflict", `{ dog { ...A owner { dog { ...A } } } } fragment A on Dog { name }`, ""},
		{"list against non-list", `{ search { ... on Dog { t: tag } ... on Human { t: tag } } node { ... on Cat { t: tag } } }`, ""},
		{"list against non-list in one selection", `{ search { ... on Dog { t: tag } ... on Cat { t: tag } } }`, "different types"},
		{"exclusivity holds below", `{ pet { ... on Dog { owner { x: name } } ... on Cat { owner { x: tag } } } }`, ""},
		{"shapes must agree on exclusive objects too", `{ pet { ... on Dog { owner { x: id } } ... on Cat { owner { x: name } } } }`, "different types"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := Validate(schema, parse(t, tc.query), Options{})
			switch {
			case tc.want == "" && len(errs) > 0:
				t.Errorf("errors:\n%s", messages(errs))
			case tc.want != "" && (len(errs) != 1 || !strings.Contains(errs[0].Message, tc.want)):
				t.Errorf("errors:\n%swant one containing %q", messages(errs), tc.want)
			case tc.want != "" && len(errs[0].Locations) != 2:
				t.Errorf("locations %v, want both fields", errs[0].Locations)
			}
		})
	}
}

// TestAgreesWithGqlparser: on random documents of fields with colliding
// aliases, arguments, inline fragments and fragments (every one used), the
// document is valid exactly when gqlparser's own rules say so, and has a
// merge conflict exactly when gqlparser's OverlappingFieldsCanBeMerged finds
// one.
func TestAgreesWithGqlparser(t *testing.T) {
	schema := testSchema(t)
	r := rand.New(rand.NewPCG(1, 2))
	conflicts := 0
	for i := range 3000 {
		q := randomDocument(r, schema)
		ours := Validate(schema, parse(t, q), Options{Suggestions: true})
		theirs := validator.ValidateWithRules(schema, parse(t, q), rules.NewDefaultRules())
		if (len(ours) == 0) != (len(theirs) == 0) {
			t.Fatalf("document %d: valid = %v here, %v for gqlparser\n%s\nours:\n%s\ngqlparser's:\n%s", i, len(ours) == 0, len(theirs) == 0, q, messages(ours), messages(theirs))
		}
		merge := func(errs gqlerror.List) bool {
			for _, e := range errs {
				if e.Rule == rules.OverlappingFieldsCanBeMergedRule.Name {
					return true
				}
			}
			return false
		}
		if merge(ours) != merge(theirs) {
			t.Fatalf("document %d: a merge conflict here: %v, for gqlparser: %v\n%s\nours:\n%s\ngqlparser's:\n%s", i, merge(ours), merge(theirs), q, messages(ours), messages(theirs))
		}
		if merge(theirs) {
			conflicts++
		}
	}
	if conflicts < 300 {
		t.Errorf("only %d of 3000 documents had a conflict: the generator tests little", conflicts)
	}
}

// randomDocument writes a query over testSDL: a few root fields, fields of
// each type under aliases drawn from a small set (so that they collide),
// arguments drawn from two values, inline fragments on the possible types
// of interfaces and the union, and fragments that later ones spread (never
// a cycle, each used at least once).
func randomDocument(r *rand.Rand, schema *ast.Schema) string {
	type frag struct {
		name, on, body string
		spreads        []int
	}
	var (
		frags   []frag
		spreads *[]int // where set records the fragments it spreads
	)
	var set func(typ *ast.Definition, depth int) string
	field := func(typ *ast.Definition, depth int) string {
		var candidates []*ast.FieldDefinition
		for _, f := range typ.Fields {
			if !strings.HasPrefix(f.Name, "__") {
				candidates = append(candidates, f)
			}
		}
		f := candidates[r.IntN(len(candidates))]
		var b strings.Builder
		if r.IntN(3) == 0 {
			b.WriteString([]string{"a", "b", "name", "tag"}[r.IntN(4)] + ": ")
		}
		b.WriteString(f.Name)
		if len(f.Arguments) > 0 && r.IntN(2) == 0 {
			arg := f.Arguments[r.IntN(len(f.Arguments))]
			val := map[string][]string{"ID": {`"1"`, `"2"`}, "Int": {"1", "2"}, "String": {`"cm"`, `"in"`}}[arg.Type.Name()]
			fmt.Fprintf(&b, "(%s: %s)", arg.Name, val[r.IntN(2)])
		}
		if inner := schema.Types[f.Type.Name()]; inner.IsCompositeType() {
			if depth >= 3 {
				b.WriteString(" { __typename }")
			} else {
				b.WriteString(" " + set(inner, depth+1))
			}
		}
		return b.String()
	}
	set = func(typ *ast.Definition, depth int) string {
		var parts []string
		for range 1 + r.IntN(4) {
			switch k := r.IntN(6); {
			case k < 3 && len(typ.Fields) > 0 && typ.Kind != ast.Union:
				parts = append(parts, field(typ, depth))
			case k < 5:
				possible := schema.GetPossibleTypes(typ)
				on := possible[r.IntN(len(possible))]
				if depth >= 3 {
					continue
				}
				parts = append(parts, "... on "+on.Name+" "+set(on, depth+1))
			default: // a fragment defined so far, on a type that can be here
				var fit []int
				for i, f := range frags {
					for _, p := range schema.GetPossibleTypes(typ) {
						if p.Name == f.on || f.on == typ.Name {
							fit = append(fit, i)
							break
						}
					}
				}
				if len(fit) > 0 {
					i := fit[r.IntN(len(fit))]
					*spreads = append(*spreads, i)
					parts = append(parts, "..."+frags[i].name)
				}
			}
		}
		if len(parts) == 0 {
			parts = append(parts, "__typename")
		}
		return "{ " + strings.Join(parts, " ") + " }"
	}
	// Fragments first, each spreading only earlier ones: no cycle.
	for i := range r.IntN(4) {
		on := []string{"Dog", "Cat", "Human", "Pet", "Node"}[r.IntN(5)]
		f := frag{name: fmt.Sprintf("F%d", i), on: on}
		spreads = &f.spreads
		f.body = set(schema.Types[on], 1)
		frags = append(frags, f)
	}
	var roots []int
	spreads = &roots
	query := set(schema.Query, 0)
	// Define the fragments the query reaches, and no other.
	reached := map[int]bool{}
	var reach func(i int)
	reach = func(i int) {
		if !reached[i] {
			reached[i] = true
			for _, j := range frags[i].spreads {
				reach(j)
			}
		}
	}
	for _, i := range roots {
		reach(i)
	}
	var b strings.Builder
	b.WriteString(query)
	for i, f := range frags {
		if reached[i] {
			fmt.Fprintf(&b, "\nfragment %s on %s %s", f.name, f.on, f.body)
		}
	}
	return b.String()
}

// TestErrorBomb: the bomb (1,000 and 2,000 conflicting pairs in an
// unused fragment) answers at most 100 errors and the one that says
// validation stopped, in well under 1 MiB, fast.
func TestErrorBomb(t *testing.T) {
	schema := testSchema(t)
	for _, pairs := range []int{1000, 2000} {
		var b strings.Builder
		b.WriteString("{ __typename } fragment F on Dog { ")
		for i := range pairs {
			if i%2 == 0 {
				b.WriteString("a: name ")
			} else {
				b.WriteString("a: tag ")
			}
		}
		b.WriteString("}")
		doc := parse(t, b.String())
		timer := cputime.Start(t)
		errs := Validate(schema, doc, Options{Suggestions: true})
		d := timer.Elapsed(t)
		timer.Release()
		if len(errs) > MaxErrors+1 {
			t.Errorf("%d pairs: %d errors, want at most %d", pairs, len(errs), MaxErrors+1)
		}
		body, _ := json.Marshal(errs)
		if len(body) > 1<<20 {
			t.Errorf("%d pairs: the errors take %d bytes", pairs, len(body))
		}
		if d > 200*time.Millisecond {
			t.Errorf("%d pairs: %v of CPU time", pairs, d)
		}
	}
}

// TestMaxErrors: past 100 errors, validation stops with one more saying so.
func TestMaxErrors(t *testing.T) {
	schema := testSchema(t)
	q := "{ dog { " + strings.Repeat("nope ", 500) + "} }"
	errs := Validate(schema, parse(t, q), Options{})
	if len(errs) != MaxErrors+1 || errs[MaxErrors].Message != TooManyErrors {
		t.Fatalf("%d errors, the last %q; want %d and then %q", len(errs), errs[len(errs)-1].Message, MaxErrors, TooManyErrors)
	}
	if errs := Validate(schema, parse(t, "{ dog { "+strings.Repeat("nope ", MaxErrors)+"} }"), Options{}); len(errs) != MaxErrors {
		t.Errorf("exactly %d errors: got %d", MaxErrors, len(errs))
	}
}

// TestSuggestions: "Did you mean" names schema names only when asked, and
// only for short names.
func TestSuggestions(t *testing.T) {
	schema := testSchema(t)
	for _, q := range []string{
		`{ dog { nam } }`,                            // a field
		`{ dog { size(unti: "cm") } }`,               // an argument
		`{ dog { ...F } } fragment F on Do { name }`, // a type
		`{ dog { owner } }`,                          // a leaf expected: "owner { ... }"
	} {
		with := messages(Validate(schema, parse(t, q), Options{Suggestions: true}))
		without := messages(Validate(schema, parse(t, q), Options{}))
		if !strings.Contains(with, "Did you mean") {
			t.Errorf("%s with suggestions: %s", q, with)
		}
		if strings.Contains(without, "Did you mean") || without == "" {
			t.Errorf("%s without suggestions: %q", q, without)
		}
	}
	long := `{ dog { ` + strings.Repeat("n", maxSuggestedName+1) + ` } }`
	if m := messages(Validate(schema, parse(t, long), Options{Suggestions: true})); strings.Contains(m, "Did you mean") {
		t.Errorf("a long name got a suggestion: %s", m)
	}
	// Past suggestedErrors errors, the document is validated without them.
	many := "{ dog { " + strings.Repeat("nam ", suggestedErrors+1) + "} }"
	errs := Validate(schema, parse(t, many), Options{Suggestions: true})
	if len(errs) != suggestedErrors+1 || strings.Contains(messages(errs), "Did you mean") {
		t.Errorf("%d errors:\n%s", len(errs), messages(errs))
	}
}

// TestBound: a megabyte-long name is echoed in a message of at most
// MaxMessageBytes.
func TestBound(t *testing.T) {
	schema := testSchema(t)
	name := strings.Repeat("x", 1<<20)
	errs := Validate(schema, parse(t, "{ dog { "+name+" } }"), Options{Suggestions: true})
	if len(errs) != 1 || len(errs[0].Message) > MaxMessageBytes || !strings.HasSuffix(errs[0].Message, "…") {
		t.Fatalf("%d errors, the first %d bytes long", len(errs), len(errs[0].Message))
	}
	e := &gqlerror.Error{Message: strings.Repeat("é", 1000)}
	if m := Bound(e).Message; len(m) > MaxMessageBytes || !strings.HasSuffix(m, "…") || !utf8Valid(m) {
		t.Errorf("bounded message %d bytes, valid UTF-8 %v", len(m), utf8Valid(m))
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

// TestCycles: a cycle of spreads is reported once per spread that closes it,
// wherever it is, in one pass.
func TestCycles(t *testing.T) {
	schema := testSchema(t)
	errs := Validate(schema, parse(t, `{ dog { ...A } } fragment A on Dog { ...B } fragment B on Dog { name ...A }`), Options{})
	n := 0
	for _, e := range errs {
		if e.Rule == "NoFragmentCycles" {
			n++
			if !strings.Contains(e.Message, `"A"`) || !strings.Contains(e.Message, `"B"`) {
				t.Errorf("message %q does not name the cycle", e.Message)
			}
		}
	}
	if n != 1 {
		t.Errorf("%d cycle errors:\n%s", n, messages(errs))
	}
}

// walkWork counts what the walk visits (fields, spreads, inline fragments,
// values) while the rules run, and the CPU time of validating the document
// reps times (enough to rise well above the clock's resolution).
func walkWork(tb testing.TB, schema *ast.Schema, q string, reps int) (visits int, cpu time.Duration) {
	doc := parse(tb, q)
	counter := core.Rule{Name: "~count", RuleFunc: func(o *core.Events, _ core.AddErrFunc) {
		o.OnField(func(*core.Walker, *ast.Field) { visits++ })
		o.OnFragmentSpread(func(*core.Walker, *ast.FragmentSpread) { visits++ })
		o.OnInlineFragment(func(*core.Walker, *ast.InlineFragment) { visits++ })
		o.OnValue(func(*core.Walker, *ast.Value) { visits++ })
	}}
	run(schema, doc, append(ruleSet(false), counter), MaxErrors)
	set := ruleSet(false)
	runtime.GC() // the garbage of the runs before is not this one's
	timer := cputime.Start(tb)
	defer timer.Release()
	for range reps {
		run(schema, doc, set, MaxErrors)
	}
	return visits, timer.Elapsed(tb)
}

// TestLinearTime: for each family of documents that makes validation work
// hard (the merge rule's same-name fields and interfaces over objects, chains
// of fragments as deep as callers allow them, one fragment spread in many
// places, unused fragments, long lists of values), a document 4 times the
// size, still within the default limits (15,000 tokens), costs about 4 times
// the work: the walk's visits, counted exactly, and the CPU time (the least
// of three runs), where a quadratic validation costs 16 times.
func TestLinearTime(t *testing.T) {
	schema := testSchema(t)
	families := map[string]func(n int) string{
		"same name, same field": func(n int) string {
			return "{ dog { " + strings.Repeat("name ", n) + "} }"
		},
		"same name, conflicting": func(n int) string {
			return "{ dog { " + strings.Repeat("a: name a: tag ", n/2) + "} }"
		},
		"same name with selections": func(n int) string {
			return "{ " + strings.Repeat("dog { owner { id } } ", n/8) + "}"
		},
		"interfaces joining objects, nested": func(n int) string {
			return "{ " + strings.Repeat("pet { ... on Dog { owner { id } } ... on Cat { owner { name } } owner { pets { name } } } ", n/32) + "}"
		},
		"fragment chains 15 deep": func(n int) string {
			var b strings.Builder
			b.WriteString("{ dog { ")
			chains := max(n/96, 1)
			for c := range chains {
				fmt.Fprintf(&b, "...C%d_0 ", c)
			}
			b.WriteString("} } ")
			for c := range chains {
				for i := range 15 {
					fmt.Fprintf(&b, "fragment C%d_%d on Dog { ...C%d_%d } ", c, i, c, i+1)
				}
				fmt.Fprintf(&b, "fragment C%d_15 on Dog { name }\n", c)
			}
			return b.String()
		},
		"one fragment spread everywhere": func(n int) string {
			return "{ " + strings.Repeat("dog { ...F owner { dog { ...F } } } ", n/16) + "} fragment F on Dog { name tag owner { id } }"
		},
		"unused fragments": func(n int) string {
			var b strings.Builder
			b.WriteString("{ __typename } ")
			for i := range n / 12 {
				fmt.Fprintf(&b, "fragment U%d on Dog { a: name a: tag } ", i)
			}
			return b.String()
		},
		"arguments and list values": func(n int) string {
			return `{ dog { size(unit: [` + strings.Repeat(`"x", `, n) + `]) } }`
		},
	}
	const n, reps = 3000, 60
	for name, family := range families {
		t.Run(name, func(t *testing.T) {
			for _, q := range []string{family(n / 4), family(n)} {
				if _, err := parser.ParseQueryWithTokenLimit(&ast.Source{Input: q}, 15000); err != nil {
					t.Fatalf("not within the limits: %v", err)
				}
			}
			least := func(q string) (int, time.Duration) {
				var visits int
				best := time.Duration(1 << 62)
				for range 3 {
					v, d := walkWork(t, schema, q, reps)
					visits, best = v, min(best, d)
				}
				return visits, best
			}
			v1, d1 := least(family(n / 4))
			v4, d4 := least(family(n))
			if v4 > 5*v1+100 {
				t.Errorf("visits: %d at size n, %d at 4n (%.1fx)", v1, v4, float64(v4)/float64(v1))
			}
			if d1 >= 5*time.Millisecond && d4 > 8*d1 {
				t.Errorf("CPU time: %v at size n, %v at 4n (%.1fx)", d1, d4, float64(d4)/float64(d1))
			}
			t.Logf("visits %d → %d, CPU %v → %v (%d validations)", v1, v4, d1, d4, reps)
		})
	}
}
