package gqlproxy_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/costgate/costgate/limiter/gqllimit"
)

// A client alias that could pass for the type of an abstract item, or for
// costgate's own typename, is refused before anything is forwarded or
// charged. Before, `__typename: body` on a Review made the reply price the
// item as the Product its body named.
func TestProxyRefusesTypenameAliases(t *testing.T) {
	up := startUpstream(t)
	e := newProxyEnv(t, up.URL)
	before := e.available(t)
	for _, q := range []string{
		`{ search(text: "a") { ... on Review { __typename: body product { variants(first: 5) { id } } } } }`,
		`{ search(text: "a") { ...R } } fragment R on Review { __typename: body }`,
		`{ search(text: "a") { ... on Product { id __costgate_typename: title } } }`,
		`{ products(first: 1) { nodes { __costgateX: id } } }`,
	} {
		r := e.post(t, q, nil, nil)
		if r.Status != http.StatusBadRequest || r.Code() != gqllimit.CodeBadRequest {
			t.Errorf("%s: %d %s, want 400 %s", q, r.Status, r.Body, gqllimit.CodeBadRequest)
		}
	}
	if up.calls.Load() != 0 {
		t.Errorf("the upstream got %d calls", up.calls.Load())
	}
	if got := e.available(t); got != before {
		t.Errorf("charged %d", before-got)
	}
	// Aliasing __typename itself is the client's business, and so is an
	// alias named __typename in the selection of an object.
	for _, q := range []string{
		`{ search(text: "lamp", first: 2) { t: __typename } }`,
		`{ products(first: 1) { nodes { __typename: title } } }`,
	} {
		if r := e.post(t, q, nil, nil); r.Status != http.StatusOK || len(r.Res.Errors) > 0 {
			t.Errorf("%s: %d %s", q, r.Status, r.Body)
		}
	}
}

// The proxy forwards the client's text with its __typename written into the
// abstract selections, and moves the upstream's error locations back: an
// error the upstream locates after an insertion on the same line points at
// the same token of the client's document.
func TestProxyErrorLocationsPointIntoTheClientsDocument(t *testing.T) {
	var forwarded atomic.Value
	locating := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p struct{ Query string }
		json.NewDecoder(r.Body).Decode(&p)
		forwarded.Store(p.Query)
		line, column := locate(p.Query, "product(id")
		fmt.Fprintf(w, `{"data":{"search":[],"product":null},"errors":[{"message":"boom","locations":[{"line":%d,"column":%d}],"path":["product"]}]}`, line, column)
	}))
	t.Cleanup(locating.Close)
	e := newProxyEnv(t, locating.URL)
	for _, q := range []string{
		`{ search(text: "é") { ... on Product { id } } product(id: "p1") { id } }`,
		"query Q {\n  search(text: \"x\") { ...F }\n  # a comment {\n  s2: search(text: \"y\") { __typename } product(id: \"p1\") { id }\n}\nfragment F on SearchResult { ... on Review { id } }",
	} {
		r := e.post(t, q, nil, nil)
		if r.Status != http.StatusOK {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		fwd := forwarded.Load().(string)
		if got, want := strings.ReplaceAll(fwd, " __costgate_typename: __typename ", ""), q; got != want {
			t.Errorf("forwarded %q, want the client's text with the typenames inserted", fwd)
		}
		var res struct {
			Errors []struct {
				Locations []struct{ Line, Column int } `json:"locations"`
			} `json:"errors"`
		}
		if err := json.Unmarshal([]byte(r.Body), &res); err != nil || len(res.Errors) != 1 || len(res.Errors[0].Locations) != 1 {
			t.Fatalf("%s: %v", r.Body, err)
		}
		line, column := locate(q, "product(id")
		if got := res.Errors[0].Locations[0]; got.Line != line || got.Column != column {
			t.Errorf("%q: location %d:%d, want %d:%d, where the client wrote product(id", q, got.Line, got.Column, line, column)
		}
	}
}

// locate is the line and column (1-based, in runes) of the first s in text.
func locate(text, s string) (int, int) {
	i := strings.Index(text, s)
	before := text[:i]
	line := strings.Count(before, "\n") + 1
	return line, utf8.RuneCountInString(before[strings.LastIndex(before, "\n")+1:]) + 1
}
