package complexity_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
	"github.com/vektah/gqlparser/v2/validator"

	"github.com/costgate/costgate/complexity"
)

// FuzzAnalyze feeds arbitrary documents (and variables, also used as a response) to
// Measure, Analyze and Actual against the fixed schema: no panic, no hang, and the
// results agree with each other.
//
//	go test -run='^$' -fuzz=FuzzAnalyze -fuzztime=2m ./complexity/
func FuzzAnalyze(f *testing.F) {
	for _, tc := range requestedCases {
		vars, _ := json.Marshal(tc.vars)
		f.Add(tc.query, string(vars))
	}
	f.Add(complexity.FanOutQuery(3), `{}`)
	f.Add(complexity.PathFanOutQuery(3), `{"product":{"a":[{"id":"1"}],"b":null}}`)
	f.Add(`{ a { ...A } } fragment A on T { ...A }`, `null`)
	f.Add(`{ search(term: "x", limit: 2) { __typename ... on Shop { name } } }`, `{"search":[{"__typename":"Shop","name":"s"},{"__typename":"Nope"}]}`)
	f.Add(`query($ids: [ID!], $n: Int) { byIds(ids: $ids) { id } shelf(first: $n) { rows { products { price } } top { products { id } } } }`, `{"ids":["a","b"],"n":3}`)

	schema := testSchema(f)
	schemaAST := loadAST(f)
	f.Fuzz(func(t *testing.T, query, varsJSON string) {
		// A hang would stall the fuzzer silently; crashing the worker records the input.
		watchdog := time.AfterFunc(hangAfter, func() {
			panic(fmt.Sprintf("FuzzAnalyze: no result after %v for %q, %q", hangAfter, query, varsJSON))
		})
		defer watchdog.Stop()

		var vars map[string]any
		_ = json.Unmarshal([]byte(varsJSON), &vars)

		raw, err := parser.ParseQuery(&ast.Source{Input: query})
		if err != nil {
			return
		}
		cpu := startThreadTimer(t) // CPU time: what a busy machine does not inflate
		defer cpu.release()
		limits, measureErr := complexity.Measure(raw, "")
		if limits.Depth < 0 || limits.Aliases < 0 || limits.Fields < 0 {
			t.Fatalf("negative limits %+v", limits)
		}
		// Unvalidated: errors are fine, panics and wrong ranges are not.
		rawRes, rawErr := schema.Analyze(raw, "", vars, complexity.WithBreakdown())
		checkResult(t, rawRes, rawErr)

		doc, err := parser.ParseQuery(&ast.Source{Input: query})
		if err != nil {
			t.Fatalf("second parse failed: %v", err)
		}
		if errs := validator.Validate(schemaAST, doc); len(errs) > 0 {
			return
		}
		if measureErr != nil {
			t.Fatalf("Measure failed on a valid document: %v", measureErr)
		}
		res, err := schema.Analyze(doc, "", vars, complexity.WithBreakdown())
		checkResult(t, res, err)
		// Validation links definitions; the price must not depend on it.
		if (err == nil) != (rawErr == nil) || res.Cost != rawRes.Cost {
			t.Fatalf("validated: %d, %v; unvalidated: %d, %v", res.Cost, err, rawRes.Cost, rawErr)
		}
		if err == nil && res.Limits != limits && len(doc.Operations) == 1 {
			t.Fatalf("Analyze limits %+v, Measure %+v", res.Limits, limits)
		}
		for _, op := range doc.Operations {
			opRes, err := schema.AnalyzeOperation(op, vars)
			if err != nil && !isOperationError(err) {
				t.Fatalf("AnalyzeOperation on a valid document: %v", err)
			}
			// Only the cost variables decide the price: dropping the others changes nothing.
			kept := map[string]any{}
			for _, name := range schema.CostVariables(op) {
				if x, ok := vars[name]; ok {
					kept[name] = x
				}
			}
			if keptRes, keptErr := schema.AnalyzeOperation(op, kept); keptRes.Cost != opRes.Cost || fmt.Sprint(keptErr) != fmt.Sprint(err) {
				t.Fatalf("with only the cost variables %v: %d, %v; with all: %d, %v", kept, keptRes.Cost, keptErr, opRes.Cost, err)
			}
			actual, err := schema.Actual(op, vars, vars)
			if err != nil {
				t.Fatalf("Actual on a valid document: %v", err)
			}
			if actual < 0 || actual > complexity.MaxCost {
				t.Fatalf("actual %d out of range", actual)
			}
			// Streamed, the same response costs the same (a map has no repeated keys).
			raw, _ := json.Marshal(vars)
			if streamed, err := streamActual(schema, op, vars, raw); err != nil || streamed != actual {
				t.Fatalf("streamed %d, %v; Actual %d", streamed, err, actual)
			}
		}
		if d := cpu.elapsed(t); d > 2*time.Second {
			t.Fatalf("took %v of CPU time", d)
		}
	})
}

// hangAfter is far above the milliseconds any input takes, so a loaded machine does not
// trip it.
const hangAfter = 20 * time.Second

func isOperationError(err error) bool {
	_, ok := err.(*complexity.OperationError)
	return ok
}

func checkResult(t *testing.T, res complexity.Result, err error) {
	t.Helper()
	if err != nil {
		return
	}
	if res.Cost < 0 || res.Cost > complexity.MaxCost {
		t.Fatalf("cost %d out of range", res.Cost)
	}
	if len(res.Breakdown) > complexity.MaxBreakdown {
		t.Fatalf("breakdown has %d entries", len(res.Breakdown))
	}
	if res.BreakdownTruncated {
		return
	}
	var roots int64
	for _, e := range res.Breakdown {
		if !strings.Contains(e.Path, ".") {
			roots = min(roots+e.RequestedTotal, complexity.MaxCost)
		}
	}
	if roots != res.Cost {
		t.Fatalf("root entries add to %d, cost is %d: %+v", roots, res.Cost, res.Breakdown)
	}
}
