package gqllimit_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/costgate/costgate/limiter/gqllimit"
)

// GitHub's rateLimit(dryRun: true): data.rateLimit holds the price the same
// query costs for real and the budget as it stands; nothing is charged and
// no other root field is resolved. With Costgate-Dry-Run: 1 the answer is
// data null and extensions.cost, as for any query.
func TestDryRunField(t *testing.T) {
	const q = `query($dry: Boolean!) {
  rateLimit(dryRun: $dry) { cost limit remaining resetAt used __typename }
  products(first: 10) { nodes { id variants(first: 5) { id } } }
  ... on Query { search(text: "lamp", first: 3) { __typename } }
}`
	e := newEnv(t, envOpts{})
	before := e.available(t)
	resolved := e.resolved.snapshot()

	r := e.post(t, q, map[string]any{"dry": true}, nil)
	if r.Status != 200 || len(r.Res.Errors) > 0 {
		t.Fatalf("dry run: %d %s", r.Status, r.Body)
	}
	var data map[string]json.RawMessage
	if err := json.Unmarshal(r.Res.Data, &data); err != nil {
		t.Fatal(err)
	}
	if len(data) != 1 || data["rateLimit"] == nil {
		t.Fatalf("data %s, want rateLimit alone", r.Res.Data)
	}
	var rl struct {
		Cost, Limit, Remaining, Used int64
		ResetAt                      time.Time
		Typename                     string `json:"__typename"`
	}
	if err := json.Unmarshal(data["rateLimit"], &rl); err != nil {
		t.Fatal(err)
	}
	c := r.Cost(t)
	if rl.Cost != c.RequestedQueryCost || rl.Cost != price(t, q, map[string]any{"dry": true}) || c.ActualQueryCost != nil {
		t.Errorf("rateLimit.cost %d, extensions.cost %+v, want the price", rl.Cost, c)
	}
	if rl.Limit != e.policy.Capacity() || rl.Remaining != before || rl.Used != rl.Limit-rl.Remaining || rl.Typename != "RateLimit" {
		t.Errorf("rateLimit %+v, want limit %d, remaining %d (nothing charged)", rl, e.policy.Capacity(), before)
	}
	if d := e.clock.Now().Sub(rl.ResetAt); d < 0 || d >= time.Second {
		t.Errorf("resetAt %s, want now %s to the second (the bucket is full)", rl.ResetAt, e.clock.Now())
	}
	if got := e.available(t); got != before {
		t.Errorf("the dry run charged %d", before-got)
	}
	for _, field := range []string{"products", "search"} {
		if e.resolved.get(field) != resolved[field] {
			t.Errorf("the dry run resolved %s", field)
		}
	}

	// The same query for real costs what the dry run said, and runs.
	real := e.post(t, q, map[string]any{"dry": false}, nil)
	if real.Status != 200 || real.Cost(t).RequestedQueryCost != rl.Cost || e.resolved.get("products") != resolved["products"]+1 {
		t.Fatalf("for real: %d %s", real.Status, real.Body)
	}
	var ran struct {
		RateLimit struct{ Cost, Remaining int64 }
	}
	if err := json.Unmarshal(real.Res.Data, &ran); err != nil || ran.RateLimit.Cost != rl.Cost || ran.RateLimit.Remaining != before-rl.Cost {
		t.Errorf("rateLimit for real %+v (%v), want cost %d and the bucket after the charge", ran.RateLimit, err, rl.Cost)
	}

	// The header keeps its meaning: data null, extensions.cost.
	hdr := e.post(t, q, map[string]any{"dry": true}, map[string]string{gqllimit.HeaderDryRun: "1"})
	if hdr.Status != 200 || string(hdr.Res.Data) != "null" || len(hdr.Res.Errors) > 0 || hdr.Cost(t).RequestedQueryCost != rl.Cost {
		t.Errorf("header dry run: %d %s", hdr.Status, hdr.Body)
	}
}

// A skipped rateLimit(dryRun: true) asks for no dry run.
func TestDryRunFieldSkipped(t *testing.T) {
	e := newEnv(t, envOpts{})
	before := e.available(t)
	q := `query($skip: Boolean!) { rateLimit(dryRun: true) @skip(if: $skip) { cost } products(first: 2) { nodes { id } } }`
	r := e.post(t, q, map[string]any{"skip": true}, nil)
	if r.Status != 200 || r.Cost(t).ActualQueryCost == nil {
		t.Fatalf("skipped dry run: %d %s", r.Status, r.Body)
	}
	if got, want := e.available(t), before-*r.Cost(t).ActualQueryCost; got != want {
		t.Errorf("bucket %d, want %d: charged, the unused part refunded", got, want)
	}
	if e.resolved.get("products") != 1 {
		t.Errorf("products not resolved: the skipped field made a dry run")
	}
}

// A dry run asked for by the header still gets the rejections that come
// before pricing and charging: they are not hidden as an empty dry run.
func TestDryRunHeaderKeepsRejections(t *testing.T) {
	e := newEnv(t, envOpts{cfg: func(c *gqllimit.Config) { c.NoIntrospection = true }})
	dry := map[string]string{gqllimit.HeaderDryRun: "1"}
	for _, tc := range []struct{ query, code string }{
		{`{ products { nope } }`, gqllimit.CodeValidationFailed},
		{`{ __schema { queryType { name } } }`, gqllimit.CodeIntrospectionDisabled},
		{`{ products(first: null) { nodes { id } } }`, gqllimit.CodeSlicingArgumentRequired},
	} {
		if r := e.post(t, tc.query, nil, dry); r.Status != 400 || r.Code() != tc.code {
			t.Errorf("%s with %s: %d %s, want %s", tc.query, gqllimit.HeaderDryRun, r.Status, r.Body, tc.code)
		}
	}
}
