package routelimit

import (
	"fmt"
	"net/http"
	"path"
	"strings"
	"unicode"

	"github.com/costgate/costgate/limiter"
)

// Route applies policies to the requests its pattern matches (see
// httplimit.Route for Pattern's syntax, the config file's match).
type Route struct {
	Pattern  string
	Policies []*limiter.Policy // charged in order, all or nothing; none exempts the route
}

// rule is a parsed route pattern.
type rule struct {
	method string // "" for every method
	path   string // exact path, or with prefix the directory, ending in "/"
	prefix bool
	match  string // path as NormalizePath spells it: what requests are matched against
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
	case strings.ContainsAny(p, `%;\`):
		return r, fmt.Errorf(`%q: %%, ; and \ have no place in a pattern: it is matched against the path decoded, without ;parameters, with / for \`, s)
	case strings.ContainsFunc(p, unicode.IsControl):
		return r, fmt.Errorf("%q: control character in path", s)
	}
	if trimmed := strings.TrimSuffix(p, "/"); trimmed != "" && path.Clean(trimmed) != trimmed {
		return r, fmt.Errorf("%q: path is not clean (want %q)", s, path.Clean(trimmed))
	}
	r.path = p
	match, err := NormalizePath(p)
	if err != nil {
		return r, fmt.Errorf("%q: %w", s, err)
	}
	r.match = match
	return r, nil
}

// matches reports whether a request for method and urlPath, both
// normalised (normalizeMethod, NormalizePath), matches r.
func (r rule) matches(method, urlPath string) bool {
	return r.matchesMethod(method) && r.matchesPath(urlPath)
}

// matchesMethod: a GET route matches HEAD too, as net/http's ServeMux,
// Express, Rails and Spring route HEAD to the GET handler.
func (r rule) matchesMethod(method string) bool {
	return r.method == "" || r.method == method || r.method == http.MethodGet && method == http.MethodHead
}

func (r rule) matchesPath(p string) bool {
	switch {
	case r.match == "/":
		return r.prefix || p == "/"
	case !strings.HasPrefix(p, r.match):
		return false
	case len(p) == len(r.match):
		return true
	case r.prefix:
		return p[len(r.match)] == '/'
	}
	// A format suffix: Rails and older Spring route /login.json to /login.
	return p[len(r.match)] == '.' && !strings.Contains(p[len(r.match):], "/")
}

// covers reports whether every request b matches is matched by r.
func (r rule) covers(b rule) bool {
	if r.method != "" && r.method != b.method && !(r.method == http.MethodGet && b.method == http.MethodHead) {
		return false
	}
	switch {
	case !r.prefix:
		return !b.prefix && r.matchesPath(b.match)
	case b.prefix || r.match == "/":
		return r.matchesPath(b.match)
	}
	// b also matches its format suffixes, which r matches only below its directory.
	return r.matchesPath(b.match) && b.match != r.match
}

// routeMethod is the method of the route key part for a request r matched:
// the route's own method (HEAD is charged as the GET it is served as), else
// the request's in upper case.
func (r rule) routeMethod(method string) string {
	if r.method != "" {
		return r.method
	}
	return normalizeMethod(method)
}

// normalizeMethod is method in upper case: a router that compares methods
// without case (or a gateway that passes "post" on) serves "post" as POST.
func normalizeMethod(method string) string { return strings.ToUpper(method) }

// Covers reports whether pattern a, placed first, matches every request
// pattern b would (so that b never matches). Both must parse.
func Covers(a, b string) bool {
	ra, err1 := parseRule(a)
	rb, err2 := parseRule(b)
	return err1 == nil && err2 == nil && ra.covers(rb)
}

// Matches reports whether pattern (which must parse) matches a request for
// method and urlPath, as sent, in either reading of the path (see
// Middleware.Match); a path NormalizePath refuses matches nothing.
func Matches(pattern, method, urlPath string) bool {
	r, err := parseRule(pattern)
	if err != nil {
		return false
	}
	p, err := NormalizePath(urlPath)
	method = normalizeMethod(method)
	return err == nil && (r.matches(method, p) || r.matches(method, literalPath(urlPath)))
}
