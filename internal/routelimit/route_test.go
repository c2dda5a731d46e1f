package routelimit_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/costgate/costgate/internal/routelimit"
	"github.com/costgate/costgate/limiter"
)

func TestParseRoute(t *testing.T) {
	for _, tc := range []struct {
		pattern      string
		method, path string
		prefix       bool
		hits         []string // "METHOD /path" requests it matches
		miss         []string
	}{
		{"POST /login", "POST", "/login", false,
			[]string{"POST /login", "POST /login/"}, []string{"GET /login", "POST /login/x"}},
		{"/api/*", "", "/api/", true,
			[]string{"GET /api/", "GET /api", "DELETE /api/products/7"}, []string{"GET /apis"}},
		{"GET /*", "GET", "/", true,
			[]string{"GET /", "GET /anything"}, []string{"POST /"}},
		{"  PATCH   /a/b/  ", "PATCH", "/a/b/", false,
			[]string{"PATCH /a/b/", "PATCH /a/b"}, []string{"PATCH /a/b/c"}},
	} {
		t.Run(tc.pattern, func(t *testing.T) {
			method, path, prefix, err := routelimit.ParseRoute(tc.pattern)
			if err != nil {
				t.Fatalf("ParseRoute error: %v", err)
			}
			if method != tc.method || path != tc.path || prefix != tc.prefix {
				t.Errorf("ParseRoute(%q) = %q %q %v, want %q %q %v", tc.pattern, method, path, prefix, tc.method, tc.path, tc.prefix)
			}
			for _, req := range tc.hits {
				m, p, _ := strings.Cut(req, " ")
				if !routelimit.Matches(tc.pattern, m, p) {
					t.Errorf("%q does not match %s, want it to", tc.pattern, req)
				}
			}
			for _, req := range tc.miss {
				m, p, _ := strings.Cut(req, " ")
				if routelimit.Matches(tc.pattern, m, p) {
					t.Errorf("%q matches %s, want it not to", tc.pattern, req)
				}
			}
		})
	}
	for _, bad := range []string{"", "api/*", "get /x", "/a/*/b", "/api*", "GET /a b", "/products/{id}", "/a//b", "/a?b", "/a%2fb", "/a;b", `/a\b`} {
		if _, _, _, err := routelimit.ParseRoute(bad); err == nil {
			t.Errorf("ParseRoute(%q) accepted", bad)
		}
	}
	if !routelimit.Covers("/api/*", "GET /api/products") || routelimit.Covers("GET /api/*", "/api/x") {
		t.Error("Covers gets shadowing wrong")
	}
	// Patterns are compared as requests are: without case or trailing slash.
	for _, tc := range []struct {
		a, b   string
		covers bool
	}{
		{"POST /login", "POST /Login/", true},
		{"POST /login", "POST /login.json", true},
		{"GET /api/products", "HEAD /api/products", true},
		{"HEAD /api/products", "GET /api/products", false},
		{"/API/*", "GET /api/products", true},
		{"/api/*", "GET /api", false}, // which also matches /api.json
		{"/api/*", "/api/v2/*", true},
		{"POST /login.json", "POST /login", false},
	} {
		if got := routelimit.Covers(tc.a, tc.b); got != tc.covers {
			t.Errorf("Covers(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.covers)
		}
	}
}

// ValidateRoutes names each refused setting by a path a caller can map onto
// its own names (the server's config onto routes[i].match) without parsing.
func TestValidateRoutesPaths(t *testing.T) {
	p := &limiter.Policy{Name: "p"}
	err := routelimit.ValidateRoutes([]routelimit.Route{
		{Pattern: "/a", Policies: []*limiter.Policy{p}},
		{Pattern: "/a", Policies: []*limiter.Policy{p, nil}},
	})
	want := []struct {
		field string
		path  []any
	}{
		{"Routes[1].Pattern", []any{"Routes", 1, "Pattern"}},
		{"Routes[1].Policies[1]", []any{"Routes", 1, "Policies", 1}},
	}
	got := limiter.Errors(err)
	if len(got) != len(want) {
		t.Fatalf("errors %v, want %d", got, len(want))
	}
	for i, e := range got {
		var fe *limiter.FieldError
		if !errors.As(e, &fe) || fe.Field != want[i].field || !slices.Equal(fe.Path, want[i].path) {
			t.Errorf("error %d = %#v, want Field %s, Path %v", i, e, want[i].field, want[i].path)
		}
	}
}
