package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/costgate/costgate/limiter/redistest"
)

// The bombs of issue 24, tried against the stock binary with its demo
// config, as an anonymous client: documents that are cheap to send and were
// dear to read. Each must now be answered small, fast, in little memory, and
// charged.

// processCPU is the CPU time the process has used, user and system, from
// /proc (clock ticks of 10 ms): the gateway's own work, which a busy machine
// does not inflate as it does the wall clock.
func processCPU(t testing.TB, g *Gateway) time.Duration {
	t.Helper()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", g.Cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("/proc/pid/stat: %s", stat)
	}
	const ticksPerSecond = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / ticksPerSecond
}

func queryBody(query, operationName string) string {
	b, _ := json.Marshal(map[string]string{"query": query, "operationName": operationName})
	return string(b)
}

// aliasPairs is the bomb: n fields under one alias, id and title by
// turns, so that every pair of them conflicts.
func aliasPairs(n int) string {
	var b strings.Builder
	for i := range n {
		if i%2 == 1 {
			b.WriteString("a: id ")
		} else {
			b.WriteString("a: title ")
		}
	}
	return b.String()
}

// argumentPairs is the same bomb without aliases, within every limit: n
// selections of one list field with two different arguments by turns (two
// fields each).
func argumentPairs(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "variants(first: %d) { id } ", 1+i%2)
	}
	return b.String()
}

func TestBinaryValidationBombs(t *testing.T) {
	g := start(t, nil, "-addr", "127.0.0.1:0")
	available(t, g.Base) // warm: the first request's allocations are not the bombs'
	baseRSS := g.PeakRSS(t)
	bombs := []struct {
		name, body string
		code       string
	}{
		{"the issue's 7.5 KB unused fragment", queryBody("{ __typename } fragment F on Product { "+aliasPairs(1000)+"}", ""), "MAX_ALIASES_EXCEEDED"},
		{"the same at 15 KB", queryBody("{ __typename } fragment F on Product { "+aliasPairs(2000)+"}", ""), "MAX_ALIASES_EXCEEDED"},
		{"the same in an operation not selected", queryBody("query A { __typename } query B { products { nodes { "+aliasPairs(2000)+"} } }", "A"), "MAX_ALIASES_EXCEEDED"},
		{"conflicting arguments in an unused fragment, within the limits", queryBody("{ __typename } fragment F on Product { "+argumentPairs(499)+"}", ""), "GRAPHQL_VALIDATION_FAILED"},
		{"conflicting arguments in an operation not selected", queryBody("query A { __typename } query B { products { nodes { "+argumentPairs(498)+"} } }", "A"), "GRAPHQL_VALIDATION_FAILED"},
		{"12,000 fields in an operation not selected", queryBody("query A { __typename } query B { products { nodes { "+strings.Repeat("id ", 12000)+"} } }", "A"), "MAX_FIELDS_EXCEEDED"},
	}
	var cpu time.Duration
	for _, b := range bombs {
		t.Run(b.name, func(t *testing.T) {
			before := available(t, g.Base)
			start := processCPU(t, g)
			res, body := postGraphQL(t, g.Base, b.body)
			cpu += processCPU(t, g) - start
			a := readAnswer(t, body)
			if res.StatusCode != 400 || a.code() != b.code {
				t.Errorf("%d %s, want 400 %s: %.300s", res.StatusCode, a.code(), b.code, body)
			}
			if len(body) > 1<<20 || len(a.Errors) > 101 {
				t.Errorf("the answer is %d bytes with %d errors, want at most 1 MiB and 101", len(body), len(a.Errors))
			}
			if after := available(t, g.Base); after >= before {
				t.Errorf("the bucket holds %d after the refusal, %d before: the refusal was free", after, before)
			}
			t.Logf("%d bytes sent, %d bytes answered, %d errors", len(b.body), len(body), len(a.Errors))
		})
	}
	if peak := g.PeakRSS(t); peak-baseRSS > 32<<20 {
		t.Errorf("peak RSS %d MiB, %d MiB more than before the bombs; want at most 32 MiB more", peak>>20, (peak-baseRSS)>>20)
	}
	// 50 ms of CPU per document at most, whatever it holds (the clock's
	// ticks are 10 ms: the bound is on the sum).
	if limit := time.Duration(len(bombs)) * 50 * time.Millisecond; cpu > limit {
		t.Errorf("the bombs took %v of the gateway's CPU, more than %v", cpu, limit)
	}
}

// A websocket subscribe carrying the bomb (its fields conflict pair by pair):
// the protocol's error message is small and holds at most 101 errors, and
// the refusal is charged.
func TestBinaryWebsocketSubscribeBomb(t *testing.T) {
	g := start(t, nil, "-addr", "127.0.0.1:0")
	before := available(t, g.Base)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(g.Base, "http")+"/graphql", &websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	conn.SetReadLimit(256 << 20) // the answer before the fix was 22.6 MB: read it, to measure it
	send := func(v any) {
		b, _ := json.Marshal(v)
		if err := conn.Write(ctx, websocket.MessageText, b); err != nil {
			t.Fatal(err)
		}
	}
	read := func() []byte {
		_, b, err := conn.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	send(map[string]any{"type": "connection_init"})
	if m := read(); !strings.Contains(string(m), "connection_ack") {
		t.Fatalf("got %s, want connection_ack", m)
	}
	query := "subscription { ticker(count: 1) { products(first: 1) { " + argumentPairs(230) + "} } }"
	send(map[string]any{"type": "subscribe", "id": "1", "payload": map[string]any{"query": query}})
	m := read()
	var msg struct {
		Type    string `json:"type"`
		Payload []struct {
			Message    string         `json:"message"`
			Extensions map[string]any `json:"extensions"`
		} `json:"payload"`
	}
	if err := json.Unmarshal(m, &msg); err != nil {
		t.Fatalf("%v: %.300s", err, m)
	}
	if msg.Type != "error" || len(msg.Payload) == 0 || msg.Payload[0].Extensions["code"] != "GRAPHQL_VALIDATION_FAILED" {
		t.Errorf("got %.300s, want an error message GRAPHQL_VALIDATION_FAILED", m)
	}
	if len(m) > 1<<20 || len(msg.Payload) > 101 {
		t.Errorf("the error message is %d bytes with %d errors for a %d-byte subscribe", len(m), len(msg.Payload), len(query))
	}
	// The rejection cost is 1, but reading the subscribe's 927 nodes took
	// 2 tokens (one per 500), and a refusal is never cheaper than that.
	if after := available(t, g.Base); after != before-2 {
		t.Errorf("the bucket holds %d after the refusal, %d before: want it charged 2, what reading it took", after, before)
	}
}

// 996 sibling fields under products(first: 0) cost 1 before: a document is
// now never cheaper than reading it, a token per 100 fields, and the refund
// does not go below that.
func TestBinaryFieldsSetTheFloor(t *testing.T) {
	g := start(t, nil, "-addr", "127.0.0.1:0")
	before := available(t, g.Base)
	res, body := postGraphQL(t, g.Base, queryBody("{ products(first: 0) { nodes { "+strings.Repeat("id ", 996)+"} } }", ""))
	a := readAnswer(t, body)
	if res.StatusCode != 200 || a.Extensions.Cost == nil {
		t.Fatalf("%d %.300s", res.StatusCode, body)
	}
	if got := a.Extensions.Cost.RequestedQueryCost; got != 10 {
		t.Errorf("requestedQueryCost %d, want 10 (998 fields)", got)
	}
	if after := available(t, g.Base); before-after != 10 {
		t.Errorf("charged %d after the refund, want 10", before-after)
	}
}

// Item 6: documents that cost the gateway work cannot make the store's
// checks time out and fail open. Four anonymous clients send, at once, the
// issue's 7.5 KB bomb and the 996-field document by turns (each with its own
// text: no cache helps), while a client with a key sends cheap queries; no
// check of the Redis store fails (50 ms timeout), so on_store_error: allow
// never admits anything unlimited. Before, four such documents pinned both
// cores for seconds.
func TestBinaryBombsCannotFailOpen(t *testing.T) {
	rds := redistest.StartServer(t)
	cfg := writeConfig(t, `listen: "127.0.0.1:0"
store:
  redis: {url: "redis://`+rds.Addr()+`/0", timeout: 50ms}
identity:
  hash_key: "a long random secret for the bombs test"
  api_keys:
    demo-free: {tenant: acme, plan: free}
policies:
  graphql: {algorithm: token_bucket, limit: 50, period: 1s, burst: 1000, key: [tenant, api_key], on_store_error: allow}
graphql:
  policy: graphql
`)
	g := start(t, nil, "-config", cfg)
	available(t, g.Base, "X-API-Key", "demo-free") // the store is up
	var wg sync.WaitGroup
	var done atomic.Bool
	for c := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 6 {
				q := fmt.Sprintf("# %d %d\n{ __typename } fragment F on Product { %s}", c, i, aliasPairs(1000))
				if i%2 == 1 {
					q = fmt.Sprintf("# %d %d\n{ products(first: 0) { nodes { %s} } }", c, i, strings.Repeat("id ", 996))
				}
				req, _ := http.NewRequest("POST", g.Base+"/graphql", strings.NewReader(queryBody(q, "")))
				req.Header.Set("Content-Type", "application/json")
				if res, err := http.DefaultClient.Do(req); err == nil {
					sc := bufio.NewScanner(res.Body)
					for sc.Scan() {
					}
					res.Body.Close()
				}
			}
		}()
	}
	go func() { wg.Wait(); done.Store(true) }()
	served := 0
	for i := 0; i < 50 || !done.Load(); i++ {
		res, _ := postGraphQL(t, g.Base, `{"query":"{ __typename }"}`, "X-API-Key", "demo-free")
		if res.StatusCode == 200 {
			served++
		}
	}
	wg.Wait()
	_, metrics := do(t, mustRequest(t, "GET", g.Base+"/metrics"))
	for _, line := range strings.Split(metrics, "\n") {
		if strings.HasPrefix(line, "costgate_store_errors_total") || strings.HasPrefix(line, "costgate_decisions_total") && strings.Contains(line, `decision="error_allowed"`) {
			if v := line[strings.LastIndexByte(line, ' ')+1:]; v != "0" {
				t.Errorf("%s: the store's checks failed under the bombs", line)
			}
		}
	}
	if served == 0 {
		t.Errorf("the keyed client was never served")
	}
}
