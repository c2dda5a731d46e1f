package complexity_test

import (
	"errors"
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
			want: complexity.Limits{Depth: 4, Aliases: 3, Fields: 12},
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
