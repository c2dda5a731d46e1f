package httplimit

import (
	"fmt"
	"path"
	"strings"
	"unicode"

	"github.com/costgate/costgate/limiter"
)

// Route applies policies to the requests its pattern matches.
type Route struct {
	// Pattern is "METHOD /path" or "/path" (any method). A path ending in
	// "/*" matches that directory and everything below it ("/api/*" matches
	// "/api/" and "/api/products/7", not "/api"); any other path matches
	// exactly. This is the config file's `match` syntax.
	Pattern string
	// Policies are charged in order, all or nothing. An empty list exempts
	// the route from later, broader routes.
	Policies []*limiter.Policy
}

// rule is a parsed route pattern.
type rule struct {
	method string // "" for every method
	path   string // exact path, or with prefix the directory, ending in "/"
	prefix bool
}

// ParseRoute parses a route pattern (see Route.Pattern).
func ParseRoute(s string) (method, urlPath string, prefix bool, err error) {
	r, err := parseRule(s)
	return r.method, r.path, r.prefix, err
}

func parseRule(s string) (rule, error) {
	var r rule
	f := strings.Fields(s)
	switch len(f) {
	case 1:
		r.path = f[0]
	case 2:
		r.method, r.path = f[0], f[1]
	default:
		return r, fmt.Errorf(`%q: want "METHOD /path" or "/path"`, s)
	}
	if r.method != "" && strings.ContainsFunc(r.method, func(c rune) bool { return c < 'A' || c > 'Z' }) {
		return r, fmt.Errorf("%q: method %q: want an upper-case HTTP method such as GET or POST", s, r.method)
	}
	p := r.path
	if !strings.HasPrefix(p, "/") {
		return r, fmt.Errorf("%q: path %q must start with /", s, p)
	}
	if strings.HasSuffix(p, "/*") {
		r.prefix = true
		p = strings.TrimSuffix(p, "*")
	}
	switch {
	case strings.Contains(p, "*"):
		return r, fmt.Errorf("%q: * may only end the path, as /*", s)
	case strings.ContainsAny(p, "{}"):
		return r, fmt.Errorf("%q: path parameters are not supported; match a prefix with /*", s)
	case strings.ContainsAny(p, "?#"):
		return r, fmt.Errorf("%q: a path has no query or fragment", s)
	case strings.ContainsFunc(p, unicode.IsControl):
		return r, fmt.Errorf("%q: control character in path", s)
	}
	if trimmed := strings.TrimSuffix(p, "/"); trimmed != "" && path.Clean(trimmed) != trimmed {
		return r, fmt.Errorf("%q: path is not clean (want %q)", s, path.Clean(trimmed))
	}
	r.path = p
	return r, nil
}

func (r rule) matches(method, urlPath string) bool {
	if r.method != "" && r.method != method {
		return false
	}
	if r.prefix {
		return strings.HasPrefix(urlPath, r.path)
	}
	return urlPath == r.path
}

// covers reports whether every request b matches is matched by r.
func (r rule) covers(b rule) bool {
	if r.method != "" && r.method != b.method {
		return false
	}
	if r.prefix {
		return strings.HasPrefix(b.path, r.path)
	}
	return !b.prefix && r.path == b.path
}

// Covers reports whether pattern a, placed first, matches every request
// pattern b would (so that b never matches). Both must parse.
func Covers(a, b string) bool {
	ra, err1 := parseRule(a)
	rb, err2 := parseRule(b)
	return err1 == nil && err2 == nil && ra.covers(rb)
}

// Matches reports whether pattern (which must parse) matches a request.
func Matches(pattern, method, urlPath string) bool {
	r, err := parseRule(pattern)
	return err == nil && r.matches(method, urlPath)
}
