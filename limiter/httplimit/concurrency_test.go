package httplimit_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/httplimit"
	"github.com/costgate/costgate/limiter/identity"
	"github.com/costgate/costgate/limiter/memstore"
)

// concServer serves handler behind a route limited to limit requests of
// one client in flight, with a rate policy beside it; a panic is a 500, as
// chi's Recoverer answers it (without its stack trace on the test's output).
func concServer(t *testing.T, limit int64, handler http.Handler) (*httptest.Server, *memstore.Store) {
	t.Helper()
	store := memstore.New(nil)
	lim, err := limiter.New(store)
	if err != nil {
		t.Fatal(err)
	}
	rate := &limiter.Policy{Name: "api", Algorithm: limiter.TokenBucket, Limit: 1000, Period: time.Minute, Key: []string{"ip"}}
	conc := &limiter.Policy{Name: "streams", Algorithm: limiter.Concurrency, Limit: limit, Key: []string{"ip"}}
	m, err := httplimit.New(httplimit.Config{Limiter: lim, Identity: resolver(t, identity.Config{}),
		Routes: []httplimit.Route{{Pattern: "/*", Policies: []*limiter.Policy{rate, conc}}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(recoverer(m.Handler(handler)))
	t.Cleanup(srv.Close)
	return srv, store
}

func recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if recover() != nil {
				w.WriteHeader(http.StatusInternalServerError)
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// get sends GET url and returns the response, its body read and closed.
func get(t *testing.T, url string) (*http.Response, string) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

// A request holds its place until its response has ended: while two are in
// the handler a third is refused with 429 concurrency_limit and
// Retry-After: 1; once one has answered, the next gets in.
func TestConcurrencyHoldsUntilTheResponseEnds(t *testing.T) {
	entered := make(chan struct{}, 8)
	leave := make(chan struct{})
	srv, store := concServer(t, 2, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			entered <- struct{}{}
			<-leave
		}
		io.WriteString(w, "ok")
	}))
	done := make(chan int, 2)
	for range 2 {
		go func() {
			res, err := http.Get(srv.URL + "/slow")
			if err != nil {
				done <- 0
				return
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			done <- res.StatusCode
		}()
	}
	<-entered
	<-entered
	res, body := get(t, srv.URL+"/fast")
	if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") != "1" {
		t.Fatalf("a third request with two in flight: %d Retry-After %q, want 429 and 1", res.StatusCode, res.Header.Get("Retry-After"))
	}
	var e struct {
		Error, Policy string
		RetryAfterSec int64 `json:"retry_after_sec"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error != httplimit.CodeConcurrencyLimit || e.Policy != "streams" || e.RetryAfterSec != 1 {
		t.Errorf("body %s, want concurrency_limit of streams, retry 1", body)
	}
	if got := res.Header.Get("RateLimit-Policy"); !strings.Contains(got, `"streams";q=2;qu="concurrent-requests"`) {
		t.Errorf("RateLimit-Policy = %q", got)
	}
	leave <- struct{}{}
	if code := <-done; code != http.StatusOK {
		t.Fatalf("the first slow request: %d", code)
	}
	// Its response has ended, so its place is free (the memory store
	// releases before the response is finished).
	if res, _ := get(t, srv.URL+"/fast"); res.StatusCode != http.StatusOK {
		t.Errorf("after one of two ended: %d, want 200", res.StatusCode)
	}
	close(leave)
	<-done
	if n := store.Holds(); n != 0 {
		t.Errorf("%d holds left once every request ended", n)
	}
}

// A handler that panics still releases its place.
func TestConcurrencyReleasesOnPanic(t *testing.T) {
	srv, store := concServer(t, 1, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/panic" {
			panic("handler bug")
		}
		io.WriteString(w, "ok")
	}))
	for i := range 3 {
		if res, _ := get(t, srv.URL+"/panic"); res.StatusCode != http.StatusInternalServerError {
			t.Fatalf("panic %d: %d, want 500, not 429: the hold leaked", i, res.StatusCode)
		}
	}
	if res, _ := get(t, srv.URL+"/"); res.StatusCode != http.StatusOK {
		t.Errorf("after the panics: %d, want 200", res.StatusCode)
	}
	if n := store.Holds(); n != 0 {
		t.Errorf("%d holds left", n)
	}
}

// A client that goes away in the middle of a stream frees its place as
// soon as the handler sees it gone and returns.
func TestConcurrencyReleasesWhenTheClientGoes(t *testing.T) {
	returned := make(chan struct{}, 1)
	srv, store := concServer(t, 1, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() { returned <- struct{}{} }()
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for n := 1; ; n++ {
			fmt.Fprintf(w, "data: %d\n\n", n)
			if rc.Flush() != nil {
				return
			}
			select {
			case <-r.Context().Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}))
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/events", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(res.Body).ReadString('\n'); err != nil || line != "data: 1\n" {
		t.Fatalf("first event: %q %v", line, err)
	}
	if res, _ := get(t, srv.URL+"/events?second"); res.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("a second stream while the first is open: %d, want 429", res.StatusCode)
	}
	cancel()
	res.Body.Close()
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler did not return after the client left")
	}
	waitFor(t, "the place freed", func() bool { return store.Holds() == 0 })
}

// refund_status on a login limit: successes are refunded, so they never
// lock the user out; failures count; the headers of a success show the
// charge made when it started.
func TestRefundStatusCountsFailuresOnly(t *testing.T) {
	lim, err := limiter.New(memstore.New(nil))
	if err != nil {
		t.Fatal(err)
	}
	login := &limiter.Policy{Name: "login", Algorithm: limiter.SlidingLog, Limit: 3, Period: time.Hour, Key: []string{"ip"}, RefundStatus: []string{"2xx"}}
	m, err := httplimit.New(httplimit.Config{Limiter: lim, Identity: resolver(t, identity.Config{}),
		Routes: []httplimit.Route{{Pattern: "POST /login", Policies: []*limiter.Policy{login}}}})
	if err != nil {
		t.Fatal(err)
	}
	h := recoverer(m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Query().Get("panic") != "":
			w.WriteHeader(http.StatusOK)
			panic("after the status")
		case r.URL.Query().Get("ok") == "":
			w.WriteHeader(http.StatusUnauthorized)
		}
	})))
	post := func(query string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("POST", "/login"+query, nil))
		return w
	}
	for i := range 10 {
		w := post("?ok=1")
		if w.Code != http.StatusOK || w.Header().Get("X-RateLimit-Remaining") != "2" {
			t.Fatalf("success %d: %d remaining %q, want 200 with 2 left (charged, then refunded)", i, w.Code, w.Header().Get("X-RateLimit-Remaining"))
		}
	}
	for i := range 2 {
		if w := post(""); w.Code != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d, want 401", i, w.Code)
		}
	}
	post("?panic=1") // a handler that panicked is not refunded, whatever it wrote
	if w := post("?ok=1"); w.Code != http.StatusTooManyRequests {
		t.Errorf("after 2 failures and a panic: %d, want 429 (failures count, and lock)", w.Code)
	}
}

// waitFor polls cond until it holds or 10s passed: it waits for an event.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen within 10s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
