package config

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/costgate/costgate/internal/names"
)

// AdminConfig is the admin API and console (the docs' operators page): a
// listener of its own, and the named bearer tokens that may call it.
type AdminConfig struct {
	// Listen serves the admin API and console on host:port; "" serves
	// none. It must differ from listen: the admin API is never served on
	// the main listener.
	Listen string `yaml:"listen"`
	// Tokens maps a token's name (logged with every call it makes) to the
	// token; ${VAR} in a token reads the environment variable VAR.
	Tokens map[string]string `yaml:"tokens"`
	// TokensFile names a file of "name token" lines (# comments), read at
	// start and on SIGHUP; relative to the config file.
	TokensFile string `yaml:"tokens_file"`

	// resolved holds the tokens once ResolveAdmin read the environment
	// and the file; random names those left empty in the demo config.
	resolved map[string]string
	random   []string
}

// MinAdminTokenLen is the shortest admin token accepted.
const MinAdminTokenLen = 16

// DemoAdminToken is the environment variable of the demo config's token.
const DemoAdminToken = "COSTGATE_ADMIN_TOKEN"

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

func (v *validator) admin() {
	a := &v.c.Admin
	if a.Listen == "" {
		if len(a.Tokens) > 0 || a.TokensFile != "" {
			// Tokens without a listener are a mistake worth stopping for:
			// the operators expect an admin API that is not there.
			v.fail("admin.listen", "required with admin.tokens or admin.tokens_file (host:port of the admin listener, such as 127.0.0.1:9091)")
		}
		return
	}
	v.hostPort("admin.listen", a.Listen)
	for _, other := range []struct{ field, addr string }{{"listen", v.c.Listen}, {"grpc_listen", v.c.GRPCListen}} {
		if other.addr != "" && sameAddr(a.Listen, other.addr) {
			v.fail("admin.listen", "%q is %s's address: the admin API is served on a listener of its own, never beside the API", a.Listen, other.field)
		}
	}
	if len(a.Tokens) == 0 && a.TokensFile == "" {
		v.fail("admin.tokens", "required with admin.listen: name -> token, e.g. {oncall: \"${COSTGATE_ADMIN_TOKEN}\"} (or admin.tokens_file)")
	}
	for _, name := range sortedKeys(a.Tokens) {
		tok := a.Tokens[name]
		field := v.c.entryPath("admin.tokens", name)
		switch {
		case !names.Valid(name):
			v.fail(field, "a token's name is letters, digits, '_', '-' and '.' (it is logged with every call the token makes)")
		case !envRef.MatchString(tok) && len(tok) < MinAdminTokenLen:
			v.fail(field, "a token is at least %d characters (or ${VAR}, read from the environment)", MinAdminTokenLen)
		}
	}
}

// sameAddr reports whether two listen addresses name one port on a
// common interface (":9091" and "127.0.0.1:9091" do).
func sameAddr(a, b string) bool {
	ha, pa, err1 := net.SplitHostPort(a)
	hb, pb, err2 := net.SplitHostPort(b)
	if err1 != nil || err2 != nil || pa != pb || pa == "0" {
		return false
	}
	wild := func(h string) bool { return h == "" || h == "0.0.0.0" || h == "::" }
	return ha == hb || wild(ha) || wild(hb)
}

// ResolveAdmin reads the admin tokens: ${VAR} from getenv and the tokens
// file. A token empty once read (VAR unset) is refused with its reason,
// but in the built-in demo config, whose token then is made up at start
// (AdminRandom). Call it after Load, at start and on reload.
func (c *Config) ResolveAdmin(getenv func(string) string) error {
	a := &c.Admin
	a.resolved, a.random = nil, nil
	if a.Listen == "" {
		return nil
	}
	out := map[string]string{}
	var errs []*Error
	fail := func(field, format string, args ...any) {
		errs = append(errs, &Error{File: c.Source(), Line: c.src.lines[field], Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	for _, name := range sortedKeys(a.Tokens) {
		field := c.entryPath("admin.tokens", name)
		var unset []string
		tok := envRef.ReplaceAllStringFunc(a.Tokens[name], func(ref string) string {
			v := getenv(ref[2 : len(ref)-1])
			if v == "" {
				unset = append(unset, ref[2:len(ref)-1])
			}
			return v
		})
		switch {
		case tok == "" && c.IsDemo():
			a.random = append(a.random, name)
			continue
		case len(unset) > 0:
			fail(field, "%s is not set in the environment", strings.Join(unset, ", "))
		case len(tok) < MinAdminTokenLen:
			fail(field, "the token is shorter than %d characters", MinAdminTokenLen)
		}
		out[name] = tok
	}
	if a.TokensFile != "" {
		fileTokens, err := readTokensFile(a.TokensFile)
		if err != nil {
			fail("admin.tokens_file", "%v", err)
		}
		for _, ft := range fileTokens {
			if _, dup := out[ft.name]; dup {
				fail("admin.tokens_file", "%s:%d: token %q is also in admin.tokens", a.TokensFile, ft.line, ft.name)
				continue
			}
			out[ft.name] = ft.token
		}
	}
	if len(errs) > 0 {
		return joinErrors(errs)
	}
	a.resolved = out
	return nil
}

// AdminTokens returns the tokens ResolveAdmin read, by name.
func (c *Config) AdminTokens() map[string]string { return c.Admin.resolved }

// AdminRandom returns the names of the demo config's tokens left empty,
// which the server makes up at start.
func (c *Config) AdminRandom() []string { return c.Admin.random }

type fileToken struct {
	name, token string
	line        int
}

// readTokensFile reads "name token" lines; # starts a comment.
func readTokensFile(path string) ([]fileToken, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []fileToken
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		switch {
		case len(f) != 2:
			return nil, fmt.Errorf("%s:%d: want \"name token\"", path, n)
		case !names.Valid(f[0]):
			return nil, fmt.Errorf("%s:%d: a token's name is letters, digits, '_', '-' and '.'", path, n)
		case len(f[1]) < MinAdminTokenLen:
			return nil, fmt.Errorf("%s:%d: token %q is shorter than %d characters", path, n, f[0], MinAdminTokenLen)
		case seen[f[0]]:
			return nil, fmt.Errorf("%s:%d: token %q named twice", path, n, f[0])
		}
		seen[f[0]] = true
		out = append(out, fileToken{name: f[0], token: f[1], line: n})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no token in it", path)
	}
	return out, sc.Err()
}

// resolveAdminPaths makes tokens_file relative to the config file's dir.
func (c *Config) resolveAdminPaths(dir string) {
	if f := c.Admin.TokensFile; f != "" && !filepath.IsAbs(f) {
		c.Admin.TokensFile = filepath.Join(dir, f)
	}
}
