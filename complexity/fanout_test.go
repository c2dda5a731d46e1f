package complexity_test

import (
	"testing"
	"time"

	"github.com/costgate/costgate/complexity"
)

func TestFanOut(t *testing.T) {
	s := testSchema(t)
	const depth = 30
	doc := parseValid(t, loadAST(t), complexity.FanOutQuery(depth))

	cpu := startThreadTimer(t) // CPU time: what a busy machine does not inflate
	defer cpu.release()
	res, err := s.Analyze(doc, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	// 1e6 × (1 + 2^30 × 100) ≈ 1.07e17 > 2^53-1
	if res.Cost != complexity.MaxCost {
		t.Errorf("cost = %d, want MaxCost %d", res.Cost, complexity.MaxCost)
	}
	// products, nodes, and 2^30 × (variants, id); depth products.nodes.variants.id;
	// the fan-out's 30 fragments and the one they end in, spread one inside another
	want := complexity.Limits{Depth: 4, Aliases: 0, Fields: 2 + 1<<31, FragmentDepth: 31}
	if res.Limits != want {
		t.Errorf("limits = %+v, want %+v", res.Limits, want)
	}
	m, err := complexity.Measure(mustParse(t, complexity.FanOutQuery(depth)), "")
	if err != nil || m != want {
		t.Errorf("Measure = %+v, %v; want %+v", m, err, want)
	}
	// Generous enough for -race; exponential work would take hours.
	if d := cpu.elapsed(t); d > 2*time.Second {
		t.Errorf("took %v of CPU time", d)
	}

	// Below saturation the memo must still give the exact price:
	// depth 5: F0 = 2^5 × 100 = 3200; nodes 1e6 × (1 + 3200); products 1 + that.
	res, err = s.Analyze(parseValid(t, loadAST(t), complexity.FanOutQuery(5)), "", nil)
	if err != nil || res.Cost != 1+1_000_000*3201 {
		t.Errorf("depth 5: cost = %d, %v; want %d", res.Cost, err, 1+1_000_000*3201)
	}
}

func TestMeasureCycleIsAnError(t *testing.T) {
	for _, q := range []string{
		`{ a { ...A } } fragment A on T { ...A }`,
		`{ a { ...A } } fragment A on T { b { ...B } } fragment B on T { c { ...A } }`,
	} {
		_, err := complexity.Measure(mustParse(t, q), "")
		if err == nil {
			t.Errorf("Measure(%q): no error", q)
		}
	}
}
