package complexity_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/costgate/costgate/complexity"
)

func TestMeasure(t *testing.T) {
	for _, tc := range []struct {
		name, query, op string
		want            complexity.Limits
	}{
		{"one field", `{ a }`, "", complexity.Limits{Depth: 1, Fields: 1}},
		{"nesting", `{ a { b { c } d } }`, "", complexity.Limits{Depth: 3, Fields: 4}},
		{"aliases", `{ x: a y: a { z: b } a }`, "", complexity.Limits{Depth: 2, Aliases: 3, Fields: 4}},
		{
			name:  "fragments expanded where spread",
			query: `{ a { ...F } b { ...F c { ...F } } } fragment F on T { x: f g { h } }`,
			// a, b, c + 3 × (f, g, h); aliases 3 × x; depth b.c.g.h
			want: complexity.Limits{Depth: 4, Aliases: 3, Fields: 12, FragmentDepth: 1},
		},
		{"inline fragments", `{ a { ... on T { b } ... { c { d } } } }`, "", complexity.Limits{Depth: 3, Fields: 4}},
		{"directives ignored", `{ a @skip(if: true) { b } }`, "", complexity.Limits{Depth: 2, Fields: 2}},
		{"unknown fragment counts empty", `{ a { ...Nope } }`, "", complexity.Limits{Depth: 1, Fields: 1}},
		{"named operation", `query A { a } query B { b { c } }`, "B", complexity.Limits{Depth: 2, Fields: 2}},
		{"no name, several operations: the largest of each", `query A { x: a y: a z: a } query B { b { c } }`, "", complexity.Limits{Depth: 2, Aliases: 3, Fields: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := complexity.Measure(mustParse(t, tc.query), tc.op)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("Measure = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestMeasureErrors(t *testing.T) {
	if _, err := complexity.Measure(mustParse(t, `query A { a }`), "B"); !errors.Is(err, complexity.ErrUnknownOperation) {
		t.Errorf("unknown operation: error = %v", err)
	}
	_, err := complexity.Measure(mustParse(t, `{ a { ...A } } fragment A on T { b { ...B } } fragment B on T { ...A }`), "")
	if !errors.Is(err, complexity.ErrFragmentCycle) {
		t.Errorf("cycle: error = %v, want ErrFragmentCycle", err)
	}
}

// TestMeasureIsFastOnRepeatedFields: the document that makes validation quadratic is
// measured in linear time.
func TestMeasureIsFastOnRepeatedFields(t *testing.T) {
	q := "{ " + strings.Repeat("a ", 15000) + "}"
	cpu := startThreadTimer(t) // CPU time: what a busy machine does not inflate
	defer cpu.release()
	got, err := complexity.Measure(mustParse(t, q), "")
	if err != nil || got.Fields != 15000 {
		t.Errorf("Measure = %+v, %v; want 15000 fields", got, err)
	}
	if d := cpu.elapsed(t); d > time.Second {
		t.Errorf("took %v of CPU time", d)
	}
}

func TestMeasureDocument(t *testing.T) {
	for _, tc := range []struct {
		name, query string
		want        complexity.Limits
	}{
		{"one operation", `{ a { b } }`, complexity.Limits{Depth: 2, Fields: 2, Nodes: 3, Visits: 2}},
		{
			name:  "every operation, selected or not: fields and aliases summed, depth the deepest",
			query: `query A { x: a } query B { b { c { d } } y: e }`,
			want:  complexity.Limits{Depth: 3, Aliases: 2, Fields: 5, Nodes: 7, Visits: 5},
		},
		{
			name:  "an unused fragment counts",
			query: `{ __typename } fragment F on T { a: id b: id c { d } }`,
			want:  complexity.Limits{Depth: 2, Aliases: 2, Fields: 5, Nodes: 7, Visits: 5},
		},
		{
			name: "a used fragment counts where it is spread, not once more on its own",
			// a, a.x, b, b.x: F twice; the fragment definition itself is not a root.
			query: `{ a { ...F } b { ...F } } fragment F on T { x }`,
			want:  complexity.Limits{Depth: 2, Fields: 4, FragmentDepth: 1, Nodes: 7, Visits: 6},
		},
		{
			name: "unused fragments spreading one another: counted from the one nothing spreads",
			// G is spread by F: counted inside F (x, and y twice), F a root.
			query: `{ __typename } fragment F on T { x ...G ...G } fragment G on T { y }`,
			want:  complexity.Limits{Depth: 1, Fields: 4, FragmentDepth: 1, Nodes: 8, Visits: 6},
		},
		{
			name:  "fragment depth is the nesting of spreads",
			query: `{ ...A } fragment A on Q { ...B } fragment B on Q { ...C } fragment C on Q { x }`,
			want:  complexity.Limits{Depth: 1, Fields: 1, FragmentDepth: 3, Nodes: 8, Visits: 10},
		},
		{
			name:  "a second definition of a name is a root: no spread finds it",
			query: `{ ...F } fragment F on Q { x } fragment F on Q { y z }`,
			want:  complexity.Limits{Depth: 1, Fields: 3, FragmentDepth: 1, Nodes: 7, Visits: 5},
		},
		{
			name: "visits: each fragment again for every fragment that reaches it",
			// The operation: its ...A, A's ...B, B's two ...C, C's x (C once): 5; then
			// A with what it reaches: 4; B: 3; C: 1.
			query: `{ ...A } fragment A on Q { ...B } fragment B on Q { ...C ...C } fragment C on Q { x }`,
			want:  complexity.Limits{Depth: 1, Fields: 2, FragmentDepth: 3, Nodes: 9, Visits: 13},
		},
		{
			name:  "nodes count arguments, values, list items, directives and variables as written",
			query: `query Q($n: Int = 3) @d { a(x: [1, 2], y: {z: $n}) @skip(if: false) }`,
			// Q, $n, 3, @d, a, x, [ ], 1, 2, y, { }, z's $n, @skip, if, false
			want: complexity.Limits{Depth: 1, Fields: 1, Nodes: 15, Visits: 1},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := complexity.MeasureDocument(mustParse(t, tc.query))
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("MeasureDocument = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestMeasureDocumentCycles: a cycle is refused wherever it is, in a fragment no
// operation reaches included.
func TestMeasureDocumentCycles(t *testing.T) {
	for _, q := range []string{
		`{ ...A } fragment A on Q { ...A }`,
		`{ x } fragment A on Q { ...B } fragment B on Q { ...A }`,
		`{ x } fragment U on Q { y } fragment A on Q { ...U ...B } fragment B on Q { z ...A }`,
	} {
		if _, err := complexity.MeasureDocument(mustParse(t, q)); !errors.Is(err, complexity.ErrFragmentCycle) {
			t.Errorf("%s: error = %v, want ErrFragmentCycle", q, err)
		}
	}
}

// TestMeasureDocumentIsLinear: the fragment bomb (each fragment spreading the next
// twice) and a long chain of fragments are measured in time linear in the document,
// the counts saturating instead of overflowing.
func TestMeasureDocumentIsLinear(t *testing.T) {
	var bomb, chain strings.Builder
	bomb.WriteString("{ ...F0 } ")
	for i := range 60 {
		fmt.Fprintf(&bomb, "fragment F%d on Q { ...F%d ...F%d } ", i, i+1, i+1)
	}
	bomb.WriteString("fragment F60 on Q { x }")
	chain.WriteString("{ ...C0 } ")
	for i := range 5000 {
		fmt.Fprintf(&chain, "fragment C%d on Q { ...C%d } ", i, i+1)
	}
	chain.WriteString("fragment C5000 on Q { x }")
	for name, q := range map[string]string{"bomb": bomb.String(), "chain": chain.String()} {
		doc := mustParse(t, q)
		cpu := startThreadTimer(t)
		got, err := complexity.MeasureDocument(doc)
		d := cpu.elapsed(t)
		cpu.release()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if name == "bomb" && got.Fields != int(complexity.MaxCost) {
			t.Errorf("bomb: fields = %d, want saturated at %d", got.Fields, complexity.MaxCost)
		}
		if name == "chain" && got.FragmentDepth != 5001 {
			t.Errorf("chain: fragment depth = %d, want 5001", got.FragmentDepth)
		}
		if d > time.Second {
			t.Errorf("%s: took %v of CPU time", name, d)
		}
	}
}
