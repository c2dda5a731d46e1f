package complexity_test

import (
	"encoding/json"
	"testing"

	"github.com/costgate/costgate/internal/pricecases"
)

func TestActual(t *testing.T) {
	s := testSchema(t)
	ast := loadAST(t)
	for _, tc := range pricecases.Actual {
		t.Run(tc.Name, func(t *testing.T) {
			doc := parseValid(t, ast, tc.Query)
			op := doc.Operations[0]
			req, err := s.AnalyzeOperation(op, tc.Vars)
			if err != nil || req.Cost != tc.Requested {
				t.Fatalf("requested = %d, %v; want %d", req.Cost, err, tc.Requested)
			}
			got, err := s.ActualJSON(op, tc.Vars, []byte(tc.Data))
			if err != nil {
				t.Fatalf("ActualJSON: %v", err)
			}
			if got != tc.Want {
				t.Errorf("actual = %d, want %d", got, tc.Want)
			}
			if got, err := streamActual(s, op, tc.Vars, []byte(tc.Data)); err != nil || got != tc.Want {
				t.Errorf("streamed = %d, %v; want %d", got, err, tc.Want)
			}
			var data map[string]any
			if err := json.Unmarshal([]byte(tc.Data), &data); err != nil {
				t.Fatal(err)
			}
			if got, err := s.Actual(op, tc.Vars, data); err != nil || got != tc.Want {
				t.Errorf("Actual = %d, %v; want %d", got, err, tc.Want)
			}
		})
	}
}

func TestActualNullData(t *testing.T) {
	s := testSchema(t)
	op := parseValid(t, loadAST(t), `{ product(id: "1") { id } }`).Operations[0]
	for _, data := range []string{"null", ""} {
		if got, err := s.ActualJSON(op, nil, []byte(data)); err != nil || got != 0 {
			t.Errorf("ActualJSON(%q) = %d, %v; want 0", data, got, err)
		}
		if got, err := streamActual(s, op, nil, []byte(data)); err != nil || got != 0 {
			t.Errorf("streamed %q = %d, %v; want 0", data, got, err)
		}
	}
	if _, err := s.ActualJSON(op, nil, []byte(`{"product":`)); err == nil {
		t.Errorf("ActualJSON on broken JSON: no error")
	}
}

// TestActualFanOut: a response to the fragment bomb is priced once per (fragment,
// response object), not 2^depth times.
func TestActualFanOut(t *testing.T) {
	s := testSchema(t)
	op := parseValid(t, loadAST(t), pricecases.FanOut(30)).Operations[0]
	data := map[string]any{"products": map[string]any{"nodes": []any{
		map[string]any{"variants": []any{map[string]any{"id": "1"}}},
	}}}
	got, err := s.Actual(op, nil, data)
	// Each of the 2^30 leaf copies sees the one variant: 1 + (1 + 2^30 × 1).
	if want := int64(2 + 1<<30); err != nil || got != want {
		t.Errorf("Actual = %d, %v; want %d", got, err, want)
	}
	raw, _ := json.Marshal(data)
	if got, err := streamActual(s, op, nil, raw); err != nil || got != 2+1<<30 {
		t.Errorf("streamed = %d, %v; want %d", got, err, 2+1<<30)
	}
}
