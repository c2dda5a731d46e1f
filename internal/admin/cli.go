package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// `costgate admin VERB [flags]`: the admin API from a terminal. It talks to
// the admin listener of a running server (-admin URL, or
// COSTGATE_ADMIN_URL), with the token from COSTGATE_ADMIN_TOKEN (never a
// flag: a command line is visible to every user of the machine).

// DefaultURL is the admin listener the command calls unless told otherwise.
const DefaultURL = "http://127.0.0.1:9091"

// cliTimeout bounds one call.
const cliTimeout = 10 * time.Second

const cliUsage = `usage: costgate admin VERB [flags]

  state      [identity]            each policy's state for an identity
  reset      [identity]            clear the identity's state on every gateway
  override   NAME -action limit|allow|deny [-limit N] [-burst N] [-multiplier X] -expires D [identity]
  overrides                        the overrides in effect
  unoverride NAME                  remove an override
  top        [-policy P]           the identities denied most in the last minute

identity: -policy P -tenant T -api-key K -ip A -username U -route R -header NAME=VALUE
every verb: -admin URL (default $COSTGATE_ADMIN_URL, else ` + DefaultURL + `), -json
the token: $COSTGATE_ADMIN_TOKEN
`

// Command runs `costgate admin` with args (what follows "admin") and
// returns the exit status: 0, 1 when the call failed (the server's message
// on stderr), 2 for a bad command line.
func Command(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "help" {
		fmt.Fprint(stderr, cliUsage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	verb, rest := args[0], args[1:]
	c := &cli{getenv: getenv, stdout: stdout, stderr: stderr}
	fs := flag.NewFlagSet("costgate admin "+verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, cliUsage) }
	fs.StringVar(&c.url, "admin", "", "the admin listener's URL")
	fs.BoolVar(&c.json, "json", false, "print the server's JSON answer")
	id := map[string]*string{}
	headers := headerFlags{}
	identityFlags := func() {
		for _, f := range []struct{ flag, member string }{{"policy", "policy"}, {"tenant", "tenant"}, {"api-key", "api_key"},
			{"ip", "ip"}, {"username", "username"}, {"route", "route"}} {
			id[f.member] = fs.String(f.flag, "", f.member+" of the identity")
		}
		fs.Var(&headers, "header", "NAME=VALUE of a header:NAME key part (repeatable)")
	}
	var action, expires, limit, burst, multiplier string
	switch verb {
	case ActionState, ActionReset:
		identityFlags()
	case ActionOverride:
		identityFlags()
		fs.StringVar(&action, "action", "", "limit, allow or deny")
		fs.StringVar(&limit, "limit", "", "the new limit (action limit)")
		fs.StringVar(&burst, "burst", "", "the new burst (action limit; default the limit)")
		fs.StringVar(&multiplier, "multiplier", "", "multiplies limit and burst (action limit)")
		fs.StringVar(&expires, "expires", "", "a duration (90m, 24h, 7d) or an RFC 3339 time, at most 30 days ahead")
	case ActionTop:
		id["policy"] = fs.String("policy", "", "the policy (default: every policy)")
	case ActionOverrides, ActionUnoverride:
	default:
		fmt.Fprintf(stderr, "costgate admin: unknown verb %q\n\n%s", verb, cliUsage)
		return 2
	}
	// A NAME may come first (override NAME -action deny) or after the flags.
	var name string
	if (verb == ActionOverride || verb == ActionUnoverride) && len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		name, rest = rest[0], rest[1:]
	}
	if err := fs.Parse(rest); err != nil {
		return 2
	}
	if name == "" && fs.NArg() > 0 && (verb == ActionOverride || verb == ActionUnoverride) {
		name = fs.Arg(0)
		fs = withArgs(fs, fs.Args()[1:])
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "costgate admin %s: unexpected %q\n", verb, fs.Arg(0))
		return 2
	}
	if (verb == ActionOverride || verb == ActionUnoverride) && name == "" {
		fmt.Fprintf(stderr, "costgate admin %s: the override's NAME is required\n", verb)
		return 2
	}
	members := map[string]any{}
	for k, v := range id {
		if *v != "" {
			members[k] = *v
		}
	}
	for k, v := range headers {
		members["header."+k] = v
	}
	switch verb {
	case ActionState:
		return c.do(http.MethodGet, "/v1/admin/state?"+query(members), nil, printState)
	case ActionReset:
		return c.do(http.MethodPost, "/v1/admin/reset", members, printReset)
	case ActionOverride:
		members["action"] = action
		if expires != "" {
			members["expires"] = expires
		}
		for _, n := range []struct {
			member, text string
			float        bool
		}{{"limit", limit, false}, {"burst", burst, false}, {"multiplier", multiplier, true}} {
			if n.text == "" {
				continue
			}
			v, err := strconv.ParseFloat(n.text, 64)
			if err != nil || !n.float && v != float64(int64(v)) {
				fmt.Fprintf(stderr, "costgate admin override: -%s: want a number, got %q\n", n.member, n.text)
				return 2
			}
			members[n.member] = json.Number(n.text)
		}
		return c.do(http.MethodPut, "/v1/admin/overrides/"+url.PathEscape(name), members, printOverride)
	case ActionOverrides:
		return c.do(http.MethodGet, "/v1/admin/overrides", nil, printOverrides)
	case ActionUnoverride:
		return c.do(http.MethodDelete, "/v1/admin/overrides/"+url.PathEscape(name), nil, printDeleted)
	default: // top
		return c.do(http.MethodGet, "/v1/admin/top?"+query(members), nil, printTop)
	}
}

// withArgs is fs parsed again over args (what followed the NAME).
func withArgs(fs *flag.FlagSet, args []string) *flag.FlagSet {
	_ = fs.Parse(args)
	return fs
}

func query(members map[string]any) string {
	q := url.Values{}
	for k, v := range members {
		q.Set(k, fmt.Sprint(v))
	}
	return q.Encode()
}

// headerFlags collects -header NAME=VALUE.
type headerFlags map[string]string

func (h headerFlags) String() string { return "" }

func (h headerFlags) Set(s string) error {
	name, value, ok := strings.Cut(s, "=")
	if !ok || name == "" {
		return errors.New("want NAME=VALUE")
	}
	h[name] = value
	return nil
}

type cli struct {
	url    string
	json   bool
	getenv func(string) string
	stdout io.Writer
	stderr io.Writer
}

// do makes one call and prints its answer: the JSON itself with -json,
// else print's table. A refused call exits 1 with the server's message.
func (c *cli) do(method, path string, body map[string]any, print func(io.Writer, json.RawMessage) error) int {
	base := c.url
	if base == "" {
		base = c.getenv("COSTGATE_ADMIN_URL")
	}
	if base == "" {
		base = DefaultURL
	}
	token := c.getenv("COSTGATE_ADMIN_TOKEN")
	if token == "" {
		fmt.Fprintln(c.stderr, "costgate admin: COSTGATE_ADMIN_TOKEN is not set (the admin token the server was given)")
		return 1
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			fmt.Fprintln(c.stderr, "costgate admin:", err)
			return 1
		}
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(base, "/")+path, rd)
	if err != nil {
		fmt.Fprintln(c.stderr, "costgate admin:", err)
		return 2
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintln(c.stderr, "costgate admin:", err)
		return 1
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, 16<<20))
	if err != nil {
		fmt.Fprintln(c.stderr, "costgate admin:", err)
		return 1
	}
	if res.StatusCode/100 != 2 {
		var e apiError
		if json.Unmarshal(raw, &e) == nil && e.Message != "" {
			fmt.Fprintf(c.stderr, "costgate admin: %s (%d %s)\n", e.Message, res.StatusCode, e.Error)
		} else {
			fmt.Fprintf(c.stderr, "costgate admin: %s: %s\n", res.Status, strings.TrimSpace(string(raw)))
		}
		return 1
	}
	if c.json {
		c.stdout.Write(raw)
		if !bytes.HasSuffix(raw, []byte("\n")) {
			io.WriteString(c.stdout, "\n")
		}
		return 0
	}
	if err := print(c.stdout, raw); err != nil {
		fmt.Fprintln(c.stderr, "costgate admin: the server's answer:", err)
		return 1
	}
	return 0
}

func newTable(w io.Writer, head ...string) *tabwriter.Writer {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	return tw
}

func row(tw io.Writer, cells ...any) {
	s := make([]string, len(cells))
	for i, c := range cells {
		s[i] = fmt.Sprint(c)
		if s[i] == "" {
			s[i] = "-"
		}
	}
	fmt.Fprintln(tw, strings.Join(s, "\t"))
}

func printState(w io.Writer, raw json.RawMessage) error {
	var st struct {
		Identity map[string]string `json:"identity"`
		Policies []policyState     `json:"policies"`
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return err
	}
	fmt.Fprintf(w, "tenant %s, plan %s\n", st.Identity["tenant"], st.Identity["plan"])
	tw := newTable(w, "POLICY", "ALGORITHM", "LIMIT", "BURST", "REMAINING", "FULL-IN", "NOW", "OVERRIDE", "DENY-CACHE", "LEASE")
	for _, p := range st.Policies {
		now := "admitting"
		if p.Denying {
			now = "DENYING"
		}
		var ov []string
		for _, o := range p.Overrides {
			if o.Applies != nil && *o.Applies {
				ov = append(ov, o.Name+"("+string(o.Action)+")")
			}
		}
		cache, lease := "", ""
		if p.DenyCache != nil {
			cache = fmt.Sprintf("%ds", p.DenyCache.RetryAfterSec)
		}
		if p.Lease != nil {
			lease = fmt.Sprintf("%d/%d", p.Lease.Used, p.Lease.Lease)
		}
		remaining := strconv.FormatInt(p.Remaining, 10)
		if p.Error != "" {
			remaining = "? (" + p.Error + ")"
		}
		row(tw, p.Policy, p.Algorithm, p.Limit, p.Burst, remaining, fmt.Sprintf("%ds", p.ResetAfterSec), now, strings.Join(ov, ","), cache, lease)
	}
	return tw.Flush()
}

func printReset(w io.Writer, raw json.RawMessage) error {
	var r struct {
		Reset []string `json:"reset"`
		Scope string   `json:"scope"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "reset %s on %s\n", strings.Join(r.Reset, ", "), r.Scope)
	return err
}

func describeOverride(o overrideView) string {
	what := string(o.Action)
	switch {
	case o.Multiplier != 0:
		what += " ×" + strconv.FormatFloat(o.Multiplier, 'g', -1, 64)
	case o.Limit != 0:
		what += " " + strconv.FormatInt(o.Limit, 10)
		if o.Burst != 0 {
			what += "/" + strconv.FormatInt(o.Burst, 10)
		}
	}
	return what
}

func targetText(o overrideView) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(o.Target)) {
		parts = append(parts, k+"="+o.Target[k])
	}
	return strings.Join(parts, " ")
}

func policyText(o overrideView) string {
	if o.Policy == "" {
		return "every policy"
	}
	return o.Policy
}

func printOverride(w io.Writer, raw json.RawMessage) error {
	var r struct {
		Override overrideView `json:"override"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return err
	}
	o := r.Override
	_, err := fmt.Fprintf(w, "override %s: %s on %s, %s, until %s (in %s)\n", o.Name, describeOverride(o), policyText(o), targetText(o),
		o.Expires.Format(time.RFC3339), time.Duration(o.ExpiresInSec)*time.Second)
	return err
}

func printOverrides(w io.Writer, raw json.RawMessage) error {
	var r struct {
		Overrides []overrideView `json:"overrides"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return err
	}
	if len(r.Overrides) == 0 {
		_, err := fmt.Fprintln(w, "no override in effect")
		return err
	}
	tw := newTable(w, "NAME", "POLICY", "TARGET", "ACTION", "EXPIRES", "IN", "BY")
	for _, o := range r.Overrides {
		row(tw, o.Name, policyText(o), targetText(o), describeOverride(o), o.Expires.Format(time.RFC3339), time.Duration(o.ExpiresInSec)*time.Second, o.By)
	}
	return tw.Flush()
}

func printDeleted(w io.Writer, raw json.RawMessage) error {
	var r struct {
		Deleted string `json:"deleted"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "deleted override %s\n", r.Deleted)
	return err
}

func printTop(w io.Writer, raw json.RawMessage) error {
	var all struct {
		Policies []topView `json:"policies"`
	}
	var one topView
	if err := json.Unmarshal(raw, &one); err != nil {
		return err
	}
	if one.Policy != "" {
		all.Policies = []topView{one}
	} else if err := json.Unmarshal(raw, &all); err != nil {
		return err
	}
	for i, p := range all.Policies {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "%s: denied most in the last %ds\n", p.Policy, p.WindowSec)
		if len(p.Entries) == 0 {
			fmt.Fprintln(w, "  nothing denied")
			continue
		}
		tw := newTable(w, "DENIED", "TENANT", "API-KEY", "IP", "USERNAME")
		for _, e := range p.Entries {
			row(tw, e.Denied, e.Tenant, e.APIKey, e.IP, e.Username)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}
