package e2e

import (
	"fmt"
	"math"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/costgate/costgate/internal/mdblock"
)

// sessionStep is one command of a session the docs show, and the output
// shown under it.
type sessionStep struct{ cmd, want string }

// sessionSteps splits a session block: "$ " starts a command, a line
// ending in "\" continues it, and the lines up to the next command are its
// output. An output line of blanks then `"` continues the line before (the
// page wraps long JSON), and blanks then "# ..." after an output is a
// comment.
func sessionSteps(block string) []sessionStep {
	var steps []sessionStep
	var out []string
	inCmd := false
	flush := func() {
		if len(steps) > 0 {
			steps[len(steps)-1].want = strings.TrimSpace(strings.Join(out, "\n"))
		}
		out = nil
	}
	for _, line := range strings.Split(block, "\n") {
		switch {
		case strings.HasPrefix(line, "$ "):
			flush()
			steps = append(steps, sessionStep{cmd: strings.TrimSuffix(line[2:], `\`)})
			inCmd = strings.HasSuffix(line, `\`)
		case inCmd:
			steps[len(steps)-1].cmd += " " + strings.TrimSpace(strings.TrimSuffix(line, `\`))
			inCmd = strings.HasSuffix(line, `\`)
		case len(out) > 0 && strings.HasPrefix(strings.TrimLeft(line, " "), `"`) && strings.HasPrefix(line, " "):
			out[len(out)-1] += strings.TrimLeft(line, " ")
		default:
			if i := strings.Index(line, "  # "); i >= 0 {
				line = strings.TrimRight(line[:i], " ")
			}
			out = append(out, line)
		}
	}
	flush()
	return steps
}

var numberOrEllipsis = regexp.MustCompile(`\.\.\.|[0-9]+`)

// lineMatch matches got against want, one line (or one body): "..." in
// want stands for any text, and each number of want for a number of got,
// which same(context, want, got) judges, context being want's text
// before it.
func lineMatch(want, got string, same func(context string, want, got int64) bool) bool {
	var re strings.Builder
	re.WriteString(`^`)
	var nums []int64
	var contexts []string
	last := 0
	for _, loc := range numberOrEllipsis.FindAllStringIndex(want, -1) {
		re.WriteString(regexp.QuoteMeta(want[last:loc[0]]))
		if tok := want[loc[0]:loc[1]]; tok == "..." {
			re.WriteString(`.*?`)
		} else {
			re.WriteString(`([0-9]+)`)
			n, _ := strconv.ParseInt(tok, 10, 64)
			nums, contexts = append(nums, n), append(contexts, want[:loc[0]])
		}
		last = loc[1]
	}
	re.WriteString(regexp.QuoteMeta(want[last:]) + `$`)
	m := regexp.MustCompile(re.String()).FindStringSubmatch(got)
	if m == nil {
		return false
	}
	for i, n := range nums {
		g, _ := strconv.ParseInt(m[i+1], 10, 64)
		if !same(contexts[i], n, g) {
			return false
		}
	}
	return true
}

// outputMatch matches curl's output against the one shown: with -i, each
// header line shown must be among the headers, in order (the page leaves
// out Date, Content-Length and Content-Type), and the bodies must match.
func outputMatch(want, got string, same func(context string, want, got int64) bool) bool {
	got = strings.TrimSpace(strings.ReplaceAll(got, "\r\n", "\n"))
	wantHead, wantBody, headers := strings.Cut(want, "\n\n")
	if !headers || !strings.HasPrefix(want, "HTTP/") {
		return lineMatch(want, got, same)
	}
	gotHead, gotBody, _ := strings.Cut(got, "\n\n")
	gotLines := strings.Split(gotHead, "\n")
	for _, w := range strings.Split(wantHead, "\n") {
		found := false
		for len(gotLines) > 0 && !found {
			found = lineMatch(w, gotLines[0], same)
			gotLines = gotLines[1:]
		}
		if !found {
			return false
		}
	}
	return lineMatch(strings.TrimSpace(wantBody), strings.TrimSpace(gotBody), same)
}

// The README's session, run as it is written (curl through sh against the
// binary with the demo config, localhost:8080 its address): every output
// is the one the README shows, but for what depends on the clock, each
// held to what the clock allows: the Reset timestamps; how many of the 200
// burst requests passed (150 plus what refilled meanwhile); the GraphQL
// budget left (what refilled since the first operation).
func TestREADMESession(t *testing.T) {
	_, err := exec.LookPath("curl")
	if err != nil {
		t.Fatalf("curl not found (%v): sudo apt-get install -y curl (make deps installs it)", err)
	}
	g := start(t, nil, "-addr", "127.0.0.1:0")
	run := func(cmd string) string {
		t.Helper()
		out, err := exec.Command("sh", "-c", strings.ReplaceAll(cmd, "localhost:8080", g.Host)).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", cmd, err, out)
		}
		return string(out)
	}
	var graphqlSince time.Time // when the first GraphQL operation was sent
	same := func(context string, want, got int64) bool {
		switch {
		case strings.HasSuffix(context, "X-Ratelimit-Reset: "):
			now := time.Now().Unix()
			return got >= now-1 && got <= now+3600
		case strings.HasSuffix(context, `"currentlyAvailable":`):
			refill := int64(math.Ceil(50*time.Since(graphqlSince).Seconds())) + 1 // the demo's graphql policy: 50 a second
			return got >= want && got <= want+refill
		}
		return got == want
	}
	for _, marker := range []string{"<!-- the session of TestREADMESession -->", "<!-- the GraphQL session of TestREADMESession -->"} {
		steps := sessionSteps(mdblock.After(t, "README.md", marker))
		if len(steps) < 2 {
			t.Fatalf("%s: %d commands", marker, len(steps))
		}
		for _, step := range steps {
			if strings.Contains(step.cmd, "/graphql") && graphqlSince.IsZero() {
				graphqlSince = time.Now()
			}
			began := time.Now()
			got := run(step.cmd)
			switch {
			case strings.Contains(step.cmd, "uniq -c"):
				checkBurst(t, step, got, time.Since(began))
			case strings.HasPrefix(step.want, "HTTP/1.1 429"):
				// The bucket refills a token every 60 ms: one may have come
				// back since the burst. Each try takes it, so a few drain it.
				for try := 0; try < 20 && strings.HasPrefix(got, "HTTP/1.1 200"); try++ {
					got = run(step.cmd)
				}
				fallthrough
			default:
				if !outputMatch(step.want, got, same) {
					t.Errorf("$ %s\ngot:\n%s\nthe README shows:\n%s", step.cmd, got, step.want)
				}
			}
		}
	}
}

// checkBurst holds the burst step's counts to what the README says of
// them: 200 requests, answered 200 or 429 as shown, and 150 passed plus at
// most what the bucket (1000 a minute) refilled while they ran.
func checkBurst(t *testing.T, step sessionStep, got string, took time.Duration) {
	t.Helper()
	counts := map[string]int{}
	total := 0
	for _, l := range strings.Split(strings.TrimSpace(got), "\n") {
		var n int
		var code string
		if _, err := fmt.Sscan(l, &n, &code); err != nil {
			t.Fatalf("$ %s: %q is not a count and a status", step.cmd, l)
		}
		counts[code] += n
		total += n
	}
	for _, l := range strings.Split(step.want, "\n") {
		var n int
		var code string
		fmt.Sscan(l, &n, &code)
		if counts[code] == 0 {
			t.Errorf("$ %s: no %s answered; the README shows %q", step.cmd, code, l)
		}
	}
	refilled := int(math.Ceil(1000.0/60*took.Seconds())) + 1
	if total != 200 || len(counts) != 2 || counts["200"] < 150 || counts["200"] > 150+refilled {
		t.Errorf("$ %s: %v in %v; want 200 answers, 150 plus at most %d refilled passing, the rest 429", step.cmd, counts, took, refilled)
	}
}
