package routelimit_test

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/costgate/costgate/internal/routelimit"
	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/identity"
	"github.com/costgate/costgate/limiter/memstore"
)

func TestNormalizePath(t *testing.T) {
	for _, tc := range []struct {
		in, want string // want "" for an error
	}{
		{"/login", "/login"},
		{"/", "/"},
		{"", "/"},
		{"/LOGIN", "/login"},
		{"/Api/Products/7", "/api/products/7"},
		{"/login/", "/login"},
		{"//login", "/login"},
		{"/login//", "/login"},
		{"/./login", "/login"},
		{"/login/.", "/login"},
		{"/api/../login", "/login"},
		{"/../../login", "/login"},
		{"/login;x=1", "/login"},
		{"/login;jsessionid=1/", "/login"},
		{"/api/..;/login", "/login"},
		{"/api;v=2/products;x", "/api/products"},
		{"/login%2f", "/login"},
		{"/login%2F", "/login"},
		{"/login%252f", "/login"},
		{"/login%25252F", "/login"},
		{"/%6c%6F%67%69%6E", "/login"},
		{"/%4C%4f%47%49%4E", "/login"},
		{"/%u006cogin", "/login"},
		{"/api%2f..%2flogin", "/login"},
		{"/api/%2e%2e/login", "/login"},
		{"/api/%252e%252e/login", "/login"},
		{"\\login", "/login"},
		{"/login\\", "/login"},
		{"/api\\..\\login", "/login"},
		{"/login%5c", "/login"},
		{"/login%3fx=1", "/login"},
		{"/login%23frag", "/login"},
		{"/log%C4%B1n", "/login"},               // ı, dotless i: .NET and Java upper-case it to I
		{"/log%C4%B0n", "/login"},               // İ
		{"/api/product%C5%BF", "/api/products"}, // ſ, long s
		{"/%E2%84%AAey", "/key"},                // KELVIN SIGN
		{"/caf%C3%89", "/café"},
		{"/files/100%25", "/files/100%25"}, // a literal %, kept escaped
		{"/files/50%25off", "/files/50%25off"},
		{"/files/50%2525off", "/files/50%25off"},
		{"/login%20", "/login "}, // no common backend routes it to /login
		{"/login.json", "/login.json"},

		{"/login%00", ""},
		{"/login%0a", ""},
		{"/login%C2%85", ""}, // NEL, a C1 control
		{"/login%C0%AF", ""}, // an overlong "/"
		{"/login%ff", ""},
		{"/login%zz", ""},
		{"/login%", ""},
		{"/login%2", ""},
		{"/login%uD800", ""},    // a lone surrogate is no escape
		{"/login%2525252f", ""}, // still escaped after three decodings
		{"/login\x00", ""},
		{"/login\xff", ""},
	} {
		got, err := routelimit.NormalizePath(tc.in)
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("NormalizePath(%q) = %q, want an error", tc.in, got)
		case tc.want != "" && err != nil:
			t.Errorf("NormalizePath(%q): %v, want %q", tc.in, err, tc.want)
		case got != tc.want:
			t.Errorf("NormalizePath(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// A path already in normal form, every request's case, costs no allocation.
func TestNormalizePathAllocatesNothingWhenNormal(t *testing.T) {
	for _, p := range []string{"/", "/api/products/7", "/login", "/.well-known/x"} {
		if n := testing.AllocsPerRun(100, func() { routelimit.NormalizePath(p) }); n != 0 {
			t.Errorf("NormalizePath(%q): %v allocations, want 0", p, n)
		}
	}
}

// Every spelling a common backend routes to a limited route is matched by
// it, whatever the case of the method; near misses that no backend routes
// there are not.
func TestNormalizedSpellingsMatchTheRoute(t *testing.T) {
	for _, tc := range []struct {
		pattern string
		hits    []string // "METHOD /path"
		misses  []string
	}{
		{"POST /login", []string{
			"POST /login", "post /login", "Post /login",
			"POST /login/", "POST /LOGIN", "POST /Login/", "POST //login", "POST /./login", "POST /login/.",
			"POST /login;x=1", "POST /login;jsessionid=A/", "POST /login%2f", "POST /login%2F", "POST /login%252f",
			"POST /%6Cogin", "POST /%u006Cogin", "POST /api/../login", "POST /api/..;/login", "POST /api%2f..%2flogin",
			"POST \\login", "POST /login%5C", "POST /login%3Fx", "POST /log%C4%B1n",
			"POST /login.json", "POST /LOGIN.JSON", "POST /login.", "POST /login.json/",
		}, []string{
			"GET /login", "HEAD /login", "PUT /login",
			"POST /logins", "POST /log/in", "POST /login/x", "POST /login%20", "POST /xlogin", "POST /login.json/x", "POST /",
		}},
		{"/api/*", []string{
			"GET /api", "GET /api/", "get /API/Products", "DELETE /api/products/7", "GET //api//products", "GET /api%2fproducts",
			"GET /api;v=1/products", "GET /x/../api/products", "GET /API",
			"GET /api/../login", "GET /api/..;/x", "GET /api/x%2F..%2F..%2Fy", `GET /api/x\..\..\y`, // read as Express reads them
		}, []string{"GET /apis", "GET /ap", "GET /api.json", "GET /x/api/products", "GET /"}},
		{"GET /api/products", []string{
			"GET /api/products", "HEAD /api/products", "head /API/PRODUCTS/", "GET /api/product%C5%BF", "GET /api/products.csv",
		}, []string{"POST /api/products", "GET /api/products/7", "GET /api/product"}},
		{"GET /*", []string{"GET /", "GET /anything", "get //x", "HEAD /"}, []string{"POST /"}},
		{"GET /", []string{"GET /", "GET //", "GET /.", "GET /x/.."}, []string{"GET /x", "GET /.json"}},
	} {
		t.Run(tc.pattern, func(t *testing.T) {
			for _, req := range tc.hits {
				m, p, _ := strings.Cut(req, " ")
				if !routelimit.Matches(tc.pattern, m, p) {
					t.Errorf("%q does not match %s, want it to", tc.pattern, req)
				}
			}
			for _, req := range tc.misses {
				m, p, _ := strings.Cut(req, " ")
				if routelimit.Matches(tc.pattern, m, p) {
					t.Errorf("%q matches %s, want it not to", tc.pattern, req)
				}
			}
		})
	}
}

// Case folding is a fold: one result for every rune EqualFold equates, the
// same result again once folded, and ASCII only for the four runes
// backends fold to ASCII (KELVIN SIGN, ſ, ı, İ).
func TestNormalizePathFoldsEveryRune(t *testing.T) {
	toASCII := map[rune]bool{'\u212a': true, 'ſ': true, 'ı': true, 'İ': true}
	for r := rune(utf8.RuneSelf); r <= unicode.MaxRune; r++ {
		if !utf8.ValidRune(r) || unicode.IsControl(r) {
			continue
		}
		got := routelimit.FoldRune(r)
		if again := routelimit.FoldRune(got); again != got {
			t.Errorf("%U folds to %U, then %U", r, got, again)
		}
		if other := routelimit.FoldRune(unicode.SimpleFold(r)); other != got {
			t.Errorf("%U folds to %U, its fold %U to %U", r, got, unicode.SimpleFold(r), other)
		}
		if (got < utf8.RuneSelf) != toASCII[r] {
			t.Errorf("%U folds to %U", r, got)
		}
	}
	// NormalizePath folds with it.
	for _, r := range []rune{'\u212a', 'ſ', 'ı', 'İ', 'Σ', 'ς', 'Å', 'ǅ'} {
		got, err := routelimit.NormalizePath("/" + string(r))
		if want := "/" + string(routelimit.FoldRune(r)); err != nil || got != want {
			t.Errorf("NormalizePath(/%c) = %q, %v, want %q", r, got, err, want)
		}
	}
}

// The limited routes the fuzz spells, with a method of theirs.
var fuzzRoutes = []struct{ pattern, method, path string }{
	{"POST /login", "POST", "/login"},
	{"/api/*", "GET", "/api/products/7"},
	{"GET /api/products", "GET", "/api/products"},
	{"PUT /v2/Orders/items", "PUT", "/v2/orders/items"},
}

// spell writes path in one of the spellings NormalizePath folds, choosing
// by the bytes of recipe: letters in any case, any character %-escaped
// (once, twice, IIS's %u), "/" as %2F, "\" or %5C, extra and trailing
// slashes, "." and "x/.." segments, ;parameters, a query-like %3F tail.
func spell(method, path string, recipe []byte) (string, string) {
	next := func(n int) int {
		if len(recipe) == 0 {
			return 0
		}
		c := int(recipe[0])
		recipe = recipe[1:]
		return c % n
	}
	var b strings.Builder
	for i, seg := range strings.Split(path[1:], "/") {
		if i == 0 || next(2) == 0 {
			b.WriteString([]string{"/", "/", "/", "%2F", "%2f", "\\", "%5c", "%252F"}[next(8)])
		} else {
			b.WriteString("/")
		}
		switch next(6) {
		case 1:
			b.WriteString("/")
		case 2:
			b.WriteString("./")
		case 3:
			b.WriteString("zz/../")
		case 4:
			b.WriteString("%2e/")
		case 5:
			b.WriteString("q;a=1/%2E%2e;b/")
		}
		for _, c := range []byte(seg) {
			switch next(7) {
			case 1:
				b.WriteString(strings.ToUpper(string(c)))
			case 2:
				fmt.Fprintf(&b, "%%%02X", c)
			case 3:
				fmt.Fprintf(&b, "%%%02x", c)
			case 4:
				fmt.Fprintf(&b, "%%25%02X", c)
			case 5:
				fmt.Fprintf(&b, "%%u%04x", c)
			default:
				b.WriteByte(c)
			}
		}
		if next(4) == 0 {
			b.WriteString(";jsessionid=" + strings.Repeat("x", next(3)))
		}
	}
	b.WriteString([]string{"", "", "/", "//", "/.", "%2f", "%3Fq=1", ";x"}[next(8)])
	var m strings.Builder
	for _, c := range method {
		if next(2) == 1 {
			c = unicode.ToLower(c)
		}
		m.WriteRune(c)
	}
	return m.String(), b.String()
}

// Every normalisation of a limited route's path is matched by the route;
// NormalizePath is idempotent, its results are spelt once only, and
// nothing panics, whatever the path.
func FuzzNormalizePath(f *testing.F) {
	for _, seed := range []string{"/login", "/LOGIN/", "/login;x=1", "/login%2f", "/api/%2e%2e/login", "\\login",
		"/login%252f", "/%u006cogin", "/files/100%25", "/log%C4%B1n", "/login%C0%AF", "/a%25%32%66b", "/%"} {
		f.Add(seed, []byte(seed))
	}
	f.Add("", []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	f.Add("", []byte{0xff, 0xfe, 0xfd, 0xfc, 0xfb, 0xfa, 0xf9, 0xf8, 0xf7, 0xf6})
	f.Fuzz(func(t *testing.T, p string, recipe []byte) {
		if got, err := routelimit.NormalizePath(p); err == nil {
			if again, err := routelimit.NormalizePath(got); err != nil || again != got {
				t.Fatalf("NormalizePath(%q) = %q, then %q, %v", p, got, again, err)
			}
			if !strings.HasPrefix(got, "/") || strings.Contains(got, "//") || strings.ContainsAny(got, "\\;?#ABCDEFGHIJKLMNOPQRSTUVWXYZ") ||
				len(got) > 1 && strings.HasSuffix(got, "/") {
				t.Fatalf("NormalizePath(%q) = %q: not in normal form", p, got)
			}
		}
		routelimit.Matches("/api/*", "GET", p) // both readings, whatever p is
		rt := fuzzRoutes[len(recipe)%len(fuzzRoutes)]
		method, spelt := spell(rt.method, rt.path, recipe)
		if !routelimit.Matches(rt.pattern, method, spelt) {
			norm, err := routelimit.NormalizePath(spelt)
			t.Fatalf("%q does not match %s %s (normalised %q, %v)", rt.pattern, method, spelt, norm, err)
		}
	})
}

// A path is read as normalising servers read it and as literal ones
// (Express, chi) do: the route with policies that either reading
// names is charged, and one the readings put on two such routes is refused.
func TestMatchReadsThePathBothWays(t *testing.T) {
	p := &limiter.Policy{Name: "p", Algorithm: limiter.FixedWindow, Limit: 1, Period: time.Hour, Key: []string{identity.PartIP}}
	mw, err := routelimit.New(routelimit.Config{Limiter: memLimiter(t), Identity: resolver(t, identity.Config{}), Routes: []routelimit.Route{
		{Pattern: "POST /login", Policies: []*limiter.Policy{p}},
		{Pattern: "/public/*"}, // exempt
		{Pattern: "/api/*", Policies: []*limiter.Policy{p}},
		{Pattern: "/admin/*", Policies: []*limiter.Policy{p}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		method, path, want string // want "" for no route, "error" for a refusal
	}{
		{"POST", "/login", "POST /login"},
		{"POST", "/x/../login", "POST /login"},
		{"POST", "/login;x=1", "POST /login"},
		{"GET", "/api/../healthz", "/api/*"},     // Express serves it under /api/
		{"GET", "/api/..;/healthz", "/api/*"},    // so does anything but a servlet container
		{"GET", "/x/..;/api/products", "/api/*"}, // and a servlet container serves it there
		{"GET", "/public/x", "/public/*"},
		{"GET", "/public/..;/admin/users", "/admin/*"}, // the exemption does not hold for a reading it does not name
		{"GET", "/public/../api/x", "/api/*"},
		{"GET", "/api%2F..%2Fpublic", "/public/*"},
		{"GET", "/healthz", ""},
		{"POST", "/api/../login", "error"},
		{"GET", "/api/..;/admin/users", "error"},
		{"GET", "/api/x%C0%AF", "error"},
	} {
		rt, err := mw.Match(tc.method, tc.path)
		got := ""
		switch {
		case err != nil:
			got = "error"
		case rt != nil:
			got = rt.Pattern
		}
		if got != tc.want {
			t.Errorf("Match(%s %s) = %q (%v), want %q", tc.method, tc.path, got, err, tc.want)
		}
	}
}

func memLimiter(t *testing.T) *limiter.Limiter {
	t.Helper()
	lim, err := limiter.New(memstore.New(nil))
	if err != nil {
		t.Fatal(err)
	}
	return lim
}

func resolver(t *testing.T, cfg identity.Config) *identity.Resolver {
	t.Helper()
	cfg.HashKey = []byte("routelimit-test-hash-key")
	res, err := identity.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return res
}
